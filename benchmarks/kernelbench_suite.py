"""KernelBench through Argus's PyTorch front end: how many tasks are captured, lowered,
verified and correct, per level, on the CPU interpreter (or a GPU backend).

    python benchmarks/kernelbench_suite.py --path /work/kernelbench/KernelBench
        [--scale 0.005] [--levels level1,level2] [--tasks level1/19,...] [--jobs N]
        [--backend interpret|auto] [--budget 1] [--out results.json] [--limit N]
        [--timeout S] [--task-timeout S] [--deadline S] [--order cheap|given]

Each task goes through `fastp.evaluate_task` (the pipeline's stages: the family binds the
task, capturing its Model on meta tensors and lowering it to a DSL kernel; then verify,
lower, compile, check against the Model on fresh inputs) at `--scale` (module-level sizes
shrunk so the interpreter runs them; `tasks.scaled`), in a process of its own: `--jobs`
(default: every CPU core) tasks trace, verify and compile at once, while the checks that
use a GPU take it one at a time (lock files, `evaluate.gpu_slot`), so every timing sees
an idle GPU. `--checks-per-gpu N` lets N checks share a GPU: each check's process asks
this side of the sandbox for it through a gate (`evaluate.GpuShare`, a reader/writer
lock), shared for every trial and compile, alone for its timings; a check refused for want
of free device memory there runs once more at the end, alone. A table of where the time
went (per phase) is printed before the summary. A task past
`--task-timeout` is killed (its row says so); past `--deadline` no task starts and the
running ones are stopped, so a bounded run still prints its table. `--order cheap` (the
default) runs first the tasks whose eager run is estimated cheapest (their FLOPs and bytes,
counted on meta tensors).

With `--backend auto` on a GPU the best correct candidate is timed in the check's process
beside the eager Model and torch.compile(Model) (fast_1 against eager, and the count
faster than torch.compile), and re-checked at two sizes the search never saw (the "unseen"
column, as on the CPU). A progress bar (tqdm) and one line per finished task go to stderr;
`--out` is rewritten after every task; the per-task tables and the per-level summary
(tabulate) are printed last.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import queue
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("capture", "template", "verify", "correctness", "done")  # in pipeline order
Work = tuple[str, str, str, int, "float | None", "float | None", "str | None"]


def _one(args: Work) -> dict:
    """One task through `fastp.evaluate_task`, as a row (never raises)."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from dataclasses import asdict

    from argus_plugins.kernels.kernelbench import fastp

    path, key, backend, budget, scale, timeout_s, fp32_dot = args
    t0 = time.perf_counter()
    try:
        out = asdict(
            fastp.evaluate_task(path, key, backend, budget, None, scale, timeout_s, fp32_dot)
        )
    except Exception as exc:  # a front-end bug fails the task, not the benchmark
        out = _row(key, f"internal: {type(exc).__name__}: {exc}"[:200], "capture")
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def memory_refused(row: dict) -> bool:
    """The task's check was refused for want of free device memory (`worker.check_here`)."""
    return not row["correct"] and "memory: the check needs" in str(row.get("note", ""))


def _row(key: str, note: str, reached: str) -> dict:
    return {"task": key, "correct": False, "note": note, "reached": reached, "ms": None,
            "torch_ms": None, "compile_ms": None, "estimated": True, "unseen": "",
            "unseen_sizes": []}  # fmt: skip


def _child(args: Work, results: Any) -> None:
    """A task's own process: its own process group (a kill takes the check's sandbox with
    it), its row put on `results`."""
    os.setpgrp()
    sys.path.insert(0, str(ROOT))
    results.put(_one(args))


FP32_FLOPS = 50e12  # a GPU's fp32 rate and memory bandwidth, for ordering tasks only
HBM_BYTES = 4e12


