"""The Hopper backends cross-compile DSL kernels for sm_90 with no GPU and read the cubin."""

from __future__ import annotations

import pytest

from argus_core.errors import PolicyError
from argus_core.plugin_manager import Registry, make_plugin_manager
from argus_core.protocols import Backend
from argus_core.types import Policy
from argus_plugins.backends.hopper.backend import HopperBackend
from argus_plugins.backends.hopper.spec import H100, H200


@pytest.fixture(scope="module")
def gemm_lowered():
    registry = Registry(make_plugin_manager(autoload=False))
    gemm = registry.get("kernel", "gemm")
    ir = registry.get("dsl", "tile").parse(gemm.source(), "gemm", str(gemm.source_path))
    policy = Policy({"BM": 128, "BN": 128, "BK": 64, "GROUP": 8}, {"num_warps": 8, "num_stages": 3})
    return HopperBackend("h200", H200).lower(ir, policy, {"dtype": "bf16"}), policy


def test_registered_with_their_sm90_specs():
    registry = Registry(make_plugin_manager(autoload=False))
    for name, spec in (("h100", H100), ("h200", H200)):
        b = registry.get("backend", name)
        assert isinstance(b, Backend) and b.spec == spec and b.lowering.rules.name == "hopper"
        assert b.resolve(registry, {"name": name}) == (b, {})
    assert H200.wave_size == H100.wave_size == 32 and H200.cus == 132
    assert H200.hbm_tbps > H100.hbm_tbps and H200.lds_bytes_per_cu == 227 * 1024
    assert any(i.startswith("wgmma") for i in H200.matrix_instructions)


def test_the_lowering_options_never_reach_the_compiler():
    policy = Policy({}, {"num_warps": 4, "tma": 1, "warp_specialize": 1, "persistent": 2})
    assert HopperBackend("h200", H200).compiler_options(policy) == {"num_warps": 4}


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
