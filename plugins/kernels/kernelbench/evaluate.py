"""Trusted side of a KernelBench candidate check: static rejection, the reference, the verdict.

Two kinds of candidate, two splits (docs/security.md):

- A DSL candidate is a kernel Argus lowered from verified IR; its child runs no code of the
  candidate's own in Python. The whole check runs in the child, where the kernel runs
  (`_check_dsl`, `worker.check_here`): the child builds the Model and draws every trial's
  inputs on the device from seeds this process picks, computes the reference first on
  copies, fingerprints it, runs the kernel, compares in chunks on the device and re-takes
  the fingerprint, then sends back only the verdict. This process holds no tensor of the
  task (a 6 GB level-1 input is never on the host or in a pipe). Before allocating, the
  child estimates the memory the check needs from the graph captured on meta tensors
  (`costs.memory_estimate`) and reports a task that does not fit ("memory: ...").
- A ModelNew is arbitrary Python: this process builds the task's Model, draws the trial
  inputs, computes the reference outputs and keeps them; the candidate runs in an isolated
  child (`worker.py` under `argus_core.sandbox.run_isolated`) that receives only the inputs
  and sends back only its outputs, as plain arrays. The comparison and the verdict happen
  here, so nothing the candidate does in its own process (reading frames, patching torch or
  the Model, writing a fake result, exiting early) can make a wrong answer pass. A ModelNew
  gets one trial at sizes it never saw (`unseen_trial`), so an answer written for the
  task's shapes fails; a correct DSL kernel is re-checked at UNSEEN_SHAPES such sizes and
  the results reported (`report.unseen`).

`check_candidate` never raises for the candidate's failure: a static violation, a guard
trip, a wrong answer, a crash or a timeout all come back as a CorrectnessReport with
ok=False and the reason, so one bad candidate fails alone and the run goes on.
"""

from __future__ import annotations

import ast
import contextlib
import io
import math
import os
import random
import secrets
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from argus_core.errors import ConfigError, choices_error

# the runner table and the child-process runner are the generic correctness worker's
from argus_core.evaluate.correctness import RUNNERS, run_worker_bytes
from argus_core.sandbox import truncate
from argus_core.types import CorrectnessReport
from argus_plugins.kernels.kernelbench import static_check

WORKER = "argus_plugins.kernels.kernelbench.worker"


def _flat(x: Any) -> list[Any]:
    return list(x) if isinstance(x, list | tuple) else [x]


def _nbytes(tensors: list[Any]) -> int:
    return sum(int(t.numel() * t.element_size()) for t in tensors if hasattr(t, "numel"))


