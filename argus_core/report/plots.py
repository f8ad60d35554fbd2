"""The report's figures as PNG: best time so far, and reward, against the candidate index.

One subplot per task, one line per run, one colour per planner (and model). Figures are
drawn on matplotlib's Agg canvas directly (no pyplot), so no display is needed and no
global backend is switched in the caller's process.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Any

from argus_core.report.store import RunRecord
from argus_core.report.table import Row, eligible

BEST_PNG = "best_time_so_far.png"
REWARD_PNG = "reward.png"


def write_plots(rows: list[Row], out_dir: Path, title: str) -> list[Path]:
    """Write BEST_PNG and REWARD_PNG for `rows` into `out_dir` (created); returns their
    paths. ImportError when matplotlib is not installed."""
    # imported here: the table needs none of it, and matplotlib is an optional extra
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    out_dir.mkdir(parents=True, exist_ok=True)
    tasks = sorted({r.task for r in rows})
    colours = _colours(rows)
    paths = []
    for name, heading, ylabel, draw in (
        (BEST_PNG, "best time so far (lower is better)", "best ms so far", _draw_best),
        (REWARD_PNG, "reward per candidate (x: failed)", "reward", _draw_reward),
    ):
        ncols = min(len(tasks), 2) or 1
        nrows = max(math.ceil(len(tasks) / ncols), 1)
        fig = Figure(figsize=(6.4 * ncols, 4.2 * nrows), layout="constrained")
        fig.suptitle(f"{title}: {heading}")
        axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
        for ax, task in zip(axes, tasks):
            task_rows = [r for r in rows if r.task == task]
            for row in task_rows:
                for run in row.runs:
                    draw(ax, run, row, colours[_label(row)])
            # long task names (every shape symbol) wrap instead of running off the figure
            label = textwrap.fill(f"{task} ({_kind_label(task_rows)})", width=60)
            ax.set_title(label, fontsize=9)
            ax.set_xlabel("candidate index")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # indices are whole numbers
            ax.set_ylabel(ylabel)
            ax.grid(True, alpha=0.3)
            _dedup_legend(ax)
        for ax in axes[len(tasks) :]:
            ax.set_visible(False)
        if not tasks:
            fig.text(0.5, 0.5, "(no runs)", ha="center", va="center")
        path = out_dir / name
        fig.savefig(path, dpi=100)
        paths.append(path)
    return paths


def _label(row: Row) -> str:
    return row.planner if row.model is None else f"{row.planner} ({row.model})"


def _colours(rows: list[Row]) -> dict[str, Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    labels = sorted({_label(r) for r in rows})
    return {label: cmap(i % 10) for i, label in enumerate(labels)}


def _kind_label(rows: list[Row]) -> str:
    kinds = {r.timing for r in rows if r.timing is not None}
    if kinds == {"estimated"}:
        return "times estimated by the cost model"
    if kinds == {"measured"}:
        return "times measured"
    if not kinds:
        return "nothing timed"
    return "measured: solid, estimated: dashed"


def _style(row: Row, run: RunRecord) -> dict[str, Any]:
    marked = " KILLED" if run.status == "KILLED" else ""
    return {
        "label": _label(row) + marked,
        "linestyle": "--" if row.timing == "estimated" else "-",
    }


def _draw_best(ax: Any, run: RunRecord, row: Row, colour: Any) -> None:
    """A step line of the best time so far over the run's candidates; as in the table,
    only correct candidates count when any was checked correct."""
    counted = {id(c) for c in eligible(run.candidates, row.timing)}
    xs, ys, best = [], [], math.inf
    for c in run.candidates:
        if id(c) in counted:
            best = min(best, c.ms)  # type: ignore[type-var]
        if best < math.inf:
            xs.append(c.index)
            ys.append(best)
    if xs:
        ax.step(xs, ys, where="post", marker="o", markersize=3, color=colour, **_style(row, run))


def _draw_reward(ax: Any, run: RunRecord, row: Row, colour: Any) -> None:
    """The reward of each candidate; failed candidates are drawn as crosses."""
    points = [(c.index, c.reward, c.ok) for c in run.candidates if c.reward is not None]
    if not points:
        return
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    ax.plot(xs, ys, marker="o", markersize=3, color=colour, **_style(row, run))
    failed = [p for p in points if not p[2]]
    if failed:
        ax.plot([p[0] for p in failed], [p[1] for p in failed], "x", color=colour, markersize=7)


def _dedup_legend(ax: Any) -> None:
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    if unique:
        ax.legend(unique.values(), unique.keys(), fontsize=8)
