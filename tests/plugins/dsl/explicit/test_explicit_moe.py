"""The MoE grouped GEMM at the explicit level: verified, lowered with the expert table and
the transposed weights, cross-compiled for sm_90 without spills, chosen by a `level:
explicit` policy of the MoE family; its launcher's routing, gather and scatter give the
family's reference when the GEMM is exact."""

from __future__ import annotations

import pytest
import torch

from argus_core.errors import PolicyError
from argus_core.evaluate.outputs import compare
from argus_core.types import Policy
from argus_plugins.backends.hopper.gluon import compile_explicit, lower
from argus_plugins.kernels.moe import kernel_explicit as ke
from argus_plugins.kernels.moe.family import CHECK_SHAPES, MoEFamily
from argus_plugins.verifiers.smt.explicit_ops import verify_explicit


@pytest.mark.parametrize(("warps", "fly", "fused"), [(8, 1, False), (4, 0, False), (8, 1, True)])
def test_moe_kernel_is_verified(warps, fly, fused):
    report = verify_explicit(ke.build(warps, fly, fused))
    assert report.status == "verified", report.counterexamples
    assert report.assertions >= 20  # ring, fragment, output and group tags, races


def test_moe_lowering_reads_the_expert_table_and_transposed_weights():
    src = lower(ke.build())
    assert "expert = gl.load(expert_ptr + off_m // BM)" in src
    assert "tma.async_copy_global_to_shared(b_desc, [expert * N + off_n, kk * BK]" in src
    assert ".permute((1, 0))" in src


@pytest.mark.parametrize(
    ("fused", "consts"),
    [(False, {"BM": 128, "BN": 256, "BK": 64, "STAGES": 3}), (True, {"BN": 128, "STAGES": 3})],
)
def test_moe_kernel_cross_compiles_for_sm90_without_spills(fused, consts):
    report = compile_explicit(ke.build(8, 1, fused), consts)
    assert report.ok, report.error
    assert report.spills == 0
    assert report.instructions["hgmma"] > 0 and report.instructions["utmaldg"] >= 2


def test_moe_family_builds_the_explicit_kernel_from_a_level_policy():
    fam = MoEFamily()
    policy = Policy(
        {"BM": 128, "BN": 256, "BK": 64, "STAGES": 3, "GROUP": 8, "BT": 32},
        {"level": "explicit", "num_warps": 8},
    )
    kernel = fam.explicit_kernel(policy, "hopper-gluon", CHECK_SHAPES[0])
    assert kernel.name == "moe_grouped_gemm_ws" and kernel.consts["BN"] == 256
    amd = fam.explicit_kernel(Policy({}, {"level": "explicit"}), "cdna3-gluon", {})
    assert amd.name == "moe_grouped_gemm_cdna3"


@pytest.mark.parametrize(
    ("knobs", "tiles", "target", "match"),
    [
        ({"consumers": 2}, {}, "hopper-gluon", "invalid explicit MoE option 'consumers'"),
        ({"num_warps": 2}, {}, "hopper-gluon", "invalid num_warps 2"),
        ({"num_warps": 4}, {"BN": 256}, "hopper-gluon", "256 registers per thread"),
        ({"fuse_silu": 1}, {"BN": 256}, "hopper-gluon", "2 128x256 fp32 accumulator"),
        ({}, {}, "ampere", "invalid explicit MoE target 'ampere'"),
        ({"num_warps": 8}, {}, "cdna3-gluon", "invalid explicit MoE option 'num_warps'"),
    ],
)
def test_moe_for_policy_names_the_bad_value(knobs, tiles, target, match):
    with pytest.raises(PolicyError, match=match):
        ke.for_policy(knobs, tiles, target)


@pytest.mark.parametrize("fused", [False, True])
def test_moe_launcher_routes_gathers_and_scatters_like_the_reference(monkeypatch, fused):
    """The layer around the GEMM (routing, alignment, gather, SiLU * up, weights, scatter)
    on the CPU with an exact per-block GEMM in place of the Gluon launch (fused: the
    up-projection's epilogue computes silu(gate) * up from w1's stacked rows)."""

    def exact(kernel, source):
        bm = kernel.consts["BM"]

        def run(a, w, c, block_expert, num_blocks):
            c.fill_(float("nan"))  # rows past the blocks in use stay unwritten
            n = c.shape[1]
            for b in range(int(num_blocks[0])):
                rows = slice(b * bm, (b + 1) * bm)
                out = a[rows].float() @ w[int(block_expert[b])].float().T
                if kernel.meta.get("fused"):
                    out = torch.nn.functional.silu(out[:, :n]) * out[:, n:]
                c[rows] = out.to(c.dtype)

        return run

    monkeypatch.setattr(ke, "gemm_launcher", exact)
    fam = MoEFamily()
    kernel = ke.build(8, 1, fused).with_consts(BM=16)
    assert kernel.meta["fused"] is fused
    run = ke.launcher(kernel, "")
    for shape in [*CHECK_SHAPES, {"T": 256, "E": 8, "TOPK": 2, "H": 512, "I": 384, "RENORM": 1}]:
        inputs = fam.make_inputs(shape, "bf16", 0, "cpu")
        run(inputs)
        ok, err, _, why = compare(
            inputs["out"], fam.reference(inputs)["out"], *fam.tolerance("bf16")
        )
        assert ok, (shape, why)


@pytest.mark.parametrize(
    ("t", "e", "topk", "bm"), [(37, 8, 2, 16), (3, 64, 6, 128), (300, 8, 2, 64)]
)
def test_alignment_on_the_device_matches_align_blocks(t, e, topk, bm):
    import torch

    from argus_plugins.kernels.moe.routing import align_blocks, padded_capacity, route

    gen = torch.Generator().manual_seed(t)
    ids, _ = route(torch.randn(t, e, generator=gen), topk, True)
    want_ids, want_experts, used = align_blocks(ids, e, bm)
    sorted_ids, block_expert, num_blocks = ke.align_on_device(ids, e, bm)
    assert sorted_ids.numel() == padded_capacity(t * topk, e, bm) >= used
    assert int(num_blocks[0]) * bm == used
    assert torch.equal(sorted_ids[:used], want_ids)
    assert bool((sorted_ids[used:] == t * topk).all())  # the sentinel past the used rows
    assert torch.equal(block_expert[: used // bm], want_experts)


def test_fused_lowering_pairs_gate_and_up_rows_and_applies_silu():
    src = lower(ke.build(8, 1, True))
    assert "[expert * (2 * N) + off_n, kk * BK], ready.index(it % STAGES), g_ring" in src
    assert "[expert * (2 * N) + N + off_n, kk * BK], ready.index(it % STAGES), u_ring" in src
    assert "acc_g, acc_u = warpgroup_mma_wait(2, deps=(acc_g, acc_u,))" in src
    assert "acc_g = acc_g / (1.0 + gl.exp(-acc_g)) * acc_u" in src