def trial_seeds(seed: int, trials: int) -> list[int]:
    """Seeds of `trials` trials: fresh random bits for every check (a candidate cannot
    precompute answers from known seeds) mixed with the run's `seed`, spread apart so no
    trial's inputs are another's shifted by one draw."""
    base = secrets.randbits(40) ^ int(seed)
    return [(base * 1_000_003 + 7919 * (t + 1)) % (1 << 62) for t in range(trials)]


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
    static: bool = True,
    memory: dict[str, int] | None = None,
) -> CorrectnessReport:
    """Check `candidate` against the task's Model on `trials` fresh inputs, one permuted
    and rescaled trial, and, for a ModelNew, one trial at sizes it never saw
    (`unseen_trial`; the sizes are in `report.shapes`: the task's, then the trial's).

    `candidate` is {"kind": "dsl", "kernels": [LoweredKernel dicts], "binding": ...,
    "constexprs": ..., "compiler": ...} or {"kind": "modelnew", "source": text, "filename":
    name}; a ModelNew is statically checked here first (error "static: ...") unless
    `static` is False (tests of the isolation itself). With `timing` ({"flops", "bytes"})
    on a GPU runner, the candidate is timed in its child, its output after the timed runs
    re-checked here, and the eager Model timed here (`report.timing`). `memory`: the
    task's `costs.memory_estimate`, where the caller has it (else a DSL check's child
    captures the graph again to make it). Raises ConfigError only for an unknown runner
    or kind.
    """
    if runner not in RUNNERS:
        raise ConfigError(choices_error("correctness runner", runner, RUNNERS))
    kind = candidate.get("kind")
    if kind not in ("dsl", "modelnew"):
        raise ConfigError(choices_error("kernelbench candidate kind", kind, ("dsl", "modelnew")))
    report = CorrectnessReport(ok=False, trials=int(trials) + 1, runner=runner)
    if kind == "dsl":
        return _check_dsl(
            str(task_file), candidate, report, dtype, trials, seed, init_seed, timeout_s, timing,
            memory,
        )  # fmt: skip
    if kind == "modelnew" and static:
        found = static_check.violations(
            candidate["source"], candidate.get("filename", "<candidate>")
        )
        if found:
            report.error = truncate("static: " + "; ".join(str(v) for v in found[:8]))
            return report
    import torch

    from argus_core.evaluate.outputs import PackError, compare, unpack_arrays
    from argus_plugins.kernels.kernelbench import reference, tasks

    device = RUNNERS[runner][0]
    module = tasks.load_module(str(task_file))
    model = reference.build_model(module, int(init_seed), dtype, device)
    seeds = trial_seeds(int(seed), int(trials))
    inputs = [
        (f"trial {t} (seed {s})", reference.make_inputs(module, s, dtype, device))
        for t, s in enumerate(seeds)
    ]
    inputs.append(
        ("permuted+scaled inputs of trial 0", reference.perturbed(inputs[0][1], seeds[0]))
    )
    expected = [_flat(reference.run_model(model, x)) for _, x in inputs]
    # a ModelNew gets one more trial at sizes it never saw (a hard-coded shape fails there);
    # a DSL candidate is a kernel for the task's shapes by construction (`kernel.shape`:
    # a template folds them in, as a mean's divisor), lowered by Argus from verified IR
    unseen = (
        unseen_trial(
            str(task_file), module, model, seeds[-1] ^ 0x5EED, int(init_seed), dtype, device
        )
        if kind == "modelnew"
        else None
    )
    if unseen is not None:
        what = ", ".join(f"{k} {a}->{b}" for k, (a, b) in unseen.sizes.items())
        inputs.append((f"a trial at sizes the candidate never saw ({what})", unseen.inputs))
        expected.append(unseen.expected)
        report.trials += 1
        report.shapes = [
            {k: a for k, (a, _) in unseen.sizes.items()},
            {k: b for k, (_, b) in unseen.sizes.items()},
        ]

    def cpu(xs: list[Any]) -> list[Any]:
        return [x.detach().cpu() if isinstance(x, torch.Tensor) else x for x in xs]

    request: dict[str, Any] = {
        "candidate": candidate,
        "dtype": dtype,
        "device": device,
        "init_seed": int(init_seed),
        "init_inputs": list(module.get_init_inputs()),
        "trials": [  # unlabelled: the child is not told which trial is which
            {
                "inputs": cpu(x),
                # a DSL kernel's output buffer; a ModelNew is not told the output's shape
                "like": (list(exp[0].shape), str(exp[0].dtype).removeprefix("torch."))
                if kind == "dsl"
                else None,
            }
            for (label, x), exp in zip(inputs, expected)
        ],
        "timing": timing,
    }
    if kind == "dsl":
        params = {k: v.detach() for k, v in model.named_parameters()}
        params.update(dict(model.named_buffers()))
        request["params"] = {k: v.cpu() for k, v in params.items()}
    buf = io.BytesIO()
    torch.save(request, buf)
    # its outputs: every trial's, and the timed call's (real KernelBench sizes pass 256 MiB)
    out_bytes = sum(_nbytes(exp) for exp in expected) + (_nbytes(expected[0]) if timing else 0)
    result = run_worker_bytes(WORKER, buf.getvalue(), runner, timeout_s, 2 * out_bytes)
    report.seconds = result["seconds_wall"]
    if "error" in result:  # a timeout, a crash, no output
        report.error = result["error"]
        return report
    try:
        meta, arrays = unpack_arrays(result["stdout"])
    except PackError as exc:
        report.error = f"the candidate's process sent no outputs: {exc}"
        return report
    counts = meta.get("counts") if isinstance(meta.get("counts"), list) else []
    atol, rtol = reference.tolerance(dtype)
    worst_abs = worst_rel = 0.0
    pos = 0
    for t, ((label, _), exp) in enumerate(zip(inputs, expected)):
        if t >= len(counts):
            why = meta.get("error") or "the candidate's process stopped before this trial"
            why = str(why)
            report.error = truncate(why if why.startswith("guard: ") else f"{label}: {why}")
            return report
        n = counts[t]
        if not isinstance(n, int) or n != len(exp):
            report.error = f"{label}: {n} outputs, expected {len(exp)}"
            return report
        got = arrays[pos : pos + n]
        pos += n
        for i, (out, ref) in enumerate(zip(got, exp)):
            ok, max_abs, max_rel, why = compare(torch.from_numpy(out.copy()), ref.cpu(), atol, rtol)
            worst_abs, worst_rel = max(worst_abs, max_abs), max(worst_rel, max_rel)
            if not ok:
                report.max_abs_err, report.max_rel_err = worst_abs, worst_rel
                report.error = f"{label} output {i}: {why}"
                return report
    report.max_abs_err, report.max_rel_err = worst_abs, worst_rel
    if meta.get("error"):
        report.error = truncate(str(meta["error"]))
        return report
    if timing and device != "cpu":
        report.timing = _timing(meta, arrays[pos:], expected[0], inputs[0][1], model, timing, dtype)
        if "error" in report.timing:
            report.error = report.timing.pop("error")
            report.timing = None
            return report
    report.ok = True
    return report


