"""Parent side of a KernelBench candidate check: static rejection, then the child worker.

`check_candidate` never raises for the candidate's failure: a static violation, a guard
trip, a wrong answer, a crash or a timeout all come back as a CorrectnessReport with
ok=False and the reason, so one bad candidate fails alone and the run goes on.
"""

from __future__ import annotations

from typing import Any

from argus_core.errors import ConfigError, choices_error

# the runner table and the child-process runner are the generic correctness worker's
from argus_core.evaluate.correctness import RUNNERS, run_worker
from argus_core.types import CorrectnessReport
from argus_plugins.kernels.kernelbench import static_check

WORKER = "argus_plugins.kernels.kernelbench.worker"


def check_candidate(
    task_file: str,
    candidate: dict[str, Any],
    *,
    dtype: str = "fp32",
    trials: int = 5,
    seed: int = 0,
    init_seed: int = 42,
    runner: str = "interpret",
    timeout_s: float = 60.0,
    timing: dict[str, Any] | None = None,
) -> CorrectnessReport:
    """Check `candidate` against the task's Model on `trials` fresh inputs plus one
    permuted and rescaled trial.

    `candidate` is {"kind": "dsl", "kernels": [LoweredKernel dicts], "binding": ...,
    "constexprs": ..., "compiler": ...} or {"kind": "modelnew", "source": text, "filename":
    name}; a ModelNew is statically checked here first (error "static: ..."). With `timing`
    ({"flops", "bytes"}) on a GPU runner, the candidate and the eager Model are timed in the
    same child (`report.timing`). Raises ConfigError only for an unknown runner or kind.
    """
    if runner not in RUNNERS:
        raise ConfigError(choices_error("correctness runner", runner, RUNNERS))
    kind = candidate.get("kind")
    if kind not in ("dsl", "modelnew"):
        raise ConfigError(choices_error("kernelbench candidate kind", kind, ("dsl", "modelnew")))
    report = CorrectnessReport(ok=False, trials=int(trials) + 1, runner=runner)
    if kind == "modelnew":
        found = static_check.violations(
            candidate["source"], candidate.get("filename", "<candidate>")
        )
        if found:
            report.error = "static: " + "; ".join(str(v) for v in found[:8])
            return report
    request = {
        "task_file": str(task_file),
        "candidate": candidate,
        "dtype": dtype,
        "device": RUNNERS[runner][0],
        "trials": int(trials),
        "seed": int(seed),
        "init_seed": int(init_seed),
        "timing": timing,
    }
    result = run_worker(WORKER, request, runner, timeout_s)
    report.seconds = result.pop("seconds_wall", 0.0)
    report.ok = bool(result.get("ok"))
    report.error = result.get("error", "")
    report.max_abs_err = result.get("max_abs_err")
    report.max_rel_err = result.get("max_rel_err")
    report.timing = result.get("timing")
    return report
