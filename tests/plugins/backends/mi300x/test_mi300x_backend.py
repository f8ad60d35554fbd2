"""gfx942 cross-compilation of the hand-lowered GEMM, its static report, policy checks."""

from __future__ import annotations

import pytest

from argus_core.errors import PolicyError
from argus_core.evaluate.reference_kernels import gemm_lowered
from argus_core.plugin_manager import Registry, make_plugin_manager
from argus_core.protocols import Backend
from argus_core.types import Policy
from argus_plugins.backends.mi300x import Mi300xBackend
from argus_plugins.kernels.gemm import GemmFamily

GOOD = Policy(
    tiles={"BM": 128, "BN": 128, "BK": 32, "GROUP": 8}, compiler={"num_warps": 4, "num_stages": 2}
)
TINY = Policy(
    tiles={"BM": 16, "BN": 16, "BK": 16, "GROUP": 8}, compiler={"num_warps": 1, "num_stages": 2}
)


@pytest.fixture(scope="module")
def backend(tmp_path_factory):
    return Mi300xBackend(workdir=tmp_path_factory.mktemp("kernels"))


@pytest.fixture(scope="module")
def good_report(backend):
    return backend.compile(gemm_lowered(GOOD.tiles, "bf16"), {}, GOOD)


def test_registered_and_follows_the_protocol():
    b = Registry(make_plugin_manager(autoload=False)).get("backend", "mi300x")
    assert isinstance(b, Backend)
    # the generic Triton rules, every policy option a compiler option
    assert (b.name, b.lowering.rules.name) == ("mi300x", "triton")
    assert b.compiler_options(GOOD) == GOOD.compiler
    assert b.resolve(None, {"name": "mi300x", "policy_grid": {"num_warps": [4]}}) == (
        b,
        {"num_warps": [4]},
    )


def test_declares_the_gfx942_target():
    spec = Registry(make_plugin_manager(autoload=False)).get("backend", "mi300x").spec
    assert (spec.name, spec.wave_size, spec.cus, spec.lds_bytes_per_cu) == (
        "mi300x",
        64,
        304,
        65536,
    )
    assert spec.regs_per_lane == 512
    assert any("16x16" in i for i in spec.matrix_instructions)
    assert any("32x32" in i for i in spec.matrix_instructions)


def test_gemm_cross_compiles_to_mfma(good_report):
    assert good_report.ok, good_report.error
    assert good_report.target == "hip:gfx942" and good_report.asm_kind == "amdgcn"
    assert "v_mfma" in good_report.asm
    assert good_report.mma_count == good_report.asm.count("v_mfma") > 0


def test_report_numbers_are_parsed(good_report):
    r = good_report
    assert 0 < r.registers <= 512 and r.sgprs > 0 and r.agprs is not None
    assert r.spills == 0 and r.scratch_bytes == 0
    assert 1 <= r.occupancy <= 8
    assert r.shared_bytes == (128 + 128) * 32 * 2  # one pipelined A+B stage in LDS
    # contiguous, aligned specialization: wide buffer loads and LDS staging
    assert r.buffer_loads > 0 and r.instructions["ds_read"] > 0 and r.instructions["ds_write"] > 0
    assert r.instructions["total"] > r.mma_count


def test_estimate_uses_compile_reports_to_rank(backend, good_report):
    tiny = backend.compile(gemm_lowered(TINY.tiles, "bf16"), {}, TINY)
    assert tiny.ok, tiny.error
    shape = {"M": 4096, "N": 4096, "K": 4096}
    good_t = backend.estimate(GemmFamily(), shape, "bf16", GOOD, good_report)
    tiny_t = backend.estimate(GemmFamily(), shape, "bf16", TINY, tiny)
    assert good_t.estimated and tiny_t.estimated
    assert tiny_t.ms > 2 * good_t.ms


def test_syntax_error_gives_a_failed_report(backend):
    lowered = gemm_lowered(GOOD.tiles, "bf16")
    lowered.source = lowered.source.replace("acc = tl.dot(", "acc = tl.dot((")
    report = backend.compile(lowered, {}, GOOD)
    assert not report.ok and "SyntaxError" in report.error


def test_triton_compile_error_gives_a_failed_report(backend):
    # imports fine, fails in Triton's code generator: dot of [BM, BK] by [BN, BK]
    lowered = gemm_lowered(GOOD.tiles, "bf16")
    lowered.source = lowered.source.replace("tl.dot(x, y, acc)", "tl.dot(x, tl.trans(y), acc)")
    policy = Policy(tiles={"BM": 64, "BN": 64, "BK": 32, "GROUP": 1}, compiler={"num_warps": 4})
    report = backend.compile(lowered, {}, policy)
    assert not report.ok and "CompilationError" in report.error and report.asm == ""


def test_policy_space_is_the_gfx942_options(backend):
    assert backend.policy_space() == {
        "num_warps": [1, 2, 4, 8, 16],
        "num_stages": [1, 2, 3, 4],
        "waves_per_eu": [0, 1, 2, 3, 4],
        "matrix_instr_nonkdim": [0, 16, 32],
        "kpack": [1, 2],
    }


@pytest.mark.parametrize(
    "policy,match",
    [
        (Policy(compiler={"num_warp": 4}), r"'num_warp'.*num_warps, num_stages"),
        (Policy(compiler={"num_warps": 3}), r"num_warps 3.*1, 2, 4, 8, 16"),
        (Policy(compiler={"kpack": True}), r"kpack True.*1, 2"),
        (Policy(compiler={"matrix_instr_nonkdim": 64}), r"64.*0, 16, 32"),
        (Policy(tiles={"BM": 48, "BN": 64, "BK": 32}), r"BM=48.*power of two >= 16"),
        (Policy(tiles={"BM": 64, "BN": 64, "BK": 8}), r"BK=8"),
        (Policy(tiles={"BM": 256, "BN": 256, "BK": 128}, compiler={"num_stages": 3}), r"LDS"),
    ],
)
def test_bad_policies_are_named(backend, policy, match):
    with pytest.raises(PolicyError, match=match):
        backend.validate_policy(policy)


def test_good_policy_validates(backend):
    backend.validate_policy(GOOD)
    backend.validate_policy(
        Policy(tiles={"BM": 256, "BN": 256, "BK": 64, "GROUP": 3}, compiler={"num_warps": 8})
    )


def test_no_rocm_device_here(backend):
    import torch

    if getattr(torch.version, "hip", None) is None:
        assert backend.device_available() is False