# ------------------------------------------------------------ a DSL candidate, on the device
UNSEEN_SHAPES = 2  # re-checks of a correct DSL kernel at sizes the search never saw
GPU_SLOTS_ENV = "ARGUS_KB_GPU_SLOTS"  # a folder of per-GPU lock files (a whole-suite run)
CHECKS_PER_GPU_ENV = "ARGUS_KB_CHECKS_PER_GPU"  # checks sharing one GPU; timing stays alone


class GpuShare:
    """One GPU shared by several checks of a suite run, as seen from the process that starts
    them (`gpu_slot`): a writer-preferring reader/writer lock over two lock files of that
    GPU (a turnstile and the lock), taken HERE, on this side of the sandbox, when the
    check's process asks through its gate (`serve`; `worker._Gate`). Each use of the GPU
    (a trial, a compile) holds it shared; a timing holds it alone, and while a timing
    waits no new use starts (the turnstile), so every timing sees an idle GPU. `waited`
    sums the seconds spent waiting for it."""

    def __init__(self, folder: str, gpu: int):
        self.turn = open(Path(folder) / f"gpu{gpu}.turnstile.lock", "a+")  # noqa: SIM115
        self.lock = open(Path(folder) / f"gpu{gpu}.timing.lock", "a+")  # noqa: SIM115
        self.waited = 0.0

    @contextlib.contextmanager
    def _held(self, mode: int) -> Iterator[None]:
        import fcntl

        t0 = time.perf_counter()
        fcntl.flock(self.turn, fcntl.LOCK_EX)
        try:
            fcntl.flock(self.lock, mode)
        finally:
            fcntl.flock(self.turn, fcntl.LOCK_UN)
        self.waited += time.perf_counter() - t0
        try:
            yield
        finally:
            fcntl.flock(self.lock, fcntl.LOCK_UN)

    def shared(self) -> contextlib.AbstractContextManager[None]:
        import fcntl

        return self._held(fcntl.LOCK_SH)

    def exclusive(self) -> contextlib.AbstractContextManager[None]:
        import fcntl

        return self._held(fcntl.LOCK_EX)

    def close(self) -> None:
        self.turn.close()
        self.lock.close()

    @contextlib.contextmanager
    def gate(self) -> Iterator[tuple[int, int]]:
        """The descriptors a check's process inherits to ask for this GPU (its write end
        of one pipe, its read end of the other), served by a thread here for as long as
        the block runs: b"s" shared, b"x" alone, answered b"g" once held; b"r" releases.
        Whatever the process still holds when it exits (a crash, a timeout) is released
        when the block ends."""
        import threading

        up_r, up_w = os.pipe()
        down_r, down_w = os.pipe()
        stack = contextlib.ExitStack()

        def serve() -> None:
            while True:
                try:
                    ask = os.read(up_r, 1)
                except OSError:
                    return
                if not ask:  # every writer closed: the process is gone
                    return
                if ask in (b"s", b"x"):
                    stack.enter_context(self.shared() if ask == b"s" else self.exclusive())
                    try:
                        os.write(down_w, b"g")
                    except OSError:
                        return
                elif ask == b"r":
                    stack.close()

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        try:
            yield up_w, down_r
        finally:
            os.close(up_w)  # with the process's copy gone too, serve() reads the end
            os.close(down_r)
            thread.join(10)
            os.close(up_r)
            os.close(down_w)
            stack.close()


