"""Checking an explicit-level (Gluon) kernel on the GPU, for every family.

Gluon kernels do not run in the Triton interpreter, so an explicit-level candidate is
checked only where the run checks on the GPU (`CheckRun.runner == "cuda"`). The kernel is
our own lowering of a verified IR (no untrusted code), so it runs in this process: each
checked shape the family's launcher accepts gets `trials` fresh inputs compared with the
family's reference, then the timed shape is checked again and timed next to the family's
baselines by `argus_core.evaluate.timing.measure` (the same medians as DSL candidates).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from typing import Any

from argus_core.evaluate.check import CheckRun
from argus_core.types import CorrectnessReport

# why an explicit candidate is not checked on the CPU
NOT_ON_CPU = (
    "explicit-level (Gluon) kernels do not run in the Triton interpreter: check them on the "
    "target's GPU (evaluate.correctness=device), or verify and compile only with "
    "evaluate.correctness=off"
)


class UnsupportedShape(ValueError):
    """A launcher's refusal of a shape its kernel does not handle (TMA alignment, a
    sequence length that is not a multiple of the query block); the message says why."""


def check_on_device(
    family: Any, make_launch: Callable[[], Callable[[dict[str, Any]], None]], run: CheckRun
) -> CorrectnessReport:
    """`launch(inputs)` (`launch = make_launch()`, which loads the lowered module) checked
    against `family.reference` on the GPU and timed at `run.timed_shape`; never raises for
    the kernel's failure (ok=False and why)."""
    t0 = time.perf_counter()
    if run.runner != "cuda":
        return CorrectnessReport(ok=False, runner=run.runner, error=f"static: {NOT_ON_CPU}")
    from argus_core.evaluate.outputs import compare
    from argus_core.evaluate.timing import measure

    atol, rtol = family.tolerance(run.dtype)
    checked: list[dict[str, int]] = []
    worst_abs = worst_rel = 0.0
    skipped: list[str] = []
    try:
        launch = make_launch()
        for shape in run.shapes:
            for trial in range(run.trials):
                inputs = family.make_inputs(dict(shape), run.dtype, run.seed + trial, "cuda")
                try:
                    launch(inputs)
                except UnsupportedShape as exc:
                    skipped.append(f"{dict(shape)}: {exc}")
                    break
                expected = family.reference(inputs)
                for name in family.outputs:
                    ok, err, rel, why = compare(inputs[name], expected[name], atol, rtol)
                    if not ok:
                        return CorrectnessReport(
                            ok=False,
                            trials=trial + 1,
                            runner="cuda",
                            shapes=[*checked, dict(shape)],
                            error=f"{name} wrong at {dict(shape)} (seed {run.seed + trial}): {why}",
                            seconds=time.perf_counter() - t0,
                        )
                    worst_abs, worst_rel = max(worst_abs, err), max(worst_rel, rel)
            else:
                checked.append(dict(shape))
        timing = None
        if run.timed_shape is not None:
            import torch

            l2 = int(torch.cuda.get_device_properties(0).L2_cache_size)
            timing = measure(family, launch, dict(run.timed_shape), run.dtype, run.seed, l2)
            if timing.get("ms") is not None:
                checked.append(dict(run.timed_shape))
    except UnsupportedShape as exc:
        return CorrectnessReport(
            ok=False, runner="cuda", error=f"static: {exc}", seconds=time.perf_counter() - t0
        )
    except Exception as exc:  # a launch or compile failure is the kernel's
        return CorrectnessReport(
            ok=False,
            runner="cuda",
            error=f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-1500:]}",
            seconds=time.perf_counter() - t0,
        )
    if not checked:
        return CorrectnessReport(
            ok=False,
            runner="cuda",
            error="static: no checked shape is one the explicit kernel runs: " + "; ".join(skipped),
            seconds=time.perf_counter() - t0,
        )
    return CorrectnessReport(
        ok=True,
        trials=run.trials,
        runner="cuda",
        shapes=checked,
        max_abs_err=worst_abs,
        max_rel_err=worst_rel,
        error="; ".join(f"not run at {s}" for s in skipped),
        seconds=time.perf_counter() - t0,
        timing=timing,
    )


__all__ = ["NOT_ON_CPU", "UnsupportedShape", "check_on_device"]
