"""Synthetic but real pipeline data for the tracking tests: RunInfo and CandidateResults.

A plain module (not conftest) so tests import its builders by name.
"""

from __future__ import annotations

from argus_core.types import (
    Candidate,
    CandidateResult,
    CompileReport,
    CorrectnessReport,
    Policy,
    RunInfo,
    TimingReport,
    VerifyReport,
)

LONG_VALUE = "x" * 7000  # longer than MLflow's 6000-character param limit


def make_run(run_id: str = "r1") -> RunInfo:
    config = {
        "kernel": {"name": "gemm", "shape": {"M": 256, "N": 256, "K": 128}, "dtypes": ["bf16"]},
        "backend": {"name": "mi300x"},
        "planner": {"name": "baseline", "budget": 3, "note": LONG_VALUE},
        "llm": {"name": "replay", "model": "replay/gemm-demo"},
        "tracking": {"name": "mlflow", "uri": None},
        "seed": 7,
    }
    return RunInfo(
        run_id=run_id,
        kernel="gemm",
        backend="mi300x",
        planner="baseline",
        config=config,
        output_dir="/tmp/argus-out",
        budget=3,
        tags={"argus.sweep": "demo"},
    )


def make_result(index: int, ms: float | None, failure: str | None = None) -> CandidateResult:
    """Candidate `c00<index>`; `failure` like 'compile: ...' makes it fail at that stage."""
    policy = Policy(
        tiles={"BM": 64 * (index + 1), "BN": 128, "BK": 64, "GROUP": 8},
        compiler={"num_warps": 4, "num_stages": 2},
    )
    cand = Candidate(
        id=f"c{index:03d}",
        kernel="gemm",
        source="def gemm(a, b, c): ...\n",
        entry="gemm",
        policy=policy,
        techniques=["tile-sweep"] if index else [],
        parent="c000" if index else None,
    )
    verify = VerifyReport(status="verified", assertions=5, seconds=0.25, summary="5 proved")
    if failure is not None:
        compile_report = CompileReport(target="gfx942", ok=False, error=failure, seconds=0.5)
        return CandidateResult(cand, index, verify, compile=compile_report, failure=failure)
    compile_report = CompileReport(
        target="gfx942",
        ok=True,
        seconds=1.5,
        registers=128 + index,
        spills=0,
        occupancy=2,
        shared_bytes=32768,
        mma_count=64,
        asm="v_mfma_f32_32x32x8bf16 ...",
        asm_kind="amdgcn",
    )
    correctness = CorrectnessReport(
        ok=True, trials=3, runner="interpret", max_abs_err=1e-3, seconds=2.0
    )
    timing = None
    if ms is not None:
        timing = TimingReport(
            ms=ms,
            estimated=True,
            tflops=100.0 / ms,
            baseline_ms=0.5,
            speedup=0.5 / ms,
            model="roofline-occupancy v1",
        )
    return CandidateResult(
        cand,
        index,
        verify,
        compile=compile_report,
        correctness=correctness,
        timing=timing,
        reward=0.5 / ms if ms else None,
        seconds=4.0,
    )


def make_results() -> list[CandidateResult]:
    """Three candidates: two correct (0.412 ms is the best), one failed at compile."""
    return [
        make_result(0, 0.5),
        make_result(1, 0.412),
        make_result(2, None, failure="compile: out of registers (VGPR 600 > 512)"),
    ]


def artifacts_for(result: CandidateResult) -> dict[str, str]:
    files = {
        "dsl_source.py": result.candidate.source,
        "lowered_triton.py": f"# lowered {result.candidate.id}\n",
        "kernel.amdgcn": result.compile.asm if result.compile else "",
    }
    if not result.ok:
        files["counterexamples.json"] = "[]"
    return files