@contextlib.contextmanager
def gpu_slot(device: str) -> Iterator[tuple[str, GpuShare | None]]:
    """(the device a check runs on, its GPU's `GpuShare` or None). With ARGUS_KB_GPU_SLOTS
    set (a whole-suite run: many processes front-ending tasks at once) a GPU check waits
    for one of the ARGUS_KB_CHECKS_PER_GPU slots (default 1) of a GPU (a lock file per slot
    in that folder) and runs on "cuda:<i>". With one slot per GPU the check holds its GPU
    alone (no share); with several, the checks share the GPU and each timing takes it
    alone (`GpuShare`, `_check_dsl`). Otherwise `device` as given and no share."""
    folder = os.environ.get(GPU_SLOTS_ENV)
    if device == "cpu" or not folder:
        yield device, None
        return
    import fcntl

    import torch

    count = max(1, torch.cuda.device_count())
    per = max(1, int(os.environ.get(CHECKS_PER_GPU_ENV) or 1))
    # slot k of every GPU before slot k + 1 of any: checks spread over the GPUs first
    slots = [(i, k) for k in range(per) for i in range(count)]
    files = [open(Path(folder) / f"gpu{i}.{k}.lock", "a+") for i, k in slots]  # noqa: SIM115
    try:
        while True:
            for (i, _), f in zip(slots, files, strict=True):
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    continue
                share = GpuShare(folder, i) if per > 1 else None
                try:
                    yield f"cuda:{i}", share
                finally:
                    if share is not None:
                        share.close()
                    fcntl.flock(f, fcntl.LOCK_UN)
                return
            time.sleep(0.05)
    finally:
        for f in files:
            f.close()


def _ask_worker(
    request: dict[str, Any], runner: str, timeout_s: float, gate: tuple[int, int] | None
) -> tuple[dict[str, Any] | None, str, float]:
    """(the worker's verdict, "", its process's wall seconds) or (None, why, seconds): one
    sandboxed `worker` process for `request`; `gate`, the GPU's gate descriptors it
    inherits (`GpuShare.gate`)."""
    import torch

    from argus_core.evaluate.outputs import PackError, unpack_arrays

    request = {**request, "gate": gate}
    buf = io.BytesIO()
    torch.save(request, buf)
    result = run_worker_bytes(WORKER, buf.getvalue(), runner, timeout_s, pass_fds=gate or ())
    wall = float(result["seconds_wall"])
    if "error" in result:  # a timeout, a crash, no output
        return None, str(result["error"]), wall
    try:
        meta, _ = unpack_arrays(result["stdout"])
    except PackError as exc:
        return None, f"the check's process sent no verdict: {exc}", wall
    phases = meta.get("phases")
    if isinstance(phases, dict) and isinstance(meta.get("seconds"), int | float):
        phases["process_start"] = max(0.0, wall - float(meta["seconds"]))  # sandbox, imports
    return meta, "", wall


