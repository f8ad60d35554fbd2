"""`argus report`'s roofline plot: one figure per task, every timed candidate of its runs
against the device's roofline (docs/costmodel.md, "Profiler feedback").

x is the task's arithmetic intensity (the family's FLOPs over its minimum bytes at the
run's shape), y the achieved TFLOP/s (FLOPs / the candidate's time); the roof is
min(peak, intensity x HBM bandwidth) from the backend's `TargetSpec`. Measured candidates
are dots, cost-model estimates hollow squares labelled ESTIMATE. Drawn on matplotlib's Agg
canvas (no pyplot). A task whose family, shape or backend cannot be resolved (an unknown
plugin, a KernelBench task file) is left out and named in the returned notes.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from argus_core.evaluate.profile import roofline_point
from argus_core.report.table import Row

SHAPE_PREFIX = "config.kernel.shape."


def task_counts(row: Row, registry: Any) -> tuple[float, float, Any, str]:
    """(FLOPs, bytes, the backend's TargetSpec, dtype) of a row's task, from its first run's
    params. KeyError / ArgusError when they cannot be resolved."""
    params = row.runs[0].params
    shape = {
        k[len(SHAPE_PREFIX) :]: int(float(v))
        for k, v in params.items()
        if k.startswith(SHAPE_PREFIX)
    }
    dtype = params.get("config.kernel.dtype") or "bf16"
    family = registry.get("kernel", params["kernel"])
    backend = registry.get("backend", params["backend"])
    return float(family.flops(shape)), float(family.bytes(shape, dtype)), backend.spec, dtype


def write_rooflines(rows: list[Row], out_dir: Path) -> tuple[list[Path], list[str]]:
    """One `roofline_<task>.png` per task of `rows`; (paths, notes on tasks left out).
    ImportError without matplotlib."""
    from matplotlib.figure import Figure

    from argus_core.plugin_manager import Registry, default_plugin_manager

    registry = Registry(default_plugin_manager())
    out_dir.mkdir(parents=True, exist_ok=True)
    paths, notes = [], []
    for task in sorted({r.task for r in rows}):
        task_rows = [r for r in rows if r.task == task]
        try:
            flops, nbytes, spec, dtype = task_counts(task_rows[0], registry)
        except Exception as exc:  # an unresolvable task is left out, not fatal
            notes.append(f"roofline skipped for {task!r}: {type(exc).__name__}: {exc}"[:300])
            continue
        fig = Figure(figsize=(6.4, 4.6), layout="constrained")
        ax = fig.subplots()
        peak = spec.peak(dtype) / 1e12
        ridge = peak / spec.hbm_tbps
        xs = [ridge / 64, ridge, ridge * 64]
        ax.plot(xs, [min(peak, x * spec.hbm_tbps) for x in xs], "k-", lw=1.5)
        ax.annotate(f"{spec.name}: {peak:.0f} TFLOP/s, {spec.hbm_tbps} TB/s", (xs[0], peak))
        intensity = flops / nbytes if nbytes else ridge
        for row in task_rows:
            for kind, marker, fill in (("measured", "o", None), ("estimated", "s", "none")):
                pts = [
                    roofline_point(flops, nbytes, c.ms, spec, dtype)["tflops"]
                    for c in row.candidates
                    if c.timed and c.timing == kind
                ]
                if pts:
                    label = f"{row.planner} ({'ESTIMATE' if kind == 'estimated' else kind})"
                    ax.plot([intensity] * len(pts), pts, marker, mfc=fill, alpha=0.7, label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity (FLOP / byte)")
        ax.set_ylabel("achieved TFLOP/s")
        ax.set_title(task, fontsize=9)
        ax.legend(fontsize=7)
        path = out_dir / f"roofline_{re.sub(r'[^A-Za-z0-9._-]+', '_', task)[:80]}.png"
        fig.savefig(path, dpi=110)
        paths.append(path)
    return paths, notes


__all__ = ["task_counts", "write_rooflines"]
