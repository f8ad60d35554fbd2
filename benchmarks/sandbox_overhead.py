"""Per-candidate overhead of the OS sandbox (issue #12), measured on this machine (CPU).

For each kind of untrusted execution, the median wall time of N runs with the sandbox
(bubblewrap) and without it (`sandbox=none`), and the difference: a bare `python -c pass`,
tracing an LLM-written DSL GEMM (`sandbox.trace_in_child`), a GEMM family's correctness check
(`check_correctness`, 1 trial) and a KernelBench ModelNew check (`check_candidate`, 1 trial
plus the permuted one), both on the Triton interpreter.

    .venv/bin/python benchmarks/sandbox_overhead.py [N]

Prints a table last. Wall-clock figures on a shared machine: compare the two columns of
one run, not runs of different machines.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
ROOT = Path(__file__).resolve().parents[1]


def timed(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    from argus_core import sandbox
    from argus_core.evaluate.correctness import check_correctness
    from argus_core.evaluate.reference_kernels import gemm_lowered
    from argus_plugins.dsl.tile.frontend import TileFrontend
    from argus_plugins.kernels.kernelbench.evaluate import check_candidate

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    front = TileFrontend()
    dsl = (ROOT / "tests/fixtures/transcripts/llm_icrl/repair_fixed.dsl").read_text()
    good = ROOT / "tests/plugins/kernels/kernelbench/candidates/good_matmul.py"
    task = ROOT / "tests/kernelbench_tasks/level1/1_square_matmul.py"
    cand = {"kind": "modelnew", "source": good.read_text(), "filename": str(good)}

    def bare() -> None:
        run = sandbox.run_isolated([sys.executable, "-c", "pass"], b"", 30, what="benchmark")
        assert run.returncode == 0, run.stderr

    def trace() -> None:
        sandbox.trace_in_child(front, dsl, "gemm", "<bench>", timeout_s=60)

    lowered = gemm_lowered({"BM": 32, "BN": 32, "BK": 16, "GROUP": 2}, "fp32", dot_upcast_fp32=True)

    def gemm_check() -> None:
        shape = {"M": 67, "N": 45, "K": 83}
        report = check_correctness(lowered, "gemm", [shape], "fp32", trials=1, seed=0)
        assert report.ok, report.error

    def modelnew() -> None:
        report = check_candidate(str(task), cand, trials=1, timeout_s=120)
        assert report.ok, report.error

    rows = []
    for name, fn in (("python -c pass", bare), ("trace a DSL GEMM", trace),
                     ("GEMM correctness check (interpreter, 1 trial)", gemm_check),
                     ("KernelBench ModelNew check (interpreter, 2 trials)", modelnew)):  # fmt: skip
        fn()  # warm caches of both kinds
        results = {}
        for mode in ("bwrap", "none"):
            sandbox.configure(mode)
            results[mode] = timed(fn, n)
        rows.append((name, results["bwrap"], results["none"]))
    sandbox.configure(None)
    print(f"\nSandbox overhead per candidate, median of {n} runs (CPU, {os.cpu_count()} cores)")
    print(f"{'execution':55} {'bwrap s':>9} {'none s':>9} {'overhead s':>11}")
    for name, b, u in rows:
        print(f"{name:55} {b:9.3f} {u:9.3f} {b - u:11.3f}")


if __name__ == "__main__":
    main()