def _check_dsl(
    task_file: str,
    candidate: dict[str, Any],
    report: CorrectnessReport,
    dtype: str,
    trials: int,
    seed: int,
    init_seed: int,
    timeout_s: float,
    timing: dict[str, Any] | None,
    memory: dict[str, int] | None = None,
) -> CorrectnessReport:
    """A DSL candidate (a kernel Argus lowered from verified IR, launched by our launcher:
    no code of the candidate's own runs in Python) is checked where it runs: the worker's
    child builds the Model and every trial's inputs itself, on the device, from the trial
    seeds, computes the reference on copies before the kernel runs, compares there, and
    sends back only the verdict and small diagnostics (`worker.check_here`). This process
    holds no tensor of the task. The child refuses, before allocating, a task whose
    reference needs more device memory than is free (error "memory: ...").

    On a GPU shared with other checks (`gpu_slot` gives a `GpuShare`) the check's process
    asks for the GPU through a gate (`GpuShare.gate`): shared for each trial and compile,
    alone for its timings; a check that ran out of device memory so is run once more with
    the GPU alone. `report.phases`: seconds per stage (the waits, the process's
    start, trials, compiles, timings)."""
    device = RUNNERS[report.runner][0]
    seeds = trial_seeds(int(seed), int(trials))
    request: dict[str, Any] = {
        "mode": "check",
        "candidate": candidate,
        "task": {"path": task_file, "text": Path(task_file).read_text()},
        "dtype": dtype,
        "init_seed": int(init_seed),
        "seeds": seeds,
        "unseen_seeds": [seeds[-1] ^ (0x5EED + 7 * i) for i in range(UNSEEN_SHAPES)],
        "timing": timing,
        "timeout_s": float(timeout_s),
        "memory": memory,
    }
    phases: dict[str, float] = {}
    report.phases = phases
    t0 = time.perf_counter()
    with gpu_slot(device) as (where, share):
        phases["wait_slot"] = time.perf_counter() - t0
        request["device"] = where
        with share.gate() if share is not None else contextlib.nullcontext() as gate:
            # a check that waits for its GPU gets that long again
            limit = timeout_s if share is None else 2 * timeout_s
            meta, why, wall = _ask_worker(request, report.runner, limit, gate)
        phases["check"] = wall
        if share is not None and meta is not None and str(meta.get("error")).startswith("memory:"):
            # the memory was held by the checks sharing the GPU: once more, with it alone
            phases["shared_check"] = wall
            waited = share.waited
            with share.exclusive():
                phases["wait_alone"] = share.waited - waited
                meta, why, wall = _ask_worker(request, report.runner, timeout_s, None)
            phases["check"] = wall
    report.seconds = wall
    if meta is None:
        report.error = why
        return report
    phases.update({f"check.{k}": float(v) for k, v in (meta.get("phases") or {}).items()})
    report.max_abs_err = meta.get("max_abs")
    report.max_rel_err = meta.get("max_rel")
    report.unseen = list(meta.get("unseen") or [])
    if meta.get("error") or not meta.get("ok"):
        report.error = truncate(str(meta.get("error") or "the check's process gave no verdict"))
        return report
    if timing and device != "cpu":
        t = meta.get("timing") if isinstance(meta.get("timing"), dict) else {}
        ms = t.get("ms")
        if not isinstance(ms, int | float) or not math.isfinite(ms) or ms <= 0:
            report.error = f"the check's process sent no valid time: {truncate(str(t), 200)}"
            return report
        report.timing = t
    report.ok = True
    return report


