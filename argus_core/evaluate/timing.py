"""Timing on a GPU, inside the worker process: our kernel and the library baselines, at
one shape, in the same process, the same way.

Per METHOD.md: warm-up, then the median of `triton.testing.do_bench` (which also clears
the L2 before each run); CUDA-graph replay for kernels under a millisecond, where launch
costs would otherwise be measured; several input sets rotated so that repeated runs do not measure a warm cache; a
wrong answer at the timed shape is never timed.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

from argus_core.evaluate.outputs import compare

# below this a kernel is (also) timed as CUDA-graph replays, and the replay's median is the
# figure: a launch from Python costs tens of microseconds of CPU, so a short kernel timed
# by plain launches measures the launcher, not the GPU (a Triton JIT launch with our
# argument binding is slower than cuBLAS's, and a 13 us GEMM read as 0.1 ms)
SHORT_MS = 1.0
MAX_SETS = 8


def _nbytes(inputs: dict[str, Any]) -> int:
    return sum(int(v.numel() * v.element_size()) for v in inputs.values() if hasattr(v, "numel"))


def bench(fn: Callable[[], Any], warmup_ms: float, rep_ms: float) -> float:
    """Median milliseconds of `fn`; graph-replayed when the plain median is under SHORT_MS
    (the replay's median then stands, unless `fn` cannot be captured)."""
    import torch
    import triton.testing as tt

    ms = tt.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")
    if ms < SHORT_MS:
        try:
            with torch.cuda.stream(torch.cuda.Stream()):
                ms = tt.do_bench_cudagraph(fn, rep=rep_ms, return_mode="median")
        except Exception:  # some baselines cannot be captured; the plain median stands
            pass
    return float(ms)


def measure(
    family: Any,
    run_on: Callable[[dict[str, Any]], None],
    shape: dict[str, int],
    dtype: str,
    seed: int,
    l2_bytes: int,
    warmup_ms: float = 25,
    rep_ms: float = 100,
    with_baselines: bool = True,
) -> dict[str, Any]:
    """Time `run_on(inputs)` and (unless `with_baselines` is False) each of
    `family.baselines(inputs)` at `shape`.

    Returns {"ms", "baselines": {name: ms}, "sets", "flops", "bytes", "tflops", "gbps",
    "check": {"ok", "why"}}; `ms` is None when the kernel is wrong at this shape.
    """
    first = family.make_inputs(shape, dtype, seed, "cuda")
    n = max(1, min(MAX_SETS, math.ceil(3 * l2_bytes / max(1, _nbytes(first)))))
    sets = [first] + [family.make_inputs(shape, dtype, seed + i, "cuda") for i in range(1, n)]
    expected = family.reference(first)
    run_on(first)
    atol, rtol = family.tolerance(dtype)
    for name in family.outputs:
        ok, _, _, why = compare(first[name], expected[name], atol, rtol)
        if not ok:
            return {"ms": None, "check": {"ok": False, "why": f"{name}: {why}"}, "sets": n}
    del expected
    cycle = itertools.cycle(sets)
    ms = bench(lambda: run_on(next(cycle)), warmup_ms, rep_ms)
    baselines: dict[str, float] = {}
    errors: dict[str, str] = {}
    per_set = [family.baselines(s) for s in sets] if with_baselines else [{}]
    for name in per_set[0]:
        try:
            fns = [b[name] for b in per_set]
            rot = itertools.cycle(fns)
            baselines[name] = bench(lambda rot=rot: next(rot)(), warmup_ms, rep_ms)
        except Exception as exc:  # a library path missing on this machine is reported, not fatal
            errors[name] = f"{type(exc).__name__}: {exc}"[:300]
    flops, nbytes = family.flops(shape), family.bytes(shape, dtype)
    return {
        "ms": ms,
        "baselines": baselines,
        "baseline_errors": errors,
        "sets": n,
        "flops": flops,
        "bytes": nbytes,
        "tflops": flops / ms / 1e9,
        "gbps": nbytes / ms / 1e6,
        "check": {"ok": True, "why": ""},
    }
