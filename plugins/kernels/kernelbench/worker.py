"""The child of a KernelBench candidate check: `python -m argus_plugins.kernels.kernelbench.worker`.

Runs isolated (`argus_core.sandbox.run_isolated`: no environment, network or files of the
caller) and reads the parent's request (`torch.save` bytes on stdin). Two modes:

- a DSL candidate (`"mode": "check"`, `check_here`): a kernel Argus lowered from verified
  IR and launched by our launcher, so no code of the candidate's own runs in Python. The
  whole check happens here, on the device: the task file's text (trusted) gives the Model
  and each trial's inputs, drawn here from the trial seeds; the reference runs first on
  copies, the outputs are compared here in chunks, and only the verdict and small
  diagnostics go back (`outputs.pack_arrays` with no arrays). Nothing full-size crosses
  the pipe or exists in the parent.
- a ModelNew (arbitrary Python of the candidate's in this process): the parent sends the
  trial inputs and this process writes only the candidate's outputs (plain arrays, never a
  pickle). It holds no reference output, no reference model and no verdict: the parent
  (`evaluate.check_candidate`) compares and decides, so nothing this process does, or
  writes, can make a wrong answer pass.

On a GPU runner with timing, the candidate is timed here, and the output of its last
timed call is sent back too, so the parent re-checks it (lazy work, or work left on
another stream, is caught).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from argus_core.evaluate.launch import ensure_triton_cache_dir

ERROR_CHARS = 4000  # the candidate's own error text is cut to this


def _use_gpu(device: str) -> None:
    """Make `device` ("cuda:1") the current GPU; a plain "cuda" (a run outside the suite,
    which names no GPU) keeps the current one: torch.cuda.set_device refuses a device
    without an index."""
    import torch

    if device.startswith("cuda") and torch.device(device).index is not None:
        torch.cuda.set_device(torch.device(device))


def _flat(x: Any) -> list[Any]:
    return list(x) if isinstance(x, list | tuple) else [x]


def run(request: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    """Run the candidate on every trial's inputs; stop at its first error. Returns (meta,
    outputs): meta {"counts": outputs per trial, "error": "" or why, "timing"}."""
    ensure_triton_cache_dir()
    import torch

    from argus_core.evaluate.dtypes import torch_dtype
    from argus_core.types import LoweredKernel
    from argus_plugins.kernels.kernelbench import harness, reference

    dtype, device = request["dtype"], request["device"]
    cand = request["candidate"]
    if cand["kind"] == "dsl":
        compiler = {k: v for k, v in dict(cand.get("compiler") or {}).items() if v is not None}
        params = {k: v.to(device) for k, v in request["params"].items()}
        runner = harness.dsl_runner(
            [LoweredKernel.from_dict(k) for k in cand["kernels"]],  # a program: several
            cand["binding"],
            params,
            dict(cand.get("constexprs") or {}),
            compiler if device != "cpu" else {},  # the interpreter takes no compiler options
        )
    else:
        mod = harness.load_modelnew(cand["source"], cand.get("filename", "<candidate>"))
        reference.set_seed(int(request["init_seed"]))  # the same weights as the Model's
        model_new = mod.ModelNew(*list(request["init_inputs"]))
        if isinstance(model_new, torch.nn.Module):
            model_new = model_new.to(device=device, dtype=torch_dtype(dtype)).eval()
        runner = harness.modelnew_runner(model_new)

    def on_device(xs: list[Any]) -> list[Any]:
        return [x.to(device) if isinstance(x, torch.Tensor) else x for x in xs]

    counts: list[int] = []
    outputs: list[Any] = []
    meta: dict[str, Any] = {"counts": counts, "error": ""}
    for trial in request["trials"]:
        inputs = on_device(trial["inputs"])
        like = _like(trial, device)
        try:
            got = _flat(runner(inputs, like))
            if device != "cpu":
                torch.cuda.synchronize()
        except harness.ComputeInPyTorch as exc:
            meta["error"] = f"guard: {exc}"
            break
        except harness.OutOfBounds as exc:
            meta["error"] = str(exc)
            break
        except Exception as exc:
            tb = traceback.format_exc(limit=-3)
            meta["error"] = f"{type(exc).__name__}: {exc}\n{tb}"[-ERROR_CHARS:]
            break
        bad = [type(o).__name__ for o in got if not isinstance(o, torch.Tensor)]
        if bad:
            meta["error"] = f"an output is a {bad[0]}, not a tensor"
            break
        counts.append(len(got))
        outputs.extend(got)
    timing = request.get("timing")
    if timing and device != "cpu" and not meta["error"]:
        first = request["trials"][0]
        inputs = on_device(first["inputs"])
        like = _like(first, device)
        ms, last = _measure(runner, inputs, like)
        meta["timing"] = {"ms": ms}
        meta["after_timing"] = len(last)
        outputs.extend(last)
    return meta, outputs


class _Gate:
    """The GPU as shared with other checks of a suite run, asked of the parent process
    (`evaluate.GpuShare`, which holds the locks on its side of the sandbox) over two pipes
    it passes in (`request["gate"]`: this side's write and read descriptors): `held(b"s")`
    shares the GPU (a trial, a compile), `held(b"x")` has it alone (a timing); the parent
    answers b"g" when it is granted, and b"r" gives it back. Without descriptors (one
    check per GPU, or the CPU): no-ops."""

    def __init__(self, fds: Any):
        self.up, self.down = (int(fds[0]), int(fds[1])) if fds else (None, None)
        self.waited = 0.0

    @contextlib.contextmanager
    def held(self, mode: bytes) -> Iterator[None]:
        if self.up is None or self.down is None:
            yield
            return
        t0 = time.perf_counter()
        os.write(self.up, mode)
        if os.read(self.down, 1) != b"g":
            raise RuntimeError("the parent closed the GPU's gate")
        self.waited += time.perf_counter() - t0
        try:
            yield
        finally:
            os.write(self.up, b"r")


MEMORY_MARGIN = 1.15  # the estimate's slack (allocator rounding, the kernel's guards)


def _setup(request: dict[str, Any], phases: dict[str, float], gate: _Gate) -> tuple[Any, ...]:
    """The device, the task's module and Model (built here from the init seed, its reference
    in full fp32) and the candidate's runner: what a check and a timing both start from.
    Returns (module, model, runner, tf32): `tf32`, PyTorch's TF32 defaults, restored for the
    baselines."""
    import torch

    from argus_core.types import LoweredKernel
    from argus_plugins.kernels.kernelbench import evaluate, harness, reference

    t0 = time.perf_counter()
    dtype, device = request["dtype"], request["device"]
    _use_gpu(device)
    # the reference in full fp32: PyTorch's default runs cuDNN convolutions in TF32 (~1e-3
    # off), which an IEEE-fp32 kernel then "fails" at fp32's 1e-4 tolerance; the eager and
    # compiled baselines are timed at PyTorch's defaults again (`_time_all`)
    tf32 = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    task = request["task"]
    module = evaluate.load_task_text(task["path"], task["text"])
    t1 = time.perf_counter()
    with gate.held(b"s"):
        model = reference.build_model(module, int(request["init_seed"]), dtype, device)
    cand = request["candidate"]
    compiler = {k: v for k, v in dict(cand.get("compiler") or {}).items() if v is not None}
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    params.update({k: v.clone() for k, v in model.named_buffers()})
    runner = harness.dsl_runner(
        [LoweredKernel.from_dict(k) for k in cand["kernels"]],  # a program: several (14b)
        cand["binding"],
        params,
        dict(cand.get("constexprs") or {}),
        compiler if device != "cpu" else {},  # the interpreter takes no compiler options
    )
    phases["model"] = time.perf_counter() - t1
    phases["load"] = t1 - t0
    return module, model, runner, tf32


def check_here(request: dict[str, Any]) -> dict[str, Any]:
    """A DSL candidate checked entirely in this process, on the device (the parent's
    `evaluate._check_dsl`): the task's Model and each trial's inputs are made here from the
    seeds; per trial the reference runs first on copies of the inputs, its outputs are
    fingerprinted, the kernel runs (its output poisoned, guard regions around it, its own
    copy of the parameters), the outputs are compared here and the fingerprint re-taken (a
    kernel that wrote into the reference's outputs fails). Trials: every seed's, then the
    first one's inputs permuted and rescaled. A correct kernel is then re-checked at
    UNSEEN_SHAPES sizes it never saw ("unseen", reported, not part of the verdict) and, on a
    GPU with timing, timed with the eager Model and torch.compile(Model) in this process.
    On a GPU shared with other checks (`request["gate"]`, `_Gate`) each use of the GPU
    (the Model's build, a trial, an unseen size, torch.compile's compile) holds it shared,
    and the three timings hold it alone.
    Returns the verdict: {"ok", "error", "trials", "max_abs", "max_rel", "unseen",
    "timing", "memory", "phases" (seconds per stage)}; nothing full-size leaves here."""
    ensure_triton_cache_dir()
    import torch

    from argus_core.frontend import capture_task
    from argus_plugins.kernels.kernelbench import costs, evaluate, reference

    start = time.perf_counter()
    phases: dict[str, float] = {}
    gate = _Gate(request.get("gate"))
    dtype, device = request["dtype"], request["device"]
    _use_gpu(device)  # before asking it for its free memory
    task = request["task"]
    verdict: dict[str, Any] = {"ok": False, "error": "", "trials": 0, "unseen": [],
                               "phases": phases}  # fmt: skip
    # the memory the check needs, from the graph captured on meta tensors, before allocating
    mem = request.get("memory")  # the parent's, from the graph it captured
    try:
        if mem is None:
            gm, _ = capture_task(evaluate.load_task_text(task["path"], task["text"]), task["path"])
            mem = costs.memory_estimate(gm)
    except Exception:  # a graph fx cannot capture: no estimate, the check still runs
        mem = None
    phases["capture"] = time.perf_counter() - start
    if mem is not None:
        # the reference's peak, plus the kernel's inputs, parameters and output beside it
        need = int(MEMORY_MARGIN * (mem["peak"] + mem["inputs"] + mem["params"] + mem["output"]))
        verdict["memory"] = {**mem, "need": need}
        free, total = _free_memory(device)
        if free is not None and need > free and gate.up is not None and need < total:
            # other checks hold the memory for now: wait for it (half the check's time)
            t0 = time.perf_counter()
            limit = t0 + 0.5 * float(request.get("timeout_s") or 60)
            while need > free and time.perf_counter() < limit:
                time.sleep(0.5)
                free, total = _free_memory(device)
            phases["wait_memory"] = time.perf_counter() - t0
        if free is not None:
            verdict["memory"].update(free=int(free), total=int(total))
            if need > free:
                verdict["error"] = (
                    f"memory: the check needs about {need / 2**30:.1f} GiB (reference peak "
                    f"{mem['peak'] / 2**30:.1f} GiB: inputs {mem['inputs'] / 2**30:.1f}, "
                    f"intermediates {mem['intermediates'] / 2**30:.1f}), the device has "
                    f"{free / 2**30:.1f} of {total / 2**30:.1f} GiB free; not run"
                )
                return verdict
    module, model, runner, tf32 = _setup(request, phases, gate)
    atol, rtol = reference.tolerance(dtype)
    worst = [0.0, 0.0]

    def one(label: str, inputs: list[Any], expected: list[Any] | None = None) -> str:
        """'' when the kernel's outputs on `inputs` match the reference's, else why."""
        if expected is None:
            expected = _flat(reference.run_model(model, inputs))
        before = evaluate.fingerprint(expected)
        err = _run(runner, inputs, _like_tensor(expected[0]), device)
        if isinstance(err, str):
            return f"{label}: {err}" if not err.startswith("guard: ") else err
        got = err
        if len(got) != len(expected):
            return f"{label}: {len(got)} outputs, expected {len(expected)}"
        for i, (out, ref) in enumerate(zip(got, expected)):
            ok, max_abs, max_rel, why = evaluate.compare_on_device(out, ref, atol, rtol)
            worst[0], worst[1] = max(worst[0], max_abs), max(worst[1], max_rel)
            if not ok:
                return f"{label} output {i}: {why}"
        if evaluate.fingerprint(expected) != before:
            return f"{label}: the kernel wrote into the reference's outputs (out of bounds)"
        return ""

    seeds = [int(x) for x in request["seeds"]]
    try:
        t0 = time.perf_counter()
        for t, s in enumerate([*seeds, None]):
            with gate.held(b"s"):
                if s is None:
                    label = "permuted+scaled inputs of trial 0"
                    inputs = reference.perturbed(
                        reference.make_inputs(module, seeds[0], dtype, device), seeds[0]
                    )
                else:
                    label = f"trial {t} (seed {s})"
                    inputs = reference.make_inputs(module, s, dtype, device)
                why = one(label, inputs)
                del inputs
                _sync(device)
            if t == 0:  # the first trial compiles the kernel (Triton's JIT)
                phases["first_trial"] = time.perf_counter() - t0
            verdict["trials"] = t + 1
            if why:
                verdict["error"] = why
                break
        phases["trials"] = time.perf_counter() - t0
        verdict["max_abs"], verdict["max_rel"] = worst
        if verdict["error"]:
            return verdict
        verdict["ok"] = True
        # the re-checks at unseen sizes (each cheaper than a trial: its sizes are smaller)
        # only while they fit the check's time: a slow kernel keeps its verdict
        t0 = time.perf_counter()
        per_trial = (t0 - start) / max(1, verdict["trials"])
        deadline = start + 0.8 * float(request.get("timeout_s") or 60) - per_trial
        verdict["unseen"] = _unseen(request, module, model, one, device, deadline, gate)
        phases["unseen"] = time.perf_counter() - t0
        timing = request.get("timing")
        if timing and device != "cpu":
            t0 = time.perf_counter()
            left = float(request.get("timeout_s") or 60) - (t0 - start)
            verdict["timing"] = _time_all(
                module, model, runner, seeds[0], request, left, tf32, gate, phases
            )
            phases["timing"] = time.perf_counter() - t0
            if "error" in verdict["timing"]:
                verdict["ok"], verdict["error"] = False, verdict["timing"].pop("error")
    except torch.OutOfMemoryError as exc:
        verdict["ok"] = False
        verdict["error"] = f"memory: out of device memory during the check: {str(exc)[:300]}"
    phases["wait_gpu"] = gate.waited
    return verdict


def _free_memory(device: str) -> tuple[int | None, int]:
    """(free, total) bytes where the check allocates: the GPU's; on the CPU the machine's
    available memory (/proc/meminfo), capped by what this process's address-space limit
    (the sandbox's) leaves; (None, 0) where neither is known."""
    import resource

    import torch

    if device != "cpu":
        free, total = torch.cuda.mem_get_info()
        return int(free), int(total)

    def kib(path: str, key: str) -> int | None:
        try:
            for line in Path(path).read_text().splitlines():
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            pass
        return None

    free, total = kib("/proc/meminfo", "MemAvailable"), kib("/proc/meminfo", "MemTotal")
    if free is None or total is None:
        return None, 0
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit != resource.RLIM_INFINITY:
        free = min(free, max(0, limit - (kib("/proc/self/status", "VmSize") or 0)))
    return int(free), int(total)


def _run(runner: Any, inputs: list[Any], like: Any, device: str) -> list[Any] | str:
    """The kernel's outputs on `inputs`, or why it failed (a string)."""
    import torch

    from argus_plugins.kernels.kernelbench import harness

    try:
        got = _flat(runner(inputs, like))
        if device != "cpu":
            torch.cuda.synchronize()
    except harness.ComputeInPyTorch as exc:
        return f"guard: {exc}"
    except harness.OutOfBounds as exc:
        return str(exc)
    except torch.OutOfMemoryError:
        raise
    except Exception as exc:
        tb = traceback.format_exc(limit=-3)
        return f"{type(exc).__name__}: {exc}\n{tb}"[-ERROR_CHARS:]
    bad = [type(o).__name__ for o in got if not isinstance(o, torch.Tensor)]
    return f"an output is a {bad[0]}, not a tensor" if bad else got


def _sync(device: str) -> None:
    """Wait for this process's GPU work (before it lets go of the GPU)."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def _like_tensor(ref: Any) -> Any:
    """The empty output a DSL kernel writes: the reference's shape and dtype."""
    import torch

    return torch.empty(ref.shape, dtype=ref.dtype, device=ref.device)


def _unseen(
    request: dict[str, Any],
    module: Any,
    model: Any,
    one: Any,
    device: str,
    deadline: float,
    gate: _Gate | None = None,
) -> list:
    """The kernel re-checked at UNSEEN_SHAPES size sets the search never saw (each its own
    variant of the task file: `evaluate.unseen_trial`): [{"sizes": {name: [task's, this
    one's]}, "ok", "error"}]; [] where no size of the task can change; a last entry
    "not run" where `deadline` (a perf_counter time) passed first."""
    from argus_plugins.kernels.kernelbench import evaluate

    task = request["task"]
    found: list[dict[str, Any]] = []
    wanted = list(request.get("unseen_seeds") or [])
    # a draw may repeat an earlier one's sizes (a size has few aligned smaller values: 64
    # has two, 32 and 48), and a repeat is refused before anything runs: more draws,
    # derived from the parent's seeds. With 2 more a wanted size, one check in 32 of a
    # 64-wide task found a single unseen size (CI failed on it, 2026-12-03); with 8 more,
    # one in 2^17
    draws = wanted + [int(wanted[-1]) + 7919 * (k + 1) for k in range(8 * len(wanted))]
    for s in draws if wanted else []:
        if len(found) >= len(wanted):
            break
        if time.perf_counter() > deadline:
            found.append({"sizes": {}, "ok": False, "error": "not run: the check's time ran out"})
            break
        with gate.held(b"s") if gate is not None else contextlib.nullcontext():
            trial = evaluate.unseen_trial(
                task["path"], module, model, int(s), int(request["init_seed"]), request["dtype"],
                device, text=task["text"], avoid=[{k: v[1] for k, v in f["sizes"].items()} for f in found],
            )  # fmt: skip
            if trial is None:
                continue
            what = ", ".join(f"{k} {a}->{b}" for k, (a, b) in trial.sizes.items())
            why = one(f"unseen sizes ({what})", trial.inputs, trial.expected)
            _sync(device)
        found.append({"sizes": {k: list(v) for k, v in trial.sizes.items()}, "ok": not why,
                      "error": why[:400]})  # fmt: skip
        del trial
    return found


def _time_all(
    module: Any,
    model: Any,
    runner: Any,
    seed: int,
    request: dict[str, Any],
    left_s: float,
    tf32: tuple[bool, bool],
    gate: _Gate | None = None,
    phases: dict[str, float] | None = None,
) -> dict[str, Any]:
    """The kernel, the eager Model and torch.compile(Model) timed here, on trial 0's
    inputs (`timing.bench`), the kernel's output of its last timed call re-checked (the
    reference in full fp32), the baselines at PyTorch's TF32 defaults `tf32`. The
    compiled Model gets at most half the time left of the check (compiling a large Model
    takes long); past that, or where it fails to compile, it is left out ("compile_error").
    `gate`: the compile holds the GPU shared, the three timings alone. The format
    `pipeline._measured` reads."""
    import torch

    from argus_core.evaluate.timing import bench
    from argus_plugins.kernels.kernelbench import evaluate, reference

    gate = gate or _Gate(None)
    phases = {} if phases is None else phases
    dtype, device = request["dtype"], request["device"]
    with gate.held(b"s"):
        inputs = reference.make_inputs(module, seed, dtype, device)
        expected = _flat(reference.run_model(model, inputs))
        torch.cuda.synchronize()
    atol, rtol = reference.tolerance(dtype)
    # the baselines as users run them: PyTorch's default TF32 settings (`tf32`)
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = tf32
    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    with gate.held(b"s"):  # torch.compile's compile: CPU work and one checking run
        compiled, why = _compiled(model, inputs, expected, max(0.0, left_s / 2), atol, rtol)
        torch.cuda.synchronize()
    phases["torch_compile"] = time.perf_counter() - t0
    if compiled is None:
        out["compile_error"] = why
    t0 = time.perf_counter()
    with gate.held(b"x"):  # the GPU to this check alone while it times
        t1 = time.perf_counter()
        ms, last = _measure(runner, inputs, _like_tensor(expected[0]))
        with torch.no_grad():
            eager_ms = bench(lambda: model(*inputs), warmup_ms=25, rep_ms=100)
            compiled_ms = (
                bench(lambda: compiled(*inputs), warmup_ms=25, rep_ms=100)
                if compiled is not None  # an OptimizedModule has no truth value of its own
                else None
            )
    phases["wait_alone"], phases["benches"] = t1 - t0, time.perf_counter() - t1
    if len(last) != len(expected):
        return {"error": "the kernel's timed runs gave no outputs"}
    for i, (got, ref) in enumerate(zip(last, expected)):
        ok, _, _, why = evaluate.compare_on_device(got, ref, atol, rtol)
        if not ok:
            return {"error": f"re-check after the timed runs, output {i}: {why}"}
    del last
    baselines = {"torch eager (Model.forward)": eager_ms}
    if compiled_ms is not None:
        baselines["torch.compile (Model)"] = compiled_ms
    timing = request.get("timing") or {}
    flops, nbytes = float(timing.get("flops") or 0), float(timing.get("bytes") or 0)
    out.update(
        ms=float(ms),
        baselines=baselines,
        flops=flops,
        bytes=nbytes,
        tflops=flops / (ms * 1e-3) / 1e12 if flops else None,
        gbps=nbytes / (ms * 1e-3) / 1e9 if nbytes else None,
        l2_bytes=int(torch.cuda.get_device_properties(torch.device(device)).L2_cache_size),
    )
    return out


class _Late(Exception):
    pass


def _compiled(
    model: Any, inputs: list[Any], expected: list[Any], budget_s: float, atol: float, rtol: float
) -> tuple[Any, str]:
    """(torch.compile(model) compiled and checked on `inputs`, "") in default mode, or
    (None, why): it did not compile within `budget_s` (an alarm stops it), failed, or
    disagrees with eager."""
    import signal

    import torch

    from argus_plugins.kernels.kernelbench import evaluate

    if budget_s < 2:
        return None, "no time left for torch.compile"
    # compile in this process: no pool of compile workers inside the sandbox
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

    def late(signum: int, frame: Any) -> None:
        raise _Late()

    old = signal.signal(signal.SIGALRM, late)
    signal.setitimer(signal.ITIMER_REAL, budget_s)
    try:
        compiled = torch.compile(model)
        with torch.no_grad():
            got = _flat(compiled(*inputs))
            torch.cuda.synchronize()
        signal.setitimer(signal.ITIMER_REAL, 0)
        for out, ref in zip(got, expected):
            # a sanity check (TF32 at PyTorch's defaults is ~1e-3 off the fp32 reference)
            tol_a, tol_r = max(10 * atol, 1e-2), max(10 * rtol, 1e-2)
            ok, _, _, why = evaluate.compare_on_device(out, ref, tol_a, tol_r)
            if not ok:
                return None, f"torch.compile's output differs from eager: {why[:200]}"
        return compiled, ""
    except _Late:
        return None, f"torch.compile took over {budget_s:.0f} s"
    except Exception as exc:
        return None, f"torch.compile failed: {type(exc).__name__}: {str(exc)[:200]}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _like(trial: dict[str, Any], device: str) -> Any:
    """The empty output a DSL kernel writes (its shape and dtype are the reference's); a
    ModelNew allocates its own and is told nothing of the expected output (None)."""
    import torch

    if trial.get("like") is None:
        return None
    shape, out_dtype = trial["like"]
    return torch.empty(shape, dtype=getattr(torch, out_dtype), device=device)


def _measure(runner: Any, inputs: list[Any], like: Any) -> tuple[float, list[Any]]:
    """Median ms of the candidate, timed as every family is (`timing.bench`), and the
    outputs of its last timed call (synchronized), for the parent to re-check."""
    import torch

    from argus_core.evaluate.timing import bench

    last: list[Any] = []
    timed = getattr(runner, "timed", runner)  # a DSL kernel's: no guard regions (harness)

    def call() -> None:
        last[:] = _flat(timed(inputs, like))

    with torch.no_grad():
        ms = bench(call, warmup_ms=25, rep_ms=100)
        torch.cuda.synchronize()
    return ms, [o.clone() for o in last]


def main() -> int:
    import torch

    from argus_core.evaluate.outputs import pack_arrays

    # keep the real stdout for the outputs; route fd 1 (C code, print) to stderr
    result_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    start = time.perf_counter()
    request = torch.load(io.BytesIO(sys.stdin.buffer.read()), weights_only=False)  # the parent's
    try:
        if request.get("mode") == "check":  # a DSL candidate: the whole check, here
            meta, outputs = check_here(request), []
        else:
            meta, outputs = run(request)
    except Exception as exc:
        tb = traceback.format_exc(limit=-4)
        meta, outputs = (
            {"counts": [], "error": f"{type(exc).__name__}: {exc}\n{tb}"[-ERROR_CHARS:]},
            [],
        )
    meta["seconds"] = time.perf_counter() - start
    result_out.write(pack_arrays(meta, outputs))
    result_out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