def compare_on_device(
    out: Any, ref: Any, atol: float, rtol: float
) -> tuple[bool, float, float, str]:
    """`outputs.compare`'s verdict (|out - ref| <= atol + rtol * |ref|, NaN never passes),
    computed where the tensors are, in float64 chunks of CHUNK elements, so comparing a
    6 GB output needs no full-size temporaries and no host copy."""
    import torch

    if tuple(out.shape) != tuple(ref.shape):
        return (
            False,
            math.inf,
            math.inf,
            f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}",
        )
    o, r = out.reshape(-1), ref.reshape(-1)
    max_abs = max_rel = 0.0
    n_bad = n_nan = 0
    first: int | None = None
    for lo in range(0, o.numel(), CHUNK):
        a, b = o[lo : lo + CHUNK].double(), r[lo : lo + CHUNK].double()
        err = (a - b).abs()
        nan = torch.isnan(err)
        bad = nan | (err > atol + rtol * b.abs())
        n_nan += int(torch.isnan(a).sum())
        nb = int(bad.sum())
        if nb and first is None:
            first = lo + int(bad.nonzero()[0, 0])
        n_bad += nb
        fin = err[~nan]
        if fin.numel():
            max_abs = max(max_abs, float(fin.max()))
        big = (b.abs() > atol) & ~nan
        if bool(big.any()):
            max_rel = max(max_rel, float((err[big] / b.abs()[big]).max()))
    if n_nan:
        max_abs = max_rel = math.inf
    if not n_bad:
        return True, max_abs, max_rel, ""
    assert first is not None
    where = [int(i) for i in torch.unravel_index(torch.tensor(first), tuple(ref.shape))]
    unwritten = f" ({n_nan} NaN: never written)" if n_nan else ""
    why = (
        f"{n_bad} of {o.numel()} elements wrong{unwritten}; first at {where}: got "
        f"{float(o[first])}, expected {float(r[first])} (atol {atol}, rtol {rtol})"
    )
    return False, max_abs, max_rel, why


CHUNK = 1 << 25  # elements compared at once (256 MiB of float64 per temporary)


def fingerprint(tensors: list[Any]) -> list[tuple[float, float, int]]:
    """(sum, sum of |x| weighted by position mod 251, NaN count) of each tensor, in float64
    chunks: taken of the reference's outputs before the candidate's kernel runs and again
    after, so a kernel that writes into them (out of bounds) is caught, not compared
    against its own writes."""
    import torch

    out = []
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            out.append((0.0, 0.0, 0))
            continue
        flat = t.reshape(-1)
        s = w = 0.0
        nan = 0
        for lo in range(0, flat.numel(), CHUNK):
            c = flat[lo : lo + CHUNK].double()
            pos = torch.arange(lo, lo + c.numel(), device=c.device) % 251 + 1
            nan += int(torch.isnan(c).sum())
            c = torch.nan_to_num(c, nan=0.0)
            s += float(c.sum())
            w += float((c.abs() * pos).sum())
        out.append((s, w, nan))
    return out


def load_task_text(path: str, text: str) -> Any:
    """The task file's text (sent by the parent: the sandboxed child cannot read the
    caller's files) executed as a module named `path` (trusted, as `tasks.load_module`)."""
    module = _load_variant(path, text)
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not hasattr(module, n)]
    if missing:
        raise ConfigError(f"task file {path} lacks {', '.join(missing)}")
    return module


