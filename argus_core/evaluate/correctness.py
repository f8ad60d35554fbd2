"""Correctness of a lowered kernel against its family's PyTorch reference, in a child process.

The candidate runs in `python -m argus_core.evaluate.worker`, isolated by the OS sandbox
(`argus_core.sandbox.run_isolated`) with a time limit, so a hang, a crash or an illegal
memory access fails that candidate and never the caller: every failure comes back as a
CorrectnessReport with ok=False and the reason. (The kernel it runs is Argus's own lowering
of verified IR, not code an LLM wrote; KernelBench's ModelNew, which is, is checked with
the reference and verdict kept in the parent: `argus_plugins.kernels.kernelbench.evaluate`.)
"""

from __future__ import annotations

import json
import signal
import sys
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


WORKER_MEMORY_BYTES = 16 << 30  # address space of a CPU worker (a GPU worker has none)


def worker_env(runner: str) -> dict[str, str | None]:
    """What a worker's environment adds to the sandbox's (`sandbox.isolated_env`): the
    runner's TRITON_INTERPRET (set for the interpreter, removed for a GPU runner, where it
    would silently run on the CPU)."""
    return dict(RUNNERS[runner][1])


def run_worker_bytes(
    module: str,
    request: bytes,
    runner: str,
    timeout_s: float,
    result_bytes: int = 0,
    pass_fds: tuple[int, ...] = (),
) -> dict[str, Any]:
    """`python -m module` with `request` on stdin, isolated by the OS sandbox
    (`argus_core.sandbox.run_isolated`: no environment, network or files of the caller) and
    killed with all it started after `timeout_s`: {"stdout": bytes, "seconds_wall"} when it
    exits with status 0, else {"ok": False, "error": why, "seconds_wall"} for a timeout or
    a crash (untrusted text cut to a few KiB). `result_bytes`: the size of the result the
    caller expects, where it may pass the sandbox's FILE_BYTES (a worker's outputs);
    `pass_fds`, descriptors the worker inherits (the pipes of a GPU's gate,
    `kernelbench.evaluate.GpuShare`).
    SandboxError when isolation is unavailable and `sandbox=none` was not chosen."""
    from argus_core.sandbox import run_isolated

    ensure_triton_cache_dir()  # sandbox=none: the worker shares the parent's cache
    run = run_isolated(
        [sys.executable, "-m", module],
        request,
        timeout_s,
        what=f"a candidate's check ({module})",
        env=worker_env(runner),
        device=RUNNERS[runner][0] != "cpu",
        memory_bytes=WORKER_MEMORY_BYTES,
        stdout_bytes=result_bytes,
        pass_fds=pass_fds,
    )
    wall = run.seconds
    if run.timed_out:
        return {"ok": False, "error": f"timeout after {timeout_s:g}s", "seconds_wall": wall}
    if run.returncode != 0:
        how = (
            f"killed by signal {signal.Signals(-run.returncode).name}"
            if run.returncode < 0 and -run.returncode in signal.valid_signals()
            else f"exit status {run.returncode}"
        )
        error = f"worker crashed ({how}): {run.stderr[-STDERR_TAIL:]}"
        return {"ok": False, "error": error, "seconds_wall": wall}
    return {"stdout": run.stdout, "seconds_wall": wall}


def run_worker(
    module: str, request: dict[str, Any], runner: str, timeout_s: float
) -> dict[str, Any]:
    """`run_worker_bytes` with `request` as JSON, for a worker that answers in JSON: its
    result, or {"ok": False, "error": why} for a timeout, a crash or no result.
    "seconds_wall" is the child's wall time."""
    from argus_core.sandbox import truncate

    raw = run_worker_bytes(module, json.dumps(request).encode(), runner, timeout_s)
    wall = raw["seconds_wall"]
    if "stdout" not in raw:
        return raw
    try:
        result = json.loads(raw["stdout"])
    except (json.JSONDecodeError, UnicodeDecodeError):
        out = raw["stdout"][-500:].decode(errors="replace")
        return {
            "ok": False,
            "error": f"worker wrote no result: stdout {out!r}",
            "seconds_wall": wall,
        }
    if not isinstance(result, dict):
        return {"ok": False, "error": "worker wrote no result object", "seconds_wall": wall}
    if isinstance(result.get("error"), str):
        result["error"] = truncate(result["error"])
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
