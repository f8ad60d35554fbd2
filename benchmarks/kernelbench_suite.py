"""KernelBench through Argus's PyTorch front end: how many tasks are captured, lowered,
verified and correct, per level, on the CPU interpreter (or a GPU backend).

    python benchmarks/kernelbench_suite.py --path /work/kernelbench/KernelBench
        [--scale 0.005] [--levels level1,level2] [--tasks level1/19,...] [--jobs N]
        [--backend interpret|auto] [--budget 1] [--out results.json] [--limit N] [--timeout S]

Each task goes through `fastp.evaluate_task` (the pipeline's stages: the family binds the
task, capturing its Model on meta tensors and lowering it to a DSL kernel; then verify,
lower, compile, check against the Model on fresh inputs) at `--scale` (module-level sizes
shrunk so the interpreter runs them; `tasks.scaled`). With `--backend auto` on a GPU the
best correct candidate is timed against the eager Model in the same process (fast_p).
A per-task table, then the per-level table, is printed last; `--out` keeps every row.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("capture", "template", "verify", "correctness", "done")  # in pipeline order


def _one(args: tuple[str, str, str, int, float | None, float | None]) -> dict:
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from argus_plugins.kernels.kernelbench import fastp

    path, key, backend, budget, scale, timeout_s = args
    t0 = time.perf_counter()
    try:
        out = asdict(fastp.evaluate_task(path, key, backend, budget, None, scale, timeout_s))
    except Exception as exc:  # a front-end bug fails the task, not the benchmark
        out = {"task": key, "correct": False, "note": f"internal: {type(exc).__name__}: {exc}"[:120],
               "reached": "capture", "ms": None, "torch_ms": None, "estimated": True}  # fmt: skip
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def level_table(rows: list[dict]) -> str:
    """Per level: tasks, and how many got past each stage (captured, lowered, verified,
    correct), plus fast_1 where times exist."""
    head = f"{'level':<8} {'tasks':>5} {'captured':>9} {'lowered':>8} {'verified':>9} {'correct':>8} {'fast_1':>7}"
    lines = [head, "-" * len(head)]
    levels = sorted({r["task"].split("/")[0] for r in rows})
    for lv in levels + ["all"]:
        rs = [r for r in rows if lv == "all" or r["task"].startswith(lv + "/")]
        done = [STAGES.index(r["reached"]) for r in rs]

        def past(stage: str, done: list[int] = done) -> int:
            return sum(d > STAGES.index(stage) for d in done)

        fast1 = sum(
            1
            for r in rs
            if r["correct"] and r["ms"] and r["torch_ms"] and r["torch_ms"] / r["ms"] > 1
        )
        lines.append(
            f"{lv:<8} {len(rs):>5} {past('capture'):>9} {past('template'):>8} "
            f"{past('verify'):>9} {sum(r['correct'] for r in rs):>8} {fast1:>7}"
        )
    if any(r["estimated"] and r["ms"] for r in rows):
        lines.append(
            "fast_1 here is a cost-model ESTIMATE (no GPU timing): both times are modelled"
        )
    return "\n".join(lines)


def _progress(r: dict, rows: list[dict], out: str | None) -> None:
    """One line per finished task (with its reason when it is not correct), and the rows so
    far written to `out`: a run cut short by a time limit keeps what finished."""
    verdict = "correct" if r["correct"] else f"not correct: {r.get('note', '')[:160]}"
    print(
        f"  {r['task']}: reached {r['reached']}, {verdict} ({r.get('seconds', '?')} s)",
        file=sys.stderr,
    )
    if out:
        Path(out).write_text(json.dumps({"meta": {"partial": True}, "rows": rows}, indent=1))


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(ROOT))
    from argus_plugins.kernels.kernelbench import tasks

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--path", required=True, help="directory with level1/, level2/ task files")
    ap.add_argument("--scale", type=float, default=0.005, help="shrink module-level sizes by F")
    ap.add_argument("--levels", default="level1,level2")
    ap.add_argument("--tasks", default="", help="comma-separated keys; default: every task")
    ap.add_argument("--jobs", type=int, default=1, help="tasks evaluated in parallel")
    ap.add_argument("--backend", default="interpret")
    ap.add_argument("--budget", type=int, default=1)
    ap.add_argument("--out", default=None, help="JSON file for every row")
    ap.add_argument("--limit", type=int, default=0, help="at most N tasks per level (0: all)")
    ap.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds per candidate check (evaluate.timeout_s; default the config's)",
    )
    args = ap.parse_args(argv)
    found = tasks.discover(args.path)
    levels = set(args.levels.split(","))
    keys = [k.strip() for k in args.tasks.split(",") if k.strip()] or [
        k for k in found if k.split("/")[0] in levels
    ]
    if args.limit:  # the first N tasks of each level (a bounded GPU run)
        taken: dict[str, int] = {}
        kept = []
        for k in keys:
            level = k.split("/")[0]
            if taken.get(level, 0) < args.limit:
                taken[level] = taken.get(level, 0) + 1
                kept.append(k)
        keys = kept
    scale = args.scale if args.scale != 1.0 else None
    work = [(args.path, k, args.backend, args.budget, scale, args.timeout) for k in keys]
    t0 = time.perf_counter()
    rows: list[dict] = []
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            for r in pool.map(_one, work):
                rows.append(r)
                _progress(r, rows, args.out)
    else:
        for w in work:
            rows.append(_one(w))
            _progress(rows[-1], rows, args.out)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": platform.node(),
            "cpu_count": os.cpu_count(), "commit": commit + " (+ working tree)", "scale": args.scale,
            "backend": args.backend, "budget": args.budget, "timeout_s": args.timeout, "seconds": round(time.perf_counter() - t0)}  # fmt: skip
    if args.out:
        Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    head = f"{'task':<11} {'reached':<12} {'correct':<7} {'s':>6}  note"
    print(head + "\n" + "-" * len(head))
    for r in rows:
        print(
            f"{r['task']:<11} {r['reached']:<12} {'yes' if r['correct'] else 'no':<7} {r['seconds']:>6}  {r['note'][:70]}"
        )
    print("\n" + " ".join(f"{k}={v}" for k, v in meta.items()))
    print(level_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
