"""check_correctness runs candidates in a child interpreter process and never raises for them."""

from __future__ import annotations

import pytest

from argus_core.errors import ConfigError
from argus_core.evaluate.correctness import check_correctness
from argus_core.evaluate.reference_kernels import gemm_lowered

TILES = {"BM": 32, "BN": 32, "BK": 16, "GROUP": 2}
RAGGED = {"M": 67, "N": 45, "K": 83}
EXACT = {"M": 64, "N": 32, "K": 48}


def _gemm(dtype: str = "bf16", edit: tuple[str, str] | None = None):
    lowered = gemm_lowered(TILES, dtype, dot_upcast_fp32=True)
    if edit:
        assert edit[0] in lowered.source, "planted bug must change the source"
        lowered.source = lowered.source.replace(edit[0], edit[1])
    return lowered


def test_correct_gemm_passes_on_ragged_and_exact_shapes_bf16():
    report = check_correctness(_gemm("bf16"), "gemm", [RAGGED, EXACT], "bf16", trials=2, seed=1)
    assert report.ok, report.error
    assert report.runner == "interpret" and report.trials == 2
    assert report.shapes == [RAGGED, EXACT]
    assert 0.0 <= report.max_abs_err < 0.1
    assert report.max_rel_err < 1e-2


def test_correct_gemm_passes_fp32_with_tight_tolerance():
    report = check_correctness(_gemm("fp32"), "gemm", [RAGGED], "fp32", trials=1, seed=7)
    assert report.ok, report.error
    assert report.max_abs_err < 1e-4


def test_wrong_k_offset_fails():
    bug = ("kk = k * BK + rk", "kk = k * BK + rk + 1")
    report = check_correctness(_gemm("bf16", bug), "gemm", [RAGGED], "bf16", trials=1, seed=1)
    assert not report.ok
    assert "elements wrong" in report.error and "'c'" in report.error
    assert report.max_abs_err > 0.1


def test_missing_store_region_leaves_nan_and_fails():
    # the last row of c is never written: the poisoned NaN must be caught
    bug = (
        "mask=(rm[:, None] < M) & (rn[None, :] < N))",
        "mask=(rm[:, None] < M - 1) & (rn[None, :] < N))",
    )
    report = check_correctness(_gemm("bf16", bug), "gemm", [EXACT], "bf16", trials=1, seed=3)
    assert not report.ok
    assert "never written" in report.error
    assert f"{EXACT['N']} NaN" in report.error


def test_infinite_loop_times_out_without_raising():
    hang = (
        "    pid = tl.program_id(0)\n",
        "    pid = tl.program_id(0)\n    while M > 0:\n        pid += 0\n",
    )
    report = check_correctness(_gemm("fp32", hang), "gemm", [RAGGED], "fp32", 1, 0, timeout_s=3)
    assert not report.ok
    assert report.error == "timeout after 3s"  # no wall-clock bound: CI machines are loaded


def test_crashing_worker_reports_the_signal():
    lowered = _gemm("fp32")
    lowered.source = "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n" + lowered.source
    report = check_correctness(lowered, "gemm", [RAGGED], "fp32", 1, 0)
    assert not report.ok
    assert "SIGKILL" in report.error


def test_unknown_family_is_a_failed_report_naming_the_choices():
    report = check_correctness(_gemm("fp32"), "no-such-family", [RAGGED], "fp32", 1, 0)
    assert not report.ok
    assert "no-such-family" in report.error and "gemm" in report.error


def test_unknown_runner_is_a_config_error():
    with pytest.raises(ConfigError, match="'tpu'.*interpret"):
        check_correctness(_gemm("fp32"), "gemm", [RAGGED], "fp32", 1, 0, runner="tpu")
