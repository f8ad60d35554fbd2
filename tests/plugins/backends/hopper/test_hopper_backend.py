"""The Hopper backends cross-compile DSL kernels for sm_90 with no GPU and read the cubin."""

from __future__ import annotations

from pathlib import Path

import pytest

from argus_core.errors import PolicyError
from argus_core.target import H200
from argus_core.types import Policy
from argus_plugins.backends.hopper.backend import HopperBackend
from argus_plugins.dsl.tile.frontend import TileFrontend

GEMM = Path(__file__).parents[4] / "argus_core" / "kernels" / "gemm" / "kernel.py"


@pytest.fixture(scope="module")
def gemm_lowered():
    ir = TileFrontend().parse(GEMM.read_text(), "gemm", str(GEMM))
    policy = Policy({"BM": 128, "BN": 128, "BK": 64, "GROUP": 8}, {"num_warps": 8, "num_stages": 3})
    return TileFrontend().lower(ir, policy, "triton", {}), policy


def test_gemm_compiles_for_sm90_with_warpgroup_mma(gemm_lowered):
    lowered, policy = gemm_lowered
    report = HopperBackend("h200", H200).compile(
        lowered, {"a": "bf16", "b": "bf16", "c": "bf16"}, policy
    )
    assert report.ok, report.error
    assert report.target == "cuda:90" and report.asm_kind == "sass"
    assert report.mma_count and report.instructions["hgmma"] == report.mma_count  # wgmma, not HMMA
    assert 0 < report.registers <= 255 and report.spills == 0
    assert report.shared_bytes >= 2 * (128 * 64 + 64 * 128) * 2  # two stages of bf16 A and B tiles
    assert "HGMMA" in report.asm


def test_policies_are_validated_for_the_target():
    backend = HopperBackend("h100", H200)
    with pytest.raises(PolicyError, match="waves_per_eu"):
        backend.validate_policy(Policy({"BM": 64}, {"waves_per_eu": 2}))
    with pytest.raises(PolicyError, match="num_stages"):
        backend.validate_policy(Policy({"BM": 64}, {"num_stages": 9}))
    with pytest.raises(PolicyError, match="shared memory"):
        backend.validate_policy(Policy({"BM": 256, "BN": 256, "BK": 128}, {"num_stages": 5}))


def test_a_kernel_that_does_not_compile_is_reported_not_raised(gemm_lowered):
    lowered, policy = gemm_lowered
    broken = type(lowered)(
        **{**lowered.__dict__, "source": lowered.source.replace("tl.dot(", "tl.dott(")}
    )
    report = HopperBackend("h200", H200).compile(
        broken, {"a": "bf16", "b": "bf16", "c": "bf16"}, policy
    )
    assert not report.ok and "dott" in report.error
