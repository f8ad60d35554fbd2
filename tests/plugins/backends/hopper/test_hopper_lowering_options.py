"""Hopper policy options the lowering reads: `tma` (plain tile views through TMA tensor
descriptors, with the pointer path kept for unaligned tensors), `warp_specialize` (needs
tma and 4 warps in Triton 3.6), `persistent` (programs per SM looping over the tiles).

Cross-compiled for sm_90 (SASS shows the TMA loads, PTX the warp-specialization register
split) and run in the interpreter on aligned and ragged shapes; no GPU here."""

from __future__ import annotations

import pytest

from argus_core.errors import PolicyError
from argus_core.pipeline import Stages
from argus_core.plugin_manager import Registry, default_plugin_manager
from argus_core.types import Candidate, Policy
from argus_plugins.backends.hopper.backend import HopperBackend
from argus_plugins.backends.hopper.spec import H200

TILES = {"BM": 64, "BN": 64, "BK": 32, "GROUP": 8}


def _lower(family_name: str, entry: str, tiles, options):
    """`entry` of the family lowered by the h200 backend with these lowering options."""
    registry = Registry(default_plugin_manager())
    fam = registry.get("kernel", family_name)
    ir = registry.get("dsl", "tile").parse(fam.source(), entry, str(fam.source_path))
    return registry.get("backend", "h200").lower(ir, Policy(tiles, options), {"dtype": "bf16"})


def _stages(kernel: str, *overrides: str) -> Stages:
    from argus_core.config import compose

    cfg = compose([f"+kernel={kernel}", "backend=h200", "tracking=none", *overrides])
    return Stages.from_config(cfg, Registry(default_plugin_manager()))


def test_tma_lowers_plain_tiles_to_descriptors_with_a_pointer_fallback():
    low = _lower("gemm", "gemm", TILES, {"tma": 1})
    src = low.source
    assert src.count("tl.make_tensor_descriptor(") == 3 and low.tma_tensors == ["a", "b", "c"]
    assert "a_desc.load([pid_m * BM, k * BK])" in src and "c_desc.store(" in src
    assert src.count("if USE_TMA:") == 4 and src.count("tl.load(") == 2  # fallback kept
    assert "USE_TMA" in [p.name for p in low.params] and low.constexprs["USE_TMA"] == 1
    plain = _lower("gemm", "gemm", TILES, {})
    assert "USE_TMA" not in plain.source and not plain.tma_tensors


def test_use_tma_is_chosen_at_launch_from_the_tensors():
    """USE_TMA is bound to the descriptors' tensors: 1 when they meet the descriptor
    contract (aligned pitches), 0 for ragged ones (bf16 K=83: a 166-byte row pitch)."""
    import torch

    from argus_core.evaluate.launch import launch_args

    low = _lower("gemm", "gemm", TILES, {"tma": 1})
    assert low.params[-1].binding == ("descriptors", "a", "b", "c")

    def use_tma(m: int, n: int, k: int) -> int:
        def t(*shape: int):
            return torch.empty(*shape, dtype=torch.bfloat16)

        args, _ = launch_args(low, {"a": t(m, k), "b": t(k, n), "c": t(m, n)}, TILES)
        return args[[p.name for p in low.params].index("USE_TMA")]

    assert use_tma(64, 64, 64) == 1 and use_tma(67, 45, 83) == 0


def test_tma_boxes_permuted_views_and_keeps_pointers_for_gathers():
    attn = _lower("attention", "attention", {"BM": 64, "BN": 32, "HEAD_D": 64}, {"tma": 1})
    src = attn.source
    # tiles of q[b, h] are 4-D boxes, reshaped; Kᵀ is the K box permuted after the load
    assert "block_shape=[1, 1, BM, HEAD_D]" in src and ".reshape((BM, HEAD_D))" in src
    assert ".reshape((BN, HEAD_D)).permute(1, 0)" in src
    assert attn.tma_tensors == ["k", "lse", "o", "q", "v"]
    up = _lower(
        "moe", "moe_up", {"BM": 16, "BN": 32, "BK": 32}, {"tma": 1}
    )  # rows gathered by token: x stays on pointers
    assert "x_desc" not in up.source and "x" not in up.tma_tensors


def test_sm90_cross_compile_shows_tma_and_warp_specialization():
    hopper = HopperBackend("h200", H200)
    dtypes = {"a": "bf16", "b": "bf16", "c": "bf16"}
    tiles = {"BM": 128, "BN": 128, "BK": 64, "GROUP": 8}
    for opts, warps in (({"tma": 1}, 8), ({"tma": 1, "warp_specialize": 1}, 4)):
        pol = Policy(tiles, {"num_warps": warps, "num_stages": 3, **opts})
        hopper.validate_policy(pol)
        rep = hopper.compile(_lower("gemm", "gemm", tiles, opts), dtypes, pol)
        assert rep.ok, rep.error
        assert "UTMALDG" in rep.asm and rep.mma_count > 0  # TMA loads feeding HGMMA
    plain = hopper.compile(_lower("gemm", "gemm", tiles, {}), dtypes, Policy(tiles, {}))
    assert "UTMALDG" not in plain.asm


