"""The pipeline's small pure pieces: merged reports of multi-kernel programs, measured
timings, planner numbers."""

from __future__ import annotations

import math
import time

import pytest

from argus_core.pipeline import (
    _correctness_failure,
    _measured,
    _merge_compile,
    _merge_verify,
    _planner_numbers,
)
from argus_core.protocols import PlannerSession
from argus_core.types import CompileReport, CorrectnessReport, VerifyReport
from argus_plugins.backends.hopper.spec import H200


def test_a_program_is_as_verified_as_its_worst_kernel():
    ok = VerifyReport(status="verified", assertions=3, seconds=0.1)
    unknown = VerifyReport(status="unknown", summary="solver time-out", assertions=2, seconds=0.2)
    bad = VerifyReport(status="violated", counterexamples=[{"a": 1}], summary="store lands off")
    assert _merge_verify([ok]) is ok
    merged = _merge_verify([ok, unknown])
    assert merged.status == "unknown" and merged.summary == "solver time-out"
    assert merged.assertions == 5 and math.isclose(merged.seconds, 0.3)
    merged = _merge_verify([ok, bad, unknown])
    assert merged.status == "violated" and merged.counterexamples == [{"a": 1}]


def test_a_program_compiles_to_peak_registers_and_summed_counts():
    a = CompileReport(
        target="hip:gfx942",
        ok=True,
        registers=100,
        spills=0,
        occupancy=4,
        shared_bytes=8192,
        mma_count=10,
        asm="A",
        asm_kind="amdgcn",
    )
    b = CompileReport(
        target="hip:gfx942",
        ok=False,
        error="boom",
        registers=200,
        spills=3,
        occupancy=2,
        shared_bytes=4096,
        mma_count=5,
        asm="B",
        asm_kind="amdgcn",
    )
    m = _merge_compile(["k1", "k2"], [a, b])
    assert not m.ok and m.error == "k2: boom"
    assert (m.registers, m.spills, m.occupancy, m.shared_bytes, m.mma_count) == (
        200,
        3,
        2,
        8192,
        15,
    )
    assert "; ==== kernel k1 ====\nA" in m.asm and "; ==== kernel k2 ====\nB" in m.asm


def test_a_measured_timing_reports_speedup_and_roofline():
    class Backend:
        spec = H200

    m = {
        "ms": 2.0,
        "baselines": {"lib": 1.0, "other": 3.0},
        "tflops": 100.0,
        "gbps": 50.0,
        "flops": 2e11,
        "bytes": 1e8,
        "check": {"ok": True, "why": ""},
    }
    t = _measured(m, {"M": 1}, Backend())
    assert t is not None and not t.estimated and t.baseline_ms == 1.0 and t.speedup == 0.5
    roof_ms = 1e3 * max(2e11 / H200.peak("bf16"), 1e8 / (H200.hbm_tbps * 1e12))
    assert math.isclose(t.pct_roofline, 100 * roof_ms / 2.0)
    assert _measured({**m, "ms": None}, {"M": 1}, Backend()) is None


def test_planner_numbers_are_the_numeric_leaves_of_its_state():
    class Session:
        def state(self):
            return {
                "values": {"split_k": {"value": 1.5, "count": 2, "ucb": None}},
                "best": {"ms": 0.3},
                "planner": "icrl",
                "flag": True,
            }

    assert _planner_numbers(Session()) == {
        "values.split_k.value": 1.5,
        "values.split_k.count": 2.0,
        "best.ms": 0.3,
    }

    class Silent(PlannerSession):  # learns nothing it reports: the protocol's default state
        pass

    assert _planner_numbers(Silent()) == {}


def test_a_failed_check_keeps_a_rejecting_stage_and_the_gist_of_the_rest():
    def failure(error: str) -> str:
        return _correctness_failure(CorrectnessReport(ok=False, error=error))

    assert failure("static: line 3: .sum() computes in PyTorch") == (
        "static: line 3: .sum() computes in PyTorch"
    )
    assert failure("guard: torch.abs is compute") == "guard: torch.abs is compute"
    crash = "RuntimeError: boom\nTraceback (most recent call last):\n  ...\nRuntimeError: boom"
    assert failure(crash) == "correctness: RuntimeError: boom"
    assert failure("") == "correctness: wrong result"


def test_ctrl_c_while_a_record_is_written_waits_for_the_write_then_stops():
    import signal

    from argus_core import pipeline

    # as Python installs it (a test runner's worker may have taken another disposition)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _ctrl_c_during_records(pipeline)
    finally:
        signal.signal(signal.SIGINT, before)


def _ctrl_c_during_records(pipeline):
    import os
    import signal

    written = []
    with pytest.raises(KeyboardInterrupt):
        with pipeline._record_whole():
            os.kill(os.getpid(), signal.SIGINT)
            written.append("child run")  # the write goes on after the Ctrl-C
    assert written == ["child run"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    # at the run's end a Ctrl-C is swallowed: the run is stopping already
    with pipeline._record_whole(reraise=False):
        os.kill(os.getpid(), signal.SIGINT)
        written.append("parent end")
    assert written == ["child run", "parent end"] and not pipeline._deferred
    with pytest.raises(KeyboardInterrupt):  # outside a record, Ctrl-C is immediate again
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)