def _timing(
    meta: dict[str, Any],
    last: list[Any],
    expected: list[Any],
    inputs: list[Any],
    model: Any,
    timing: dict[str, Any],
    dtype: str,
) -> dict[str, Any]:
    """The timing report (format `pipeline._measured` reads): the candidate's ms from its
    child, after its outputs of the last timed call are re-checked; the eager Model timed
    here. (A time faster than the device's roofline is held back by the pipeline as
    `suspicious`: `argus_core.evaluate.timing.above_roofline`.)"""
    import torch

    from argus_core.evaluate.outputs import compare
    from argus_core.evaluate.timing import bench
    from argus_plugins.kernels.kernelbench import reference

    t = meta.get("timing")
    ms = t.get("ms") if isinstance(t, dict) else None
    if not isinstance(ms, int | float) or not math.isfinite(ms) or ms <= 0:
        return {"error": f"the candidate's process sent no valid time: {truncate(str(t), 200)}"}
    if meta.get("after_timing") != len(expected) or len(last) != len(expected):
        return {"error": "the candidate's process sent no outputs of its timed runs"}
    atol, rtol = reference.tolerance(dtype)
    for i, (out, ref) in enumerate(zip(last, expected)):
        ok, _, _, why = compare(torch.from_numpy(out.copy()), ref.cpu(), atol, rtol)
        if not ok:
            return {"error": f"re-check after the timed runs, output {i}: {why}"}
    with torch.no_grad():
        torch_ms = bench(lambda: model(*inputs), warmup_ms=25, rep_ms=100)
    flops, nbytes = float(timing.get("flops") or 0), float(timing.get("bytes") or 0)
    tflops = flops / (ms * 1e-3) / 1e12 if flops else None
    gbps = nbytes / (ms * 1e-3) / 1e9 if nbytes else None
    return {
        "ms": float(ms),
        "baselines": {"torch eager (Model.forward)": torch_ms},
        "flops": flops,
        "bytes": nbytes,
        "tflops": tflops,
        "gbps": gbps,
        "l2_bytes": int(torch.cuda.get_device_properties(0).L2_cache_size),
    }


# ---------------------------------------------------------------- a trial at unseen sizes
MAX_SIZES = 16  # integer constants of a task file tried as sizes
SIZE_ALIGN = 16  # an unseen size keeps its old one's divisibility by up to this


