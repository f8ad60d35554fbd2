"""Timing on a GPU, inside the worker process: our kernel and the library baselines, at
one shape, in the same process, the same way.

Per METHOD.md: warm-up, then the median of `triton.testing.do_bench` (which also clears
the L2 before each run); CUDA-graph replay for kernels under a millisecond, where launch
costs would otherwise be measured; several input sets rotated so that repeated runs do not measure a warm cache; a
wrong answer at the timed shape is never timed, and every set's outputs are poisoned
before the timed runs and checked after them (a kernel right on its first call and wrong,
or lazy, on later ones fails). `above_roofline` says when a time is faster than the
device can be (the pipeline then holds the result back as `suspicious`).

`prepare` builds one case's input sets and references once for many policies
(`measure(..., prepared=)`, what `benchmarks/gpu_bench.py --space` does): the fp32
reference then runs once per case, not once per policy.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

from argus_core.evaluate.outputs import compare, poison

# below this a kernel is (also) timed as CUDA-graph replays, and the replay's median is the
# figure: a launch from Python costs tens of microseconds of CPU, so a short kernel timed
# by plain launches measures the launcher, not the GPU (a Triton JIT launch with our
# argument binding is slower than cuBLAS's, and a 13 us GEMM read as 0.1 ms)
SHORT_MS = 1.0
MAX_SETS = 8
# the largest on-chip cache of a supported GPU (MI300X's 256 MB Infinity Cache, which the
# L2 size a device reports does not include): a working set below it may be served faster
# than HBM, so `above_roofline` bounds bytes only above it
ON_CHIP_CACHE_BYTES = 256 << 20


def _nbytes(inputs: dict[str, Any]) -> int:
    return sum(int(v.numel() * v.element_size()) for v in inputs.values() if hasattr(v, "numel"))


def bench(
    fn: Callable[[], Any], warmup_ms: float, rep_ms: float, graph_below_ms: float = SHORT_MS
) -> float:
    """Median milliseconds of `fn`; graph-replayed when the plain median is under
    `graph_below_ms` (SHORT_MS; a family serving many small launches per call raises it:
    `graph_replay_below_ms`), the replay's median then standing unless `fn` cannot be
    captured."""
    return bench_how(fn, warmup_ms, rep_ms, graph_below_ms)[0]


def bench_how(
    fn: Callable[[], Any], warmup_ms: float, rep_ms: float, graph_below_ms: float = SHORT_MS
) -> tuple[float, bool]:
    """`bench`'s median and whether it is a CUDA-graph replay's."""
    import torch
    import triton.testing as tt

    ms = tt.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")
    if ms < graph_below_ms:
        try:
            with torch.cuda.stream(torch.cuda.Stream()):
                return float(tt.do_bench_cudagraph(fn, rep=rep_ms, return_mode="median")), True
        except Exception:  # some baselines cannot be captured; the plain median stands
            pass
    return float(ms), False


class Prepared:
    """A case's input sets and references, built once and reused by every policy timed at
    that case (`measure(..., prepared=)`): recording a policy space then builds the inputs
    and runs the (slow, fp32) PyTorch reference once per case instead of once per policy.

    Each input tensor's fingerprint (its sum in fp64) is taken when built; `measure` checks
    it after every use, and a kernel that wrote into its inputs makes the sets be built
    anew before the next policy (so one bad kernel cannot fail the correct ones after it)."""

    def __init__(
        self,
        family: Any,
        shape: dict[str, int],
        dtype: str,
        seed: int,
        l2_bytes: int,
        device: str = "cuda",
    ):
        self.family, self.shape, self.dtype, self.seed = family, dict(shape), dtype, seed
        self.l2_bytes, self.device = int(l2_bytes), device
        self.builds = 0  # how many times the sets were built (1 unless inputs were written)
        self.sets: list[dict[str, Any]] = []
        self.expected: list[dict[str, Any]] = []
        self.prints: list[dict[str, float]] = []
        self.baselines: dict[str, float] | None = None  # timed once, with the first policy
        self.baseline_errors: dict[str, str] = {}
        self.baseline_graphs: dict[str, bool] = {}  # which baselines are graph replays
        self.build()

    def build(self) -> None:
        family, shape, dtype, seed = self.family, self.shape, self.dtype, self.seed
        first = family.make_inputs(shape, dtype, seed, self.device)
        n = max(1, min(MAX_SETS, math.ceil(3 * self.l2_bytes / max(1, _nbytes(first)))))
        self.sets = [first] + [
            family.make_inputs(shape, dtype, seed + i, self.device) for i in range(1, n)
        ]
        # references first: a kernel that writes into its inputs cannot change them
        self.expected = [family.reference(s) for s in self.sets]
        self.prints = [self._fingerprint(s) for s in self.sets]
        self.builds += 1

    def _fingerprint(self, inputs: dict[str, Any]) -> dict[str, float]:
        import torch

        outs = set(self.family.outputs)
        return {
            k: float(torch.sum(v, dtype=torch.float64))
            for k, v in inputs.items()
            if k not in outs and hasattr(v, "numel") and v.numel() and v.is_floating_point()
        }

    def inputs_changed(self) -> str:
        """The first input a kernel wrote into ("set i: name"), or ""."""
        for i, (s, fp) in enumerate(zip(self.sets, self.prints)):
            now = self._fingerprint(s)
            for k, v in fp.items():
                if now.get(k) != v and not (math.isnan(v) and math.isnan(now.get(k, 0.0))):
                    return f"set {i}: {k}"
        return ""

    def matches(self, shape: dict[str, int], dtype: str, seed: int, device: str) -> bool:
        return (dict(shape), dtype, seed, device) == (
            self.shape,
            self.dtype,
            self.seed,
            self.device,
        )


def prepare(
    family: Any,
    shape: dict[str, int],
    dtype: str,
    seed: int,
    l2_bytes: int,
    device: str = "cuda",
) -> Prepared:
    """The input sets and references of one case, for `measure(..., prepared=)`."""
    return Prepared(family, shape, dtype, seed, l2_bytes, device)


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
    device: str = "cuda",
    prepared: Prepared | None = None,
) -> dict[str, Any]:
    """Time `run_on(inputs)` and (unless `with_baselines` is False) each of
    `family.baselines(inputs)` at `shape`.

    Returns {"ms", "baselines": {name: ms}, "sets", "flops", "bytes", "tflops", "gbps",
    "l2_bytes", "check": {"ok", "why"}}; `ms` is None when the kernel is wrong at this
    shape, before the timed runs or after them (every set's outputs are poisoned before
    them and compared after, so each holds what its last timed call wrote). `device` is
    where the inputs live ("cuda"; "cpu" only for tests of this logic with a CPU `bench`).

    `prepared` (from `prepare` at the same shape, dtype, seed and device) supplies the input
    sets and references instead of building them, and keeps the baselines: they are timed
    with the first policy that asks for them and returned as they were for the rest. A
    kernel that wrote into its inputs is reported (`"wrote_inputs"`) and the sets are built
    anew.
    """
    if prepared is not None and not prepared.matches(shape, dtype, seed, device):
        raise ValueError(
            f"prepared inputs are for shape {prepared.shape}, dtype {prepared.dtype}, seed "
            f"{prepared.seed}, device {prepared.device}; measure was asked for shape "
            f"{dict(shape)}, dtype {dtype}, seed {seed}, device {device}"
        )
    own = prepared or Prepared(family, shape, dtype, seed, l2_bytes, device)
    out = _measure(
        family, run_on, shape, dtype, own, warmup_ms, rep_ms, with_baselines, prepared is None
    )
    if prepared is not None:
        wrote = prepared.inputs_changed()
        if wrote:
            out["wrote_inputs"] = wrote
            prepared.build()
    return out


def _measure(
    family: Any,
    run_on: Callable[[dict[str, Any]], None],
    shape: dict[str, int],
    dtype: str,
    prep: Prepared,
    warmup_ms: float,
    rep_ms: float,
    with_baselines: bool,
    free_expected: bool = False,
) -> dict[str, Any]:
    sets, expected, n, device = prep.sets, prep.expected, len(prep.sets), prep.device
    atol, rtol = family.tolerance(dtype)

    def wrong(when: str) -> str:
        for i, (s, exp) in enumerate(zip(sets, expected)):
            for name in family.outputs:
                ok, _, _, why = compare(s[name], exp[name], atol, rtol)
                if not ok:
                    return f"{when}, input set {i}: {name}: {why}"
        return ""

    for s in sets:
        for name in family.outputs:
            poison(s[name])
    for s in sets:
        run_on(s)
    _synchronize(device)
    why = wrong("before the timed runs")
    if why:
        return {"ms": None, "check": {"ok": False, "why": why}, "sets": n}
    for s in sets:
        for name in family.outputs:
            poison(s[name])
    cycle = itertools.cycle(sets)
    # a family whose call is many small launches (MoE decode: routing, alignment, two
    # GEMMs, the combine) is served under CUDA graphs: kernel and baselines timed so alike
    graph_ms = float(getattr(family, "graph_replay_below_ms", SHORT_MS))
    ms, graphed = bench_how(lambda: run_on(next(cycle)), warmup_ms, rep_ms, graph_ms)
    _synchronize(device)
    why = wrong("re-checked after the timed runs")
    if why:
        return {"ms": None, "check": {"ok": False, "why": why}, "sets": n}
    baselines: dict[str, float] = {}
    graphs: dict[str, bool] = {}  # which of them are CUDA-graph replays
    errors: dict[str, str] = {}
    if with_baselines and prep.baselines is not None:
        baselines, errors = dict(prep.baselines), dict(prep.baseline_errors)
        graphs = dict(prep.baseline_graphs)
    elif with_baselines:
        if free_expected:
            expected.clear()  # the baselines' memory (sets that are not kept for reuse)
        per_set = [family.baselines(s) for s in sets]
        for name in per_set[0]:
            try:
                fns = [b[name] for b in per_set]
                rot = itertools.cycle(fns)
                baselines[name], graphs[name] = bench_how(
                    lambda rot=rot: next(rot)(), warmup_ms, rep_ms, graph_ms
                )
            except Exception as exc:  # a library path missing here is reported, not fatal
                errors[name] = f"{type(exc).__name__}: {exc}"[:300]
        prep.baselines, prep.baseline_errors = dict(baselines), dict(errors)
        prep.baseline_graphs = dict(graphs)
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
        "l2_bytes": int(prep.l2_bytes),
        "check": {"ok": True, "why": ""},
        # timed as CUDA-graph replays (the kernel; each baseline): a comparison is fair
        # only between figures taken the same way
        "graph_replay": {"kernel": graphed, "baselines": graphs},
    }


def _synchronize(device: str) -> None:
    if device != "cpu":
        import torch

        torch.cuda.synchronize()


def above_roofline(m: dict[str, Any], peak_flops: float, peak_bytes_per_s: float) -> str:
    """Why the measurement `m` ({"ms", "flops", "bytes", optionally "l2_bytes"}) is faster
    than a device of `peak_flops` FLOP/s and `peak_bytes_per_s` memory bandwidth allows,
    or "" when it is not. FLOPs bound always (no cache makes arithmetic free); bytes only
    where one call moves more than the L2 and ON_CHIP_CACHE_BYTES hold (a smaller working
    set may legitimately be served from a cache faster than from HBM). Pass the highest
    peaks of the device (data sheet, every dtype): only a time no real kernel reaches is
    named."""
    ms = m.get("ms")
    if not isinstance(ms, int | float) or ms <= 0:
        return ""
    flops, nbytes = float(m.get("flops") or 0), float(m.get("bytes") or 0)
    if flops and peak_flops and flops / (ms * 1e-3) > peak_flops:
        return (
            f"{flops / (ms * 1e-3) / 1e12:.1f} TFLOP/s at {ms:.4g} ms is above the device's "
            f"peak {peak_flops / 1e12:.1f} TFLOP/s"
        )
    l2 = max(float(m.get("l2_bytes") or 0), float(ON_CHIP_CACHE_BYTES))
    if nbytes > l2 and peak_bytes_per_s and nbytes / (ms * 1e-3) > peak_bytes_per_s:
        return (
            f"{nbytes / (ms * 1e-3) / 1e9:.0f} GB/s at {ms:.4g} ms (moving {nbytes / 1e6:.1f} MB, "
            f"more than a cache of {l2 / 1e6:.0f} MB holds) is above the device's peak "
            f"{peak_bytes_per_s / 1e9:.0f} GB/s"
        )
    return ""
