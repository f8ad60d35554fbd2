"""Profiler feedback: where a timed candidate sits against the device's roofline, and why.

For each timed candidate (docs/costmodel.md, "Profiler feedback"):

- `roofline_point`: achieved FLOP/s and bytes/s from the family's counts and the time,
  against the target's roofline (`TargetSpec` peaks, or the ceilings measured on the GPU
  in the same process): arithmetic intensity, the ridge point, memory- or compute-bound,
  the share of the roof reached;
- `occupancy`: resident warps per SM sub-partition from the compile report's registers and
  shared memory (the theoretical occupancy, as Nsight's "achieved" needs counters);
- `proton_profile`: on a GPU, the kernel run under Triton's bundled profiler (proton,
  `triton.profiler`): the GPU time it attributes to each kernel launch;
- `feedback`: all of it for one candidate as plain data, for the planner's state, the LLM's
  prompt and MLflow. Without a measurement (the CPU interpreter) every figure comes from
  the cost model's estimate and is labelled "ESTIMATE".
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from argus_core.target import TargetSpec
from argus_core.types import CompileReport, Policy, TimingReport

ESTIMATE = "ESTIMATE"
MEASURED = "MEASURED"


def roofline_point(
    flops: float,
    nbytes: float,
    ms: float,
    spec: TargetSpec,
    dtype: str = "bf16",
    ceilings: dict[str, float] | None = None,
) -> dict[str, Any]:
    """The candidate's point on the roofline: {"tflops", "gbps", "intensity" (FLOP/byte),
    "ridge" (FLOP/byte where the roofs meet), "bound" ("memory" | "compute"), "roof_tflops"
    (the attainable rate at this intensity), "pct_roof", "peak_tflops", "peak_tbps"}.
    `ceilings` ({"matmul_tflops", "copy_tbps"}, measured on the device) replace the data
    sheet's peaks when given."""
    if not (ms > 0 and math.isfinite(ms)):
        raise ValueError(f"roofline_point: ms={ms!r} must be a positive finite time")
    ceil = ceilings or {}
    peak = float(ceil.get("matmul_tflops") or spec.peak(dtype) / 1e12)
    bw = float(ceil.get("copy_tbps") or spec.hbm_tbps)
    seconds = ms * 1e-3
    intensity = flops / nbytes if nbytes else math.inf
    ridge = peak * 1e12 / (bw * 1e12)
    roof = min(peak, intensity * bw) if math.isfinite(intensity) else peak
    achieved = flops / seconds / 1e12
    return {
        "tflops": achieved,
        "gbps": nbytes / seconds / 1e9,
        "intensity": intensity,
        "ridge": ridge,
        "bound": "memory" if intensity < ridge else "compute",
        "roof_tflops": roof,
        "pct_roof": 100.0 * achieved / roof if roof else 0.0,
        "peak_tflops": peak,
        "peak_tbps": bw,
    }


def occupancy(
    spec: TargetSpec, registers: int | None, shared_bytes: int | None, num_warps: int
) -> dict[str, Any] | None:
    """Theoretical occupancy of one kernel: blocks per SM/CU as registers and shared memory
    allow, and the resident warps per sub-partition/SIMD against its maximum. None without
    a register count."""
    if not registers:
        return None
    regs = 8 * math.ceil(registers / 8)  # allocated in granules of 8
    per_simd_by_regs = spec.regs_per_lane // regs  # waves one SIMD's register file holds
    warps_per_simd = max(1, num_warps // spec.simds_per_cu)
    by_regs = per_simd_by_regs // warps_per_simd
    by_smem = spec.lds_bytes_per_cu // shared_bytes if shared_bytes else by_regs
    blocks = max(0, min(by_regs, by_smem))
    waves = min(spec.max_waves_per_simd, blocks * warps_per_simd)
    return {
        "blocks_per_cu": blocks,
        "waves_per_simd": waves,
        "occupancy": waves / spec.max_waves_per_simd,
        "limited_by": "registers" if by_regs <= by_smem else "shared memory",
    }


def proton_profile(fn: Callable[[], Any], name: str, repeats: int = 10) -> dict[str, Any]:
    """Run `fn` `repeats` times under Triton's proton profiler (GPU only) and read back the
    GPU time it attributes to each kernel: {"tool": "proton", "kernels": {name: {"ns",
    "count"}}, "ms" (GPU time of one `fn`, summed over its kernels)}."""
    import torch
    import triton.profiler as proton

    fn()  # compile and warm outside the session
    torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "argus")
        proton.start(path, hook="triton")
        for _ in range(repeats):
            fn()
        torch.cuda.synchronize()
        proton.finalize()
        tree = json.loads(Path(path + ".hatchet").read_text())
    kernels = kernel_times(tree)
    total_ns = sum(k["ns"] for k in kernels.values())
    return {
        "tool": "proton",
        "name": name,
        "repeats": repeats,
        "kernels": kernels,
        "ms": total_ns / repeats / 1e6 if total_ns else None,
    }


