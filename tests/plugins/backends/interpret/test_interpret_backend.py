"""The interpret backend runs another target's code: it lowers with that target's rules plus
its fp32 dot operands, checks the lowered source, accepts GPU warps/stages, and estimates
with that target's cost model."""

from __future__ import annotations

import pytest

from argus_core.errors import ConfigError, PolicyError
from argus_core.evaluate.costmodel import estimate_time
from argus_core.evaluate.reference_kernels import gemm_lowered
from argus_core.plugin_manager import Registry, make_plugin_manager
from argus_core.protocols import Backend
from argus_core.types import Policy
from argus_plugins.backends.interpret import InterpretBackend
from argus_plugins.kernels.gemm import GemmFamily

POLICY = Policy(
    tiles={"BM": 32, "BN": 32, "BK": 16, "GROUP": 2}, compiler={"num_warps": 4, "num_stages": 2}
)


LOWER_POLICY = Policy({"BM": 64, "BN": 64, "BK": 32, "GROUP": 8}, {"num_warps": 4})


@pytest.fixture(scope="module")
def registry():
    return Registry(make_plugin_manager(autoload=False))


@pytest.fixture
def backend(registry, tmp_path):
    """`backend=interpret` as a run resolves it: emulating the mi300x."""
    bound, _ = InterpretBackend(workdir=tmp_path).resolve(registry, {"name": "interpret"})
    return bound


@pytest.fixture(scope="module")
def gemm_ir(registry):
    gemm = registry.get("kernel", "gemm")
    return registry.get("dsl", "tile").parse(gemm.source(), "gemm", str(gemm.source_path))


def test_registered_and_follows_the_protocol(registry):
    b, grid = registry.get("backend", "interpret").resolve(
        registry, {"name": "interpret", "policy_grid": {"num_warps": [4]}}
    )
    assert isinstance(b, Backend) and grid == {"num_warps": [4]}
    assert b.name == "interpret" and b.lowering.rules.name == "interpret(mi300x)"
    assert b.spec == registry.get("backend", "mi300x").spec  # the emulated target's
    assert b.device_available() is True


def test_without_a_target_it_says_how_to_get_one(registry):
    unbound = registry.get("backend", "interpret")
    with pytest.raises(ConfigError, match=r"resolve\(registry, cfg\).*'mi300x'"):
        unbound.spec  # noqa: B018
    with pytest.raises(ConfigError, match="options.emulates must name"):
        unbound.resolve(registry, {"options": {"emulates": "interpret"}})


def test_interpreter_lowering_upcasts_only_the_dot(registry, backend, gemm_ir):
    plain = registry.get("backend", "mi300x").lower(gemm_ir, LOWER_POLICY, {"dtype": "bf16"})
    upcast = backend.lower(gemm_ir, LOWER_POLICY, {"dtype": "bf16"})
    plain_lines, upcast_lines = plain.source.splitlines(), upcast.source.splitlines()
    changed = [(a, b) for a, b in zip(plain_lines, upcast_lines) if a != b]
    assert len(plain_lines) == len(upcast_lines) and len(changed) == 1
    assert "tl.dot(x.to(tl.float32), y.to(tl.float32), acc)" in changed[0][1]


def test_it_runs_the_emulated_targets_code(registry, gemm_ir):
    """Emulating h200, the TMA path and persistent grid are the h200's, dots upcast (how
    the pipeline checks an h200 candidate on the CPU)."""
    interp, _ = registry.get("backend", "interpret").resolve(
        registry, {"options": {"emulates": "h200"}}
    )
    h200 = registry.get("backend", "h200")
    policy = Policy(LOWER_POLICY.tiles, {"num_warps": 4, "tma": 1, "persistent": 1})
    on_gpu = h200.lower(gemm_ir, policy, {"dtype": "bf16"})
    on_cpu = interp.lower(gemm_ir, policy, {"dtype": "bf16"})
    assert on_cpu.source == on_gpu.source.replace(
        "tl.dot(x, y, acc)", "tl.dot(x.to(tl.float32), y.to(tl.float32), acc)"
    )
    assert on_cpu.grid == on_gpu.grid == "(min(triton.cdiv(M, BM) * triton.cdiv(N, BN), 132),)"
    assert on_cpu.tma_tensors == ["a", "b", "c"] and interp.spec == h200.spec
    assert interp.compiler_options(policy) == {"num_warps": 4}


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


def test_estimate_is_the_mi300x_cost_model(registry, backend):
    shape = {"M": 1024, "N": 1024, "K": 1024}
    got = backend.estimate(GemmFamily(), shape, "bf16", POLICY, None)
    assert got.estimated
    mi300x = registry.get("backend", "mi300x").spec
    assert got.ms == estimate_time(mi300x, GemmFamily(), shape, "bf16", POLICY, None).ms
