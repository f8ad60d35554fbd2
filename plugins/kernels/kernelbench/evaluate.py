"""Trusted side of a KernelBench candidate check: static rejection, the reference, the verdict.

The split (docs/security.md): this process builds the task's Model, draws the trial inputs
from fresh random seeds, computes the reference outputs and keeps them; the candidate runs
in an isolated child (`worker.py` under `argus_core.sandbox.run_isolated`) that receives
only the inputs (and, for a DSL kernel, the Model's parameters) and sends back only its
outputs, as plain arrays. The comparison and the verdict happen here, so nothing the
candidate does in its own process (reading frames, patching torch or the Model, writing a
fake result, exiting early) can make a wrong answer pass.

`check_candidate` never raises for the candidate's failure: a static violation, a guard
trip, a wrong answer, a crash or a timeout all come back as a CorrectnessReport with
ok=False and the reason, so one bad candidate fails alone and the run goes on.
"""

from __future__ import annotations

import io
import math
import secrets
from typing import Any

from argus_core.errors import ConfigError, choices_error

# the runner table and the child-process runner are the generic correctness worker's
from argus_core.evaluate.correctness import RUNNERS, run_worker_bytes
from argus_core.sandbox import truncate
from argus_core.types import CorrectnessReport
from argus_plugins.kernels.kernelbench import static_check

WORKER = "argus_plugins.kernels.kernelbench.worker"


def _flat(x: Any) -> list[Any]:
    return list(x) if isinstance(x, list | tuple) else [x]


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
) -> CorrectnessReport:
    """Check `candidate` against the task's Model on `trials` fresh inputs plus one
    permuted and rescaled trial.

    `candidate` is {"kind": "dsl", "kernels": [LoweredKernel dicts], "binding": ...,
    "constexprs": ..., "compiler": ...} or {"kind": "modelnew", "source": text, "filename":
    name}; a ModelNew is statically checked here first (error "static: ...") unless
    `static` is False (tests of the isolation itself). With `timing` ({"flops", "bytes",
    optionally "peak_tflops", "peak_gbps"}) on a GPU runner, the candidate is timed in its
    child, its output after the timed runs re-checked here, and the eager Model timed here
    (`report.timing`; "suspicious" names a throughput above the given peak). Raises
    ConfigError only for an unknown runner or kind.
    """
    if runner not in RUNNERS:
        raise ConfigError(choices_error("correctness runner", runner, RUNNERS))
    kind = candidate.get("kind")
    if kind not in ("dsl", "modelnew"):
        raise ConfigError(choices_error("kernelbench candidate kind", kind, ("dsl", "modelnew")))
    report = CorrectnessReport(ok=False, trials=int(trials) + 1, runner=runner)
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

    def cpu(xs: list[Any]) -> list[Any]:
        return [x.detach().cpu() if isinstance(x, torch.Tensor) else x for x in xs]

    request: dict[str, Any] = {
        "candidate": candidate,
        "dtype": dtype,
        "device": device,
        "init_seed": int(init_seed),
        "init_inputs": list(module.get_init_inputs()),
        "trials": [
            {
                "label": label,
                "inputs": cpu(x),
                "like": (list(exp[0].shape), str(exp[0].dtype).removeprefix("torch.")),
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
    result = run_worker_bytes(WORKER, buf.getvalue(), runner, timeout_s)
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
            report.error = truncate(str(why))
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
    here; "suspicious" when the implied throughput beats the given device peak."""
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
    out: dict[str, Any] = {
        "ms": float(ms),
        "baselines": {"torch eager (Model.forward)": torch_ms},
        "flops": flops,
        "bytes": nbytes,
        "tflops": tflops,
        "gbps": gbps,
    }
    peak_t, peak_b = timing.get("peak_tflops"), timing.get("peak_gbps")
    if tflops and peak_t and tflops > float(peak_t):
        out["suspicious"] = f"{tflops:.1f} TFLOP/s is above the device peak {peak_t}"
    elif gbps and peak_b and gbps > float(peak_b):
        out["suspicious"] = f"{gbps:.0f} GB/s is above the device peak {peak_b}"
    return out