def kernel_times(tree: Any) -> dict[str, dict[str, float]]:
    """{kernel name: {"ns", "count"}} summed over a proton hatchet tree's leaves (the nodes
    whose metrics carry a GPU time and that have no timed children)."""
    out: dict[str, dict[str, float]] = {}

    def walk(node: dict[str, Any]) -> None:
        children = node.get("children") or []
        metrics = node.get("metrics") or {}
        timed_children = [c for c in children if (c.get("metrics") or {}).get("time (ns)")]
        if metrics.get("time (ns)") and not timed_children:
            name = str((node.get("frame") or {}).get("name", "?"))
            slot = out.setdefault(name, {"ns": 0.0, "count": 0.0})
            slot["ns"] += float(metrics["time (ns)"])
            slot["count"] += float(metrics.get("count", 1))
        for c in children:
            walk(c)

    for root in tree if isinstance(tree, list) else [tree]:
        walk(root)
    return out


def feedback(
    family: Any,
    shape: dict[str, int],
    dtype: str,
    spec: TargetSpec,
    timing: TimingReport,
    policy: Policy,
    report: CompileReport | None = None,
    ceilings: dict[str, float] | None = None,
) -> dict[str, Any]:
    """Profiler feedback of one timed candidate as plain data: its roofline point,
    occupancy, spills, and the label MEASURED or ESTIMATE (a cost-model time). What the
    planner's state, the LLM's prompt and MLflow (`profile.*`) carry."""
    point = roofline_point(
        float(family.flops(shape)),
        float(family.bytes(shape, dtype)),
        timing.ms,
        spec,
        dtype,
        ceilings,
    )
    ok = report is not None and report.ok
    occ = occupancy(
        spec,
        report.registers if ok else None,
        report.shared_bytes if ok else None,
        int(policy.compiler.get("num_warps", 4)),
    )
    return {
        "label": ESTIMATE if timing.estimated else MEASURED,
        "ms": timing.ms,
        **{k: point[k] for k in ("tflops", "gbps", "intensity", "bound", "pct_roof")},
        "occupancy": occ["occupancy"] if occ else None,
        "occupancy_limited_by": occ["limited_by"] if occ else None,
        "registers": report.registers if ok else None,
        "spills": report.spills if ok else None,
    }


def summary_line(fb: dict[str, Any]) -> str:
    """One line for a prompt or a log: 'MEASURED 0.412 ms: 612 TFLOP/s, 480 GB/s,
    compute-bound at 78% of the roof, occupancy 25% (registers), 0 spills'."""
    occ = (
        f"occupancy {fb['occupancy']:.0%} ({fb['occupancy_limited_by']})"
        if fb.get("occupancy") is not None
        else "occupancy unknown"
    )
    spills = f"{fb['spills']} spills" if fb.get("spills") is not None else "spills unknown"
    return (
        f"{fb['label']} {fb['ms']:.4g} ms: {fb['tflops']:.0f} TFLOP/s, {fb['gbps']:.0f} GB/s, "
        f"{fb['bound']}-bound at {fb['pct_roof']:.0f}% of the roof, {occ}, {spills}"
    )


__all__ = [
    "ESTIMATE",
    "MEASURED",
    "feedback",
    "kernel_times",
    "occupancy",
    "proton_profile",
    "roofline_point",
    "summary_line",
]
