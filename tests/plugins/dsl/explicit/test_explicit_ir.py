"""The explicit-level IR and DSL: declarations, program points, errors, the generic Gluon
lowering's structure, and the verifier on the shipped kernel at several configurations."""

from __future__ import annotations

import pytest

from argus_core.ir import explicit as x
from argus_core.lowering.gluon import lower_explicit
from argus_plugins.backends.hopper.gluon import HOPPER_GLUON, desc_type, lower
from argus_plugins.kernels.gemm.kernel_explicit import build
from argus_plugins.verifiers.smt.explicit_ops import verify_explicit
from argus_plugins.verifiers.smt.transfer import EXPLICIT_LEVEL


def test_program_points_name_partition_loops_and_op():
    points = [op.point for _, op in build().ops()]
    assert "mma/tile/kk/0:Wait" in points
    assert "load/tile/kk/2:TmaLoad" in points
    assert len(points) == len(set(points))


def test_bad_swizzle_names_the_value_and_the_choices():
    with pytest.raises(
        x.ExplicitIRError, match=r"invalid swizzle_bytes 48; valid choices: 0, 32, 64, 128"
    ):
        x.NVMMAShared(48)


def test_unknown_program_point_lists_the_valid_ones():
    with pytest.raises(
        x.ExplicitIRError, match="invalid program point 'mma/9:Wait'.*mma/tile/kk/0:Wait"
    ):
        x.replace_op(build(), "mma/9:Wait", None)


def test_unknown_constexpr_override_is_an_error():
    with pytest.raises(x.ExplicitIRError, match="invalid constexpr 'BQ'"):
        build().with_consts(BQ=64)


def test_kernel_needs_exactly_one_default_partition():
    k = build()
    parts = tuple(x.Partition(p.name, p.body, p.warps, p.regs, False) for p in k.partitions)
    with pytest.raises(x.ExplicitIRError, match="exactly one partition must be the default"):
        x.ExplicitKernel(k.name, k.descs, k.scalars, k.consts, k.shared, k.barriers, parts)


def test_shared_bytes_counts_ring_epilogue_and_barriers():
    k = build()  # 4 stages of (128x64 + 64x128) bf16, a 128x128 bf16 tile, 8 mbarriers
    assert k.shared_bytes() == 4 * (128 * 64 + 64 * 128) * 2 + 128 * 128 * 2 + 8 * 8


def test_hopper_lowering_forks_partitions_and_keeps_protocol_expressions():
    src = lower(build())
    assert "gl.warp_specialize([" in src
    assert "(_part_mma," in src.split("gl.warp_specialize([")[1].splitlines()[1]  # default first
    assert "], [1], [24])" in src
    assert "mbarrier.wait(ready.index(it % STAGES), it // STAGES % 2)" in src
    assert "mbarrier.wait(empty.index(it % STAGES), (it // STAGES + 1) % 2)" in src
    assert (
        "warpgroup_mma(a_ring.index(it % STAGES), b_ring.index(it % STAGES), acc, is_async=True)"
        in src
    )
    assert "mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=kk > 0)" in src
    assert "acc = warpgroup_mma_wait(1, deps=(acc,))" in src
    assert "group_rows = gl.minimum(gl.cdiv(M, BM) - first_m, GROUP)" in src
    assert src.count("it += 1") == 2


def test_unpipelined_variant_waits_for_each_wgmma_and_releases_its_own_stage():
    src = lower(build(4, mma_in_flight=0))
    assert "acc = warpgroup_mma_wait(0, deps=(acc,))" in src
    assert "mbarrier.arrive(empty.index(it % STAGES), count=1)" in src
    with pytest.raises(ValueError, match="invalid mma_in_flight 2; valid choices: 0, 1"):
        build(4, mma_in_flight=2)


def test_a_target_without_a_rule_names_the_op():
    target = HOPPER_GLUON.__class__(
        name="no-wgmma",
        imports=HOPPER_GLUON.imports,
        rules={t: r for t, r in HOPPER_GLUON.rules.items() if t is not x.Wgmma},
    )
    with pytest.raises(x.ExplicitIRError, match="no-wgmma: invalid explicit op 'Wgmma'"):
        lower_explicit(build(), target)


def test_descriptor_signature_carries_block_and_swizzle():
    k = build()
    assert (
        desc_type(k, k.desc("b_desc"), k.consts)
        == "tensordesc<bf16[64, 128],NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, "
        "rank=2, transposed=False)>"
    )


@pytest.mark.parametrize("stages", [2, 3, 4, 5])
@pytest.mark.parametrize(("warps", "in_flight"), [(4, 1), (8, 1), (4, 0)])
def test_shipped_gemm_verifies_at_every_ring_depth(stages, warps, in_flight):
    report = verify_explicit(build(warps, in_flight).with_consts(STAGES=stages))
    assert report.status == "verified", report.counterexamples
    assert report.assertions >= 15
    # the 2 s budget is measured by benchmarks/gluon_bench.py --dry-run, not asserted here


def test_one_stage_ring_needs_the_unpipelined_consumer():
    # with one stage, "release the previous iteration's stage" releases the stage the
    # in-flight wgmma is reading: the verifier must reject it, and accept the wait(0) form
    bad = verify_explicit(build(4, 1).with_consts(STAGES=1))
    assert any(c["kind"] == "release-before-complete" for c in bad.counterexamples)
    assert verify_explicit(build(4, 0).with_consts(STAGES=1)).status == "verified"


def test_verifier_is_registered_in_the_transfer_module():
    from argus_plugins.verifiers.smt import explicit_spec

    # the thread-level invariants, plus the reference's spec where one is attached (#19)
    assert EXPLICIT_LEVEL is explicit_spec.verify
    k = build()
    assert EXPLICIT_LEVEL(k).summary == verify_explicit(k).summary
