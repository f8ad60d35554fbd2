"""Child process of a KernelBench candidate check: `python -m argus_plugins.kernels.kernelbench.worker`.

Reads one JSON request on stdin, writes one JSON result on stdout (what the kernel or
Triton prints goes to stderr). The parent (`evaluate.check_candidate`) chooses the
environment, TRITON_INTERPRET included, and the time limit.

Trials, as KernelBench runs them and stricter: the reference model is built once under
`init_seed` (a ModelNew candidate under the same seed, so their weights agree); each trial
draws fresh inputs from a new seed and compares the candidate's output with the model's;
one last trial feeds the first trial's inputs permuted and rescaled. Outputs start as NaN.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any

from argus_core.evaluate.launch import ensure_triton_cache_dir


def _flat(x: Any) -> list[Any]:
    return list(x) if isinstance(x, list | tuple) else [x]


def _trial_seeds(seed: int, trials: int) -> list[int]:
    # spread apart, so no trial's inputs are another's shifted by one draw
    return [seed * 1_000_003 + 7919 * (t + 1) for t in range(trials)]


def run(request: dict[str, Any]) -> dict[str, Any]:
    """Check the candidate on every trial; stop at the first failure."""
    ensure_triton_cache_dir()
    import torch

    from argus_core.evaluate.outputs import compare
    from argus_core.types import LoweredKernel
    from argus_plugins.kernels.kernelbench import harness, reference, tasks

    module = tasks.load_module(request["task_file"])
    dtype, device = request["dtype"], request["device"]
    init_seed = int(request["init_seed"])
    model = reference.build_model(module, init_seed, dtype, device)
    cand = request["candidate"]
    if cand["kind"] == "dsl":
        compiler = {k: v for k, v in dict(cand.get("compiler") or {}).items() if v is not None}
        runner = harness.dsl_runner(
            LoweredKernel.from_dict(cand["kernels"][0]),
            cand["binding"],
            model,
            dict(cand.get("constexprs") or {}),
            compiler if device != "cpu" else {},  # the interpreter takes no compiler options
        )
    else:
        mod = harness.load_modelnew(cand["source"], cand.get("filename", "<candidate>"))
        reference.set_seed(init_seed)  # the same weights as the reference model
        model_new = mod.ModelNew(*list(module.get_init_inputs()))
        if isinstance(model_new, torch.nn.Module):
            model_new = model_new.to(device=device, dtype=model_new_dtype(dtype)).eval()
        runner = harness.modelnew_runner(model_new)

    atol, rtol = reference.tolerance(dtype)
    seeds = _trial_seeds(int(request["seed"]), int(request["trials"]))
    trials = [
        (f"trial {t} (seed {s})", reference.make_inputs(module, s, dtype, device))
        for t, s in enumerate(seeds)
    ]
    trials.append(
        ("permuted+scaled inputs of trial 0", reference.perturbed(trials[0][1], seeds[0]))
    )
    worst_abs = worst_rel = 0.0
    for label, inputs in trials:
        expected = _flat(reference.run_model(model, inputs))
        try:
            got = _flat(runner(inputs, expected[0]))
        except harness.ComputeInPyTorch as exc:
            return {"ok": False, "error": f"guard: {exc}"}
        if device != "cpu":
            torch.cuda.synchronize()
        if len(got) != len(expected):
            return {"ok": False, "error": f"{label}: {len(got)} outputs, expected {len(expected)}"}
        for i, (out, ref) in enumerate(zip(got, expected)):
            if not isinstance(out, torch.Tensor):
                return {"ok": False, "error": f"{label}: output {i} is a {type(out).__name__}"}
            ok, max_abs, max_rel, why = compare(out, ref, atol, rtol)
            worst_abs, worst_rel = max(worst_abs, max_abs), max(worst_rel, max_rel)
            if not ok:
                return {
                    "ok": False,
                    "max_abs_err": worst_abs,
                    "max_rel_err": worst_rel,
                    "error": f"{label} output {i}: {why}",
                }
    result: dict[str, Any] = {
        "ok": True,
        "max_abs_err": worst_abs,
        "max_rel_err": worst_rel,
        "error": "",
        "trials": len(trials),
    }
    if request.get("timing") and device != "cpu":
        result["timing"] = _measure(runner, model, trials[0][1], request["timing"])
    return result


def model_new_dtype(dtype: str) -> Any:
    from argus_core.evaluate.dtypes import torch_dtype

    return torch_dtype(dtype)


def _measure(runner: Any, model: Any, inputs: list[Any], timing: dict[str, Any]) -> dict[str, Any]:
    """Medians of the candidate and of the eager Model forward on the same inputs, timed the
    same way as every family (`argus_core.evaluate.timing.bench`: CUDA-graph replay under a
    millisecond, so neither side is timed as its Python launch cost), in the format
    `pipeline._measured` reads."""
    import torch

    from argus_core.evaluate.timing import bench
    from argus_plugins.kernels.kernelbench import reference

    like = _flat(reference.run_model(model, inputs))[0]
    with torch.no_grad():
        ms = bench(lambda: runner(inputs, like), warmup_ms=25, rep_ms=100)
        torch_ms = bench(lambda: model(*inputs), warmup_ms=25, rep_ms=100)
    flops, nbytes = float(timing.get("flops") or 0), float(timing.get("bytes") or 0)
    return {
        "ms": ms,
        "baselines": {"torch eager (Model.forward)": torch_ms},
        "flops": flops,
        "bytes": nbytes,
        "tflops": flops / (ms * 1e-3) / 1e12 if flops else None,
        "gbps": nbytes / (ms * 1e-3) / 1e9 if nbytes else None,
    }


def main() -> int:
    # keep the real stdout for the result; route fd 1 (C code, print) to stderr
    result_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    start = time.perf_counter()
    try:
        result = run(json.loads(sys.stdin.read()))
    except Exception as exc:
        tb = traceback.format_exc(limit=-4)
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}\n{tb}"[-4000:]}
    result["seconds"] = time.perf_counter() - start
    result_out.write(json.dumps(result))
    result_out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
