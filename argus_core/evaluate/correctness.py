"""Correctness of a lowered kernel against its family's PyTorch reference, in a child process.

The candidate runs in `python -m argus_core.evaluate.worker` with a time limit, so a hang,
a crash or an illegal memory access fails that candidate and never the caller: every
failure comes back as a CorrectnessReport with ok=False and the reason.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

from argus_core.errors import ConfigError, choices_error
from argus_core.evaluate.launch import ensure_triton_cache_dir
from argus_core.types import CorrectnessReport, LoweredKernel

# runner -> (torch device, extra environment). The interpreter needs TRITON_INTERPRET=1,
# and a GPU runner must not inherit it (it would silently run on the CPU).
RUNNERS: dict[str, tuple[str, dict[str, str | None]]] = {
    "interpret": ("cpu", {"TRITON_INTERPRET": "1"}),
    "cuda": ("cuda", {"TRITON_INTERPRET": None}),  # NVIDIA and ROCm alike (torch's "cuda")
}

STDERR_TAIL = 3000


def child_env(runner: str) -> dict[str, str]:
    env = dict(os.environ)
    ensure_triton_cache_dir()
    env["TRITON_CACHE_DIR"] = os.environ["TRITON_CACHE_DIR"]
    for key, value in RUNNERS[runner][1].items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def kill_group(proc: subprocess.Popen) -> None:
    # the worker leads its own session, so this reaches anything it started too
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_worker(
    module: str, request: dict[str, Any], runner: str, timeout_s: float
) -> dict[str, Any]:
    """`python -m module` in its own session with `request` as JSON on stdin, killed (with
    all it started) after `timeout_s`: its JSON result, or {"ok": False, "error": why} for
    a timeout, a crash or no result. "seconds_wall" is the child's wall time."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", module],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env(runner),
        start_new_session=True,
        text=True,
    )
    try:
        out, err = proc.communicate(json.dumps(request), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        proc.communicate()
        wall = time.perf_counter() - start
        return {"ok": False, "error": f"timeout after {timeout_s:g}s", "seconds_wall": wall}
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        how = (
            f"killed by signal {signal.Signals(-proc.returncode).name}"
            if proc.returncode < 0
            else f"exit status {proc.returncode}"
        )
        error = f"worker crashed ({how}): {err[-STDERR_TAIL:]}"
        return {"ok": False, "error": error, "seconds_wall": wall}
    try:
        result = json.loads(out)
    except json.JSONDecodeError:
        error = f"worker wrote no result: stdout {out[-500:]!r}; stderr {err[-STDERR_TAIL:]}"
        return {"ok": False, "error": error, "seconds_wall": wall}
    result["seconds_wall"] = wall
    return result


def check_correctness(
    lowered: LoweredKernel | list[LoweredKernel],
    family: str,
    shapes: list[dict[str, int]],
    dtype: str,
    trials: int,
    seed: int,
    runner: str = "interpret",
    timeout_s: float = 120,
    constexprs: dict[str, int] | None = None,
    timing: dict[str, Any] | None = None,
    compiler: dict[str, Any] | None = None,
) -> CorrectnessReport:
    """Run `lowered` on fresh random inputs for every trial and shape; compare to the reference.

    Never raises for the candidate's failure: a timeout gives error "timeout after Ns", a
    crash the tail of the child's stderr. Raises ConfigError only for an unknown runner.
    `constexprs` override `lowered.constexprs` by key. A list of kernels is a multi-kernel
    program: the family's `program(launch, inputs, constexprs)` runs them in its order.
    `compiler` are the policy's compiler options, passed to the JIT launch on a GPU runner.
    With `timing` ({"shape": ..., "rep_ms": ...}) on a GPU runner, a correct kernel is also
    timed with its family's baselines in the same child; the figures land in `report.timing`.
    """
    if runner not in RUNNERS:
        raise ConfigError(choices_error("correctness runner", runner, RUNNERS))
    request: dict[str, Any] = {
        "kernels": [k.to_dict() for k in (lowered if isinstance(lowered, list) else [lowered])],
        "family": family,
        "shapes": [dict(s) for s in shapes],
        "dtype": dtype,
        "trials": int(trials),
        "seed": int(seed),
        "device": RUNNERS[runner][0],
        "constexprs": dict(constexprs or {}),
        "timing": timing,
        "compiler": dict(compiler or {}),
    }
    report = CorrectnessReport(
        ok=False, trials=int(trials), runner=runner, shapes=request["shapes"]
    )
    result = run_worker("argus_core.evaluate.worker", request, runner, timeout_s)
    report.seconds = result.pop("seconds_wall")
    report.ok = bool(result.get("ok"))
    report.error = result.get("error", "")
    report.max_abs_err = result.get("max_abs_err")
    report.max_rel_err = result.get("max_rel_err")
    report.timing = result.get("timing")
    return report
