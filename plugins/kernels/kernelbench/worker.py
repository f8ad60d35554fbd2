"""Untrusted side of a KernelBench candidate check: `python -m argus_plugins.kernels.kernelbench.worker`.

Runs isolated (`argus_core.sandbox.run_isolated`: no environment, network or files of the
caller). It reads the parent's request (`torch.save` bytes on stdin: the candidate, the
trial inputs, the shapes of the outputs, for a DSL kernel the model's parameters) and
writes only the candidate's outputs (`outputs.pack_arrays`: plain arrays, never a pickle)
on stdout. It holds no reference output, no reference model and no verdict: the parent
(`evaluate.check_candidate`) compares and decides, so nothing this process does, or
writes, can make a wrong answer pass.

On a GPU runner with timing, the candidate is timed here, and the output of its last
timed call is sent back too, so the parent re-checks it (lazy work, or work left on
another stream, is caught).
"""

from __future__ import annotations

import io
import os
import sys
import time
import traceback
from typing import Any

from argus_core.evaluate.launch import ensure_triton_cache_dir

ERROR_CHARS = 4000  # the candidate's own error text is cut to this


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
            LoweredKernel.from_dict(cand["kernels"][0]),
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

    def call() -> None:
        last[:] = _flat(runner(inputs, like))

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
