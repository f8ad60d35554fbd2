"""Child-process side of the correctness check: `python -m argus_core.evaluate.worker`.

Reads one JSON request on stdin, writes one JSON result on stdout. Anything the kernel or
Triton prints goes to stderr, so stdout carries only the result. The parent
(`correctness.check_correctness`) decides the environment, TRITON_INTERPRET included,
before this process imports triton.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any

from argus_core.evaluate.launch import ensure_triton_cache_dir, launch_args, load_kernel
from argus_core.evaluate.outputs import compare, poison
from argus_core.evaluate.timing import measure
from argus_core.types import LoweredKernel


def run(request: dict[str, Any]) -> dict[str, Any]:
    """Check the kernel on every (trial, shape); stop at the first failure."""
    ensure_triton_cache_dir()
    from argus_core.plugin_manager import Registry, make_plugin_manager

    kernels = [LoweredKernel.from_dict(k) for k in request["kernels"]]
    family = Registry(make_plugin_manager()).get("kernel", request["family"])
    fns = {k.name: (k, load_kernel(k, request.get("workdir"))) for k in kernels}
    outputs = list(family.outputs)  # all of them: a kernel that skips one must fail

    # the launch options Triton takes (`Backend.compiler_options`: the policy's options but
    # those the lowering read, such as Hopper's tma); None leaves one to Triton
    compiler = {k: v for k, v in dict(request.get("compiler") or {}).items() if v is not None}
    if request["device"] == "cpu":
        compiler = {}  # the interpreter takes no compiler options

    def launch(name: str, tensors: dict[str, Any]) -> None:
        """Launch kernel `name` of the candidate with arguments bound from `tensors`."""
        lowered, fn = fns[name]
        args, grid = launch_args(lowered, tensors, request.get("constexprs"))
        # the policy's compiler options (num_warps, num_stages, waves_per_eu, ...) are
        # launch options of the JIT: without them it compiles Triton's defaults
        fn[grid](*args, **compiler)

    dtype, device = request["dtype"], request["device"]
    atol, rtol = family.tolerance(dtype)
    worst_abs = worst_rel = 0.0
    for trial in range(int(request["trials"])):
        for shape in request["shapes"]:
            inputs = family.make_inputs(shape, dtype, int(request["seed"]) + trial, device)
            # reference first: a kernel that writes into its inputs cannot change it
            expected = family.reference(inputs)
            for name in outputs:
                poison(inputs[name])
            if len(kernels) > 1:
                family.program(launch, inputs, dict(request.get("constexprs") or {}))
            else:
                launch(kernels[0].name, inputs)
            if device != "cpu":
                import torch

                torch.cuda.synchronize()
            for name in outputs:
                ok, max_abs, max_rel, why = compare(inputs[name], expected[name], atol, rtol)
                worst_abs, worst_rel = max(worst_abs, max_abs), max(worst_rel, max_rel)
                if not ok:
                    return {
                        "ok": False,
                        "max_abs_err": worst_abs,
                        "max_rel_err": worst_rel,
                        "error": f"trial {trial} shape {shape} output {name!r}: {why}",
                    }
    result = {"ok": True, "max_abs_err": worst_abs, "max_rel_err": worst_rel, "error": ""}
    timing = request.get("timing")
    if timing and device != "cpu":

        def run_on(inputs: dict[str, Any]) -> None:
            if len(kernels) > 1:
                family.program(launch, inputs, dict(request.get("constexprs") or {}))
            else:
                launch(kernels[0].name, inputs)

        result["timing"] = measure(
            family,
            run_on,
            dict(timing["shape"]),
            dtype,
            int(request["seed"]) + 7919,
            int(timing.get("l2_bytes", 60 << 20)),
            float(timing.get("warmup_ms", 25)),
            float(timing.get("rep_ms", 100)),
        )
    return result


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