def unseen_size(n: int, rng: random.Random) -> int | None:
    """A size in [n/2, n) (never larger: a template may fix a tile to span the task's rows),
    at least 2, a multiple of the largest power of two up to SIZE_ALIGN that divides `n`
    where one is (else of a smaller one), picked by `rng`; None for n < 3."""
    align = min(SIZE_ALIGN, n & -n) if n > 0 else 1
    while align >= 1:
        sizes = [m for m in range(align, n, align) if m >= max(2, n // 2)]
        if sizes:
            return rng.choice(sizes)
        align //= 2
    return None


def _size_constants(tree: ast.Module) -> list[tuple[str, ast.Constant]]:
    """(name, node) of every integer literal that may be a size: a module-level assignment's
    value or tuple element (`N = 64`, `M, K = 48, 80`, `SHAPE = (24, 70)`) and any literal
    in `get_inputs`' body (`torch.randn(40, 33)`). Written on one line each."""
    found: list[tuple[str, ast.Constant]] = []

    def ints(node: ast.expr) -> list[ast.Constant]:
        elts = node.elts if isinstance(node, ast.Tuple | ast.List) else [node]
        return [e for e in elts if isinstance(e, ast.Constant) and type(e.value) is int]

    for stmt in tree.body:
        if isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
            target = stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target
            names = (
                [e.id if isinstance(e, ast.Name) else "?" for e in target.elts]
                if isinstance(target, ast.Tuple)
                else [target.id if isinstance(target, ast.Name) else "?"]
            )
            for i, node in enumerate(ints(stmt.value)):
                name = names[i] if len(names) > 1 and i < len(names) else names[0]
                if len(names) == 1 and isinstance(stmt.value, ast.Tuple | ast.List):
                    name = f"{name}[{i}]"
                found.append((name, node))
        elif isinstance(stmt, ast.FunctionDef) and stmt.name == "get_inputs":
            for node in ast.walk(stmt):
                if isinstance(node, ast.Constant) and type(node.value) is int:
                    found.append((f"get_inputs:{node.lineno}:{node.col_offset}", node))
    return [(k, n) for k, n in found if n.lineno == n.end_lineno][:MAX_SIZES]


def _same(a: Any, b: Any) -> bool:
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.shape == b.shape
            and a.dtype == b.dtype
            and bool(torch.equal(a, b))
        )
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _load_variant(path: str, text: str) -> Any:
    """The task file's `text` (an edited copy) executed as a fresh module (trusted: the
    user's reference, as `tasks.load_module` executes it)."""
    import hashlib
    import sys
    import types

    name = "_argus_kb_unseen_" + hashlib.sha1(text.encode()).hexdigest()[:16]
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module  # dataclasses look the module up by name while it runs
    try:
        exec(compile(text, path, "exec"), module.__dict__)
    finally:
        del sys.modules[name]  # one per check: not kept for the run's lifetime
    return module


class UnseenTrial(NamedTuple):
    """A trial at sizes the candidate never saw: what changed, its inputs and reference."""

    sizes: dict[str, tuple[int, int]]  # constant -> (task's value, this trial's)
    inputs: list[Any]
    expected: list[Any]


def unseen_trial(
    task_file: str,
    module: Any,
    model: Any,
    seed: int,
    init_seed: int,
    dtype: str,
    device: str,
    text: str | None = None,
    avoid: list[dict[str, int]] | None = None,
) -> UnseenTrial | None:
    """Inputs at sizes other than the task's, and the Model's outputs on them, or None
    where no size of the task file can change.

    The task file is re-executed with some of its integer constants (module-level sizes,
    literals in `get_inputs`) made smaller (`unseen_size`, drawn from `seed`). A variant
    counts only where `get_init_inputs()` and the Model's parameter shapes are unchanged
    (the candidate is built as for the other trials, so its weights match), `get_inputs()`
    gives tensors of other shapes, and the Model runs on them without a warning. All chosen
    constants are tried at once, then one at a time, keeping those that pass. The task file
    is trusted (the user's reference); the candidate is told nothing of the variant.
    `text`: the task file's text (else read from `task_file`); `avoid`: size sets of earlier
    variants ({name: new size}) this one must differ from."""
    import torch

    from argus_plugins.kernels.kernelbench import reference

    text = Path(task_file).read_text() if text is None else text
    rng = random.Random(seed)
    consts = [(k, n, unseen_size(n.value, rng)) for k, n in _size_constants(ast.parse(text))]
    consts = [(k, n, v) for k, n, v in consts if v is not None]
    if not consts:
        return None
    init = list(module.get_init_inputs())
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    base = reference.make_inputs(module, seed, dtype, "meta")  # the task's shapes only
    seen = [dict(a) for a in avoid or []]

    def attempt(chosen: list[tuple[str, ast.Constant, int]]) -> UnseenTrial | None:
        lines = text.splitlines(keepends=True)
        for _, node, value in sorted(
            chosen, key=lambda c: (c[1].lineno, c[1].col_offset), reverse=True
        ):
            i = node.lineno - 1
            lines[i] = lines[i][: node.col_offset] + str(value) + lines[i][node.end_col_offset :]
        if {k: v for k, _, v in chosen} in seen:
            return None
        try:
            variant = _load_variant(str(task_file), "".join(lines))
            if not _same(list(variant.get_init_inputs()), init):
                return None
            vmodel = reference.build_model(variant, init_seed, dtype, device)
            if {k: tuple(v.shape) for k, v in vmodel.state_dict().items()} != shapes:
                return None
            inputs = reference.make_inputs(variant, seed, dtype, device)
            kinds = [(type(x), getattr(x, "dtype", None)) for x in inputs]
            if kinds != [(type(x), getattr(x, "dtype", None)) for x in base]:
                return None
            moved = [
                tuple(x.shape) != tuple(y.shape)
                for x, y in zip(inputs, base)
                if isinstance(x, torch.Tensor)
            ]
            if not any(moved):
                return None
            with warnings.catch_warnings():  # a Model that warns about them: not valid inputs
                warnings.simplefilter("error")
                expected = _flat(reference.run_model(vmodel, inputs))
        except Exception:  # this variant is no valid task: try another
            return None
        return UnseenTrial({k: (n.value, v) for k, n, v in chosen}, inputs, expected)

    found = attempt(consts)
    if found is not None:
        return found
    kept: list[tuple[str, ast.Constant, int]] = []
    for c in rng.sample(consts, len(consts)):
        trial = attempt([*kept, c])
        if trial is not None:
            kept.append(c)
            found = trial
    return found