def cheap_first(path: str, keys: list[str], scale: float | None) -> list[str]:
    """`keys` ordered by an estimate of each task's eager time, from its Model run on meta
    tensors (nothing allocated): its FLOPs (`torch.utils.flop_counter`: convolutions and
    products) at FP32_FLOPS plus its inputs, parameters and output moved once at HBM_BYTES.
    A task that cannot run so goes last."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from argus_plugins.kernels.kernelbench import reference, tasks

    found = tasks.discover(path)

    def nbytes(xs: Any) -> float:
        xs = xs if isinstance(xs, list | tuple) else [xs]
        return float(sum(t.numel() * t.element_size() for t in xs if hasattr(t, "numel")))

    def cost(key: str) -> float:
        try:
            module = tasks.load_module(tasks.scaled(found[key], scale).path)
            xs = reference.make_inputs(module, 0, "fp32", "meta")
            with torch.device("meta"):
                model = module.Model(*list(module.get_init_inputs()))
            ps = list(model.parameters()) if isinstance(model, torch.nn.Module) else []
            counter = FlopCounterMode(display=False)
            with counter, torch.no_grad():
                out = model(*xs)
            moved = nbytes(xs) + nbytes(ps) + nbytes(out)
            return counter.get_total_flops() / FP32_FLOPS + moved / HBM_BYTES
        except Exception:
            return float("inf")

    costs = {k: cost(k) for k in keys}
    return sorted(keys, key=lambda k: costs[k])


def run_all(
    work: list[Work],
    jobs: int,
    task_timeout: float | None,
    deadline: float | None,
    on_row: Any,
) -> list[dict]:
    """Every task of `work` in a process of its own, `jobs` at once; `on_row(row)` after
    each. A task past `task_timeout` s, or still running at `deadline` s, is killed; tasks
    not started by the deadline get a row saying so."""
    import multiprocessing as mp
    import signal

    ctx = mp.get_context("spawn")  # no CUDA or thread state inherited from this process
    results = ctx.Queue()
    pending = list(work)
    running: dict[str, tuple[Any, float]] = {}
    rows: list[dict] = []
    t0 = time.perf_counter()

    def finish(row: dict) -> None:
        rows.append(row)
        on_row(row)

    def kill(key: str, why: str) -> None:
        proc, started = running.pop(key)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
        proc.join(5)
        row = {**_row(key, why, "capture"), "stopped": True}  # how far it got is unknown
        row["seconds"] = round(time.perf_counter() - started, 1)
        finish(row)

    while pending or running:
        now = time.perf_counter()
        late = deadline is not None and now - t0 > deadline
        while pending and len(running) < jobs and not late:
            w = pending.pop(0)
            proc = ctx.Process(target=_child, args=(w, results), daemon=True)
            proc.start()
            running[w[1]] = (proc, time.perf_counter())
        if late:
            for w in pending:
                finish({**_row(w[1], "not run: the suite's deadline passed", "capture"),
                        "seconds": 0.0, "stopped": True})  # fmt: skip
            pending.clear()
            for key in list(running):
                kill(key, f"stopped at the suite's deadline ({deadline:g} s)")
            break
        try:
            row = results.get(timeout=0.2)
        except queue.Empty:
            row = None
        if row is not None and row["task"] in running:
            proc, _ = running.pop(row["task"])
            proc.join(10)
            finish(row)
        for key, (proc, started) in list(running.items()):
            if task_timeout is not None and time.perf_counter() - started > task_timeout:
                kill(key, f"task timeout after {task_timeout:g} s")
            elif not proc.is_alive() and proc.exitcode not in (0, None) and results.empty():
                running.pop(key)
                finish({**_row(key, f"internal: the task's process died ({proc.exitcode})",
                               "capture"), "seconds": round(time.perf_counter() - started, 1)})  # fmt: skip
    return rows


def _fmt(v: Any, f: str) -> str:
    return format(v, f) if isinstance(v, int | float) else "-"


def _ratio(a: Any, b: Any) -> float | None:
    return a / b if isinstance(a, int | float) and isinstance(b, int | float) and b else None


def task_tables(rows: list[dict]) -> str:
    """One table per level: each task's stage, verdict, times, speedups and unseen sizes."""
    from tabulate import tabulate

    out = []
    for lv in sorted({r["task"].split("/")[0] for r in rows}):
        rs = sorted((r for r in rows if r["task"].startswith(lv + "/")),
                    key=lambda r: int(r["task"].split("/")[1]))  # fmt: skip
        table = [
            [r["task"], r["reached"], "yes" if r["correct"] else "no", _fmt(r["ms"], ".4f"),
             _fmt(r["torch_ms"], ".4f"), _fmt(r.get("compile_ms"), ".4f"),
             _fmt(_ratio(r["torch_ms"], r["ms"]), ".2f"),
             _fmt(_ratio(r.get("compile_ms"), r["ms"]), ".2f"), r.get("unseen") or "-",
             _fmt(r.get("seconds"), ".1f"), str(r.get("note", ""))[:90]]
            for r in rs
        ]  # fmt: skip
        head = ["task", "reached", "correct", "ours ms", "eager ms", "compile ms", "x eager",
                "x compile", "unseen", "s", "note"]  # fmt: skip
        out.append(f"{lv}\n" + tabulate(table, head, tablefmt="github"))
    return "\n\n".join(out)


