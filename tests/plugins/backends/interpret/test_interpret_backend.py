"""The interpret backend checks the lowered source, accepts GPU warps/stages, and estimates."""

from __future__ import annotations

import pytest

from argus_core.errors import PolicyError
from argus_core.evaluate.costmodel import MI300X, estimate_time
from argus_core.evaluate.reference_kernels import gemm_lowered
from argus_core.kernels.gemm import GemmFamily
from argus_core.plugin_manager import Registry, make_plugin_manager
from argus_core.protocols import Backend
from argus_core.types import Policy
from argus_plugins.backends.interpret import InterpretBackend

POLICY = Policy(
    tiles={"BM": 32, "BN": 32, "BK": 16, "GROUP": 2}, compiler={"num_warps": 4, "num_stages": 2}
)


@pytest.fixture
def backend(tmp_path):
    return InterpretBackend(workdir=tmp_path)


def test_registered_and_follows_the_protocol():
    b = Registry(make_plugin_manager(autoload=False)).get("backend", "interpret")
    assert isinstance(b, Backend)
    assert (b.name, b.lowering) == ("interpret", "triton")
    assert b.lowering_options == {"dot_upcast_fp32": True}
    assert b.device_available() is True


def test_compile_checks_the_source_defines_the_kernel(backend):
    report = backend.compile(gemm_lowered(POLICY.tiles, "bf16", dot_upcast_fp32=True), {}, POLICY)
    assert report.ok and report.target == "interpret"
    assert report.registers is None and report.asm == ""


def test_compile_reports_syntax_and_name_errors(backend):
    lowered = gemm_lowered(POLICY.tiles, "bf16", True)
    lowered.source = lowered.source.replace("def gemm(", "def gemm((")
    report = backend.compile(lowered, {}, POLICY)
    assert not report.ok and "SyntaxError" in report.error
    lowered = gemm_lowered(POLICY.tiles, "bf16", True)
    lowered.source = lowered.source.replace(
        "import triton.language as tl", "import triton.language as tl\nundefined_name"
    )
    report = backend.compile(lowered, {}, POLICY)
    assert not report.ok and "undefined_name" in report.error


def test_policy_space_is_warps_and_stages_only(backend):
    assert set(backend.policy_space()) == {"num_warps", "num_stages"}
    backend.validate_policy(POLICY)
    with pytest.raises(PolicyError, match="'waves_per_eu'.*num_warps, num_stages"):
        backend.validate_policy(Policy(compiler={"waves_per_eu": 2}))
    with pytest.raises(PolicyError, match="BN=24"):
        backend.validate_policy(Policy(tiles={"BM": 32, "BN": 24, "BK": 16}))


def test_estimate_is_the_mi300x_cost_model(backend):
    shape = {"M": 1024, "N": 1024, "K": 1024}
    got = backend.estimate(GemmFamily(), shape, "bf16", POLICY, None)
    assert got.estimated
    assert got.ms == estimate_time(MI300X, GemmFamily(), shape, "bf16", POLICY, None).ms