def test_hopper_validates_the_lowering_options():
    hopper = HopperBackend("h200", H200)
    with pytest.raises(PolicyError, match="warp_specialize=1 needs tma=1"):
        hopper.validate_policy(Policy(TILES, {"warp_specialize": 1}))
    with pytest.raises(PolicyError, match="needs num_warps=4"):
        hopper.validate_policy(Policy(TILES, {"warp_specialize": 1, "tma": 1, "num_warps": 8}))
    with pytest.raises(PolicyError, match="value of persistent"):
        hopper.validate_policy(Policy(TILES, {"persistent": 7}))
    stages = _stages("gemm", "backend=mi300x")
    with pytest.raises(PolicyError, match="compiler option 'tma'"):
        stages.backend.validate_policy(Policy(TILES, {"tma": 1}))


@pytest.mark.slow
@pytest.mark.parametrize(
    "opts",
    [{"tma": 1}, {"persistent": 1}, {"tma": 1, "warp_specialize": 1, "persistent": 2}],
    ids=["tma", "persistent", "tma-ws-persistent"],
)
def test_pipeline_candidate_with_hopper_options_is_correct_in_the_interpreter(opts):
    """Verified, compiled for sm_90 and correct in the interpreter on the config's check
    shapes: ragged 67x45x83 (bf16 row pitch of 166 bytes: the pointer path) and 64x64x64
    (aligned: the TMA path)."""
    stages = _stages("gemm", "evaluate.trials=1", "kernel.shape={M:256,N:256,K:256}")
    fam = stages.family
    cand = Candidate(
        id="c1",
        kernel="gemm",
        source=fam.source(),
        entry="gemm",
        policy=Policy(TILES, {"num_warps": 4, "num_stages": 3, **opts}),
    )
    res, artifacts = stages.evaluate(cand, 0, None)
    assert res.ok, res.failure
    assert res.correctness is not None and res.correctness.ok
    if opts.get("tma"):
        assert "make_tensor_descriptor" in artifacts["lowered_triton.py"]
    if opts.get("persistent"):
        assert "tl.num_programs(0)" in artifacts["lowered_triton.py"]


def test_planners_offer_the_hopper_options_through_the_kb():
    """tma_loads, warp_specialization and persistent_grid are ready policy techniques for
    the Hopper backends (and only there): the icrl/search action space applies them."""
    from argus_core import kb
    from argus_core.planning.actions import applicable_techniques

    shape = {"M": 4096, "N": 4096, "K": 4096}
    hopper = {t.id for t in applicable_techniques(kb.load(), "gemm", "h200", shape)}
    assert {"tma_loads", "warp_specialization", "persistent_grid"} <= hopper
    amd = {t.id for t in applicable_techniques(kb.load(), "gemm", "mi300x", shape)}
    assert not {"tma_loads", "warp_specialization", "persistent_grid"} & amd
    ws = kb.load().get("warp_specialization")
    pol = Policy(TILES, {"num_warps": 8})
    new = Policy(TILES, {**pol.compiler, **{k: v[0] for k, v in ws.action.compiler.items()}})
    HopperBackend("h200", H200).validate_policy(new)  # the technique's own values are valid


@pytest.mark.slow
def test_attention_with_tma_is_correct_in_the_interpreter_on_aligned_shapes():
    """Every attention tile through descriptors (Kᵀ a permuted box): causal GQA and
    non-causal, S != SKV, at pitches TMA accepts (the TMA path runs), against SDPA."""
    shapes = (
        "kernel.check_shapes=[{B:1,HQ:4,HKV:2,S:48,SKV:64,D:64,CAUSAL:1,VARLEN:0},"
        "{B:1,HQ:2,HKV:2,S:32,SKV:96,D:64,CAUSAL:0,VARLEN:0}]"
    )
    stages = _stages("attention", "evaluate.trials=1", shapes)
    fam = stages.family
    cand = Candidate(
        id="c1",
        kernel="attention",
        source=fam.source(),
        entry="attention",
        policy=Policy({"BM": 64, "BN": 32, "HEAD_D": 64}, {"num_warps": 4, "tma": 1}),
    )
    res, artifacts = stages.evaluate(cand, 0, None)
    assert res.ok, res.failure
    assert "k_desc.load(" in artifacts["lowered_triton.py"]