def level_table(rows: list[dict]) -> str:
    """Per level: tasks, how many were not run or stopped (a deadline, a task timeout), how
    many got past each stage (captured, lowered, verified, correct), fast_1 against eager, how many beat torch.compile, and how many correct
    tasks passed every re-check at unseen sizes."""
    from tabulate import tabulate

    table = []
    levels = sorted({r["task"].split("/")[0] for r in rows})
    for lv in levels + ["all"]:
        rs = [r for r in rows if lv == "all" or r["task"].startswith(lv + "/")]
        done = [STAGES.index(r["reached"]) for r in rs]

        def past(stage: str, done: list[int] = done) -> int:
            return sum(d > STAGES.index(stage) for d in done)

        ok = [r for r in rs if r["correct"]]
        fast1 = sum(1 for r in ok if (_ratio(r["torch_ms"], r["ms"]) or 0) > 1)
        timed_c = [r for r in ok if r.get("compile_ms")]
        beat_c = sum(1 for r in timed_c if (_ratio(r["compile_ms"], r["ms"]) or 0) > 1)
        with_u = [r for r in ok if r.get("unseen")]
        u_ok = sum(1 for r in with_u if r["unseen"].split("/")[0] == r["unseen"].split("/")[1])
        stopped = sum(1 for r in rs if r.get("stopped"))
        table.append([lv, len(rs), stopped, past("capture"), past("template"), past("verify"),
                      len(ok), fast1, f"{beat_c}/{len(timed_c)}", f"{u_ok}/{len(with_u)}"])  # fmt: skip
    head = ["level", "tasks", "not run", "captured", "lowered", "verified", "correct",
            "fast_1", "> torch.compile", "unseen ok"]  # fmt: skip
    text = tabulate(table, head, tablefmt="github")
    if any(r["estimated"] and r["ms"] for r in rows):
        text += "\nfast_1 here is a cost-model ESTIMATE (no GPU timing): both times are modelled"
    return text


# the phases of the task's own process (`evaluate._check_dsl`); the rest is the front end
OUTER = ("wait_slot", "shared_check", "wait_alone", "check")


def phase_table(rows: list[dict]) -> str:
    """Where the tasks' time went: per phase of the check (`report.phases`: the wait for a
    GPU slot, the check's sandboxed process and inside it its start, the Model, the first
    trial (Triton's compile), all trials, unseen sizes, torch.compile, the waits for the
    shared GPU and for having it alone, the timings), the number of tasks with it, the
    median and the largest seconds; "front end" is the rest of a task (capture, lowering,
    verification, compile in the task's own process)."""
    import statistics

    from tabulate import tabulate

    per: dict[str, list[float]] = {}
    for r in rows:
        ph = r.get("phases") or {}
        if not ph or not isinstance(r.get("seconds"), int | float):
            continue
        for k, v in ph.items():
            per.setdefault(k, []).append(float(v))
        outer = sum(float(ph.get(k, 0.0)) for k in OUTER)
        per.setdefault("front end", []).append(max(0.0, float(r["seconds"]) - outer))
    table = [[k, len(v), statistics.median(v), max(v)] for k, v in sorted(per.items())]
    return tabulate(table, ["phase", "tasks", "median s", "max s"], tablefmt="github",
                    floatfmt=".1f")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(ROOT))
    from argus_plugins.kernels.kernelbench import evaluate, tasks

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--path", required=True, help="directory with level1/, level2/ task files")
    ap.add_argument("--scale", type=float, default=0.005, help="shrink module-level sizes by F")
    ap.add_argument("--levels", default="level1,level2")
    ap.add_argument("--tasks", default="", help="comma-separated keys; default: every task")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="tasks front-ended at once, each in its own process (default: cores)")  # fmt: skip
    ap.add_argument("--backend", default="interpret")
    ap.add_argument("--budget", type=int, default=1)
    ap.add_argument("--out", default=None, help="JSON file for every row")
    ap.add_argument("--limit", type=int, default=0, help="at most N tasks per level (0: all)")
    ap.add_argument("--timeout", type=float, default=None,
                    help="seconds per candidate check (evaluate.timeout_s; default the config's)")  # fmt: skip
    ap.add_argument("--task-timeout", type=float, default=None, help="seconds per task")
    ap.add_argument("--checks-per-gpu", type=int, default=8,
                    help="checks sharing one GPU at once (their trials and compiles), each "
                    "timing with the GPU alone (default 8, as measured on the H200; 1: each "
                    "check holds its GPU throughout)")  # fmt: skip
    ap.add_argument("--deadline", type=float, default=None,
                    help="seconds for the whole run: then no task starts and running ones stop")  # fmt: skip
    ap.add_argument("--order", default="cheap", choices=("cheap", "given"))
    ap.add_argument("--fp32-dot", default=None, choices=("ieee", "tf32x3", "bf16x6", "bf16x3"),
                    help="kernel.fp32_dot: how fp32 dots compute (default the config's, ieee; "
                    "tf32x3/bf16x6: fp32's accuracy on tensor cores)")  # fmt: skip
    ap.add_argument("--skip-done", default=None, metavar="JSON",
                    help="skip the tasks an earlier run's --out finished (a bounded run "
                    "continued: its rows not stopped nor cut by a deadline)")  # fmt: skip
    args = ap.parse_args(argv)
    found = tasks.discover(args.path)
    levels = set(args.levels.split(","))
    keys = [k.strip() for k in args.tasks.split(",") if k.strip()] or [
        k for k in found if k.split("/")[0] in levels
    ]
    unknown = [k for k in keys if k not in found]
    if unknown:
        print(f"unknown task(s) {', '.join(unknown)}; valid: {', '.join(found)}", file=sys.stderr)
        return 2
    if args.skip_done:
        done = {r["task"] for r in json.loads(Path(args.skip_done).read_text())["rows"]
                if not r.get("stopped")}  # fmt: skip
        keys = [k for k in keys if k not in done]
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
    if args.order == "cheap":
        keys = cheap_first(args.path, keys, scale)
    work: list[Work] = [
        (args.path, k, args.backend, args.budget, scale, args.timeout, args.fp32_dot) for k in keys
    ]
    slots = None
    if args.backend != "interpret":  # checks share each GPU; timings take it alone
        slots = tempfile.mkdtemp(prefix="argus-kb-gpus-")
        os.environ[evaluate.GPU_SLOTS_ENV] = slots
        os.environ[evaluate.CHECKS_PER_GPU_ENV] = str(max(1, args.checks_per_gpu))
    from tqdm import tqdm

    bar = tqdm(total=len(work), desc="kernelbench", unit="task", file=sys.stderr,
               dynamic_ncols=True)  # fmt: skip
    t0 = time.perf_counter()
    rows: list[dict] = []

    def on_row(r: dict) -> None:
        """One line per finished task (with its reason when it is not correct), and the
        rows so far written to `--out`: a run cut short keeps what finished."""
        rows.append(r)
        verdict = "correct" if r["correct"] else f"not correct: {str(r.get('note', ''))[:160]}"
        extra = ""
        if r["correct"] and r.get("ms") and r.get("torch_ms"):
            extra = f", {r['torch_ms'] / r['ms']:.2f}x eager"
            if r.get("compile_ms"):
                extra += f", {r['compile_ms'] / r['ms']:.2f}x torch.compile"
        if r.get("unseen"):
            extra += f", unseen {r['unseen']}"
        bar.write(
            f"  {r['task']}: reached {r['reached']}, {verdict}{extra} ({r.get('seconds', '?')} s)",
            file=sys.stderr,
        )
        bar.update(1)
        if args.out:
            Path(args.out).write_text(
                json.dumps({"meta": {"partial": True}, "rows": rows}, indent=1)
            )

    jobs = max(1, min(args.jobs, len(work)))
    run_all(work, jobs, args.task_timeout, args.deadline, on_row)
    # a check refused for memory that other checks held (still too little free when it was
    # retried alone: their processes keep their tensors while they wait for the GPU) runs
    # once more at the end, when no other check holds any
    again = {r["task"] for r in rows if memory_refused(r)}
    left = None if args.deadline is None else args.deadline - (time.perf_counter() - t0)
    if again and slots is not None and args.checks_per_gpu > 1 and (left is None or left > 0):
        os.environ[evaluate.CHECKS_PER_GPU_ENV] = "1"  # read by each task's new process
        rows[:] = [r for r in rows if r["task"] not in again]
        bar.total += len(again)
        bar.write(f"  {len(again)} task(s) refused for memory on a shared GPU: once more, alone",
                  file=sys.stderr)  # fmt: skip
        run_all([w for w in work if w[1] in again], jobs, args.task_timeout, left, on_row)
    bar.close()
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": platform.node(),
            "cpu_count": os.cpu_count(), "commit": os.environ.get("ARGUS_COMMIT") or commit + " (+ working tree)",
            "scale": args.scale, "backend": args.backend, "budget": args.budget, "timeout_s": args.timeout,
            "task_timeout_s": args.task_timeout, "jobs": jobs, "seconds": round(time.perf_counter() - t0)}  # fmt: skip
    if args.out:
        Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(task_tables(rows))
    print("\n" + " ".join(f"{k}={v}" for k, v in meta.items()))
    print("\nwhere the time went (seconds per task)\n" + phase_table(rows))
    print(level_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
