"""The comparison table: one row per task x planner x LLM model (x timing kind).

Estimated and measured times are never compared with each other: runs of one task,
planner and model that were timed differently get separate rows, and every estimated
figure carries `*` and the footnote the end-of-run summary uses.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from argus_core.report.store import CandidateRecord, RunRecord, Scope
from argus_core.summary import ESTIMATED_FOOTNOTE, MISSING, format_ms, text_table

UNCHECKED_FOOTNOTE = (
    "? correctness not checked (evaluate.correctness=off): the fastest candidate that compiled"
)
FIRST_FOOTNOTE = (
    "† over the first correct candidate of its run (the first timed one where correctness "
    "was not checked); no library baseline was timed"
)
STATUS_NOTE = {"KILLED": "KILLED (interrupted)", "RUNNING": "RUNNING (unfinished)"}


def eligible(candidates: list[CandidateRecord], timing: str | None) -> list[CandidateRecord]:
    """The candidates that may be called best, in order: those timed `timing` way and
    checked correct; when none was checked correct, every one timed that way."""
    timed = [c for c in candidates if c.timed and c.timing == timing]
    return [c for c in timed if c.correct] or timed


@dataclass
class Row:
    """One comparison: the runs of one task, planner, model and timing kind."""

    task: str
    planner: str
    model: str | None
    timing: str | None  # "estimated" | "measured" | None (nothing timed)
    runs: list[RunRecord] = field(default_factory=list)

    @property
    def candidates(self) -> list[CandidateRecord]:
        return [c for r in self.runs for c in r.candidates]

    @property
    def best(self) -> CandidateRecord | None:
        """The fastest correct candidate (first on ties); when none was checked correct,
        the fastest that compiled and was timed (flagged `checked` False)."""
        pool = eligible(self.candidates, self.timing)
        return min(pool, key=lambda c: c.ms) if pool else None  # type: ignore[arg-type, return-value]

    @property
    def checked(self) -> bool:
        best = self.best
        return best is not None and best.correct

    def speedup(self) -> tuple[float | None, str | None]:
        """(speedup, 'baseline' | 'first'): over the library baseline when one was timed,
        else over the first correct (or, unchecked, first timed) candidate of its run."""
        best = self.best
        if best is None:
            return None, None
        if best.speedup is not None:
            return best.speedup, "baseline"
        run = next(r for r in self.runs if any(c is best for c in r.candidates))
        same = [c for c in run.candidates if c.timed and c.timing == best.timing]
        ref = next((c for c in same if c.correct), None) if best.correct else same[0]
        if ref is None or not best.ms:
            return None, None
        return ref.ms / best.ms, "first"  # type: ignore[operator]

    def usage(self, key: str) -> float | None:
        """The sum of a run-level LLM metric (llm_prompt_tokens, ...) over the row's runs;
        None when no run logged it."""
        values = [r.metrics[key] for r in self.runs if key in r.metrics]
        return sum(values) if values else None

    @property
    def tokens(self) -> int | None:
        parts = [self.usage("llm_prompt_tokens"), self.usage("llm_completion_tokens")]
        known = [p for p in parts if p is not None]
        return int(sum(known)) if known else None

    @property
    def status(self) -> str:
        """'FINISHED', or each status with its count when they differ; KILLED runs are
        marked interrupted."""
        counts = Counter(r.status for r in self.runs)
        if len(self.runs) == 1:
            return STATUS_NOTE.get(self.runs[0].status, self.runs[0].status)
        return ", ".join(f"{STATUS_NOTE.get(s, s)} x{n}" for s, n in counts.items())


def build_rows(runs: list[RunRecord]) -> list[Row]:
    """Group runs into rows, sorted by task, planner and model. A run that timed nothing
    joins the row of its task, planner and model when there is exactly one such row."""
    rows: dict[tuple[str, str, str | None, str | None], Row] = {}
    untimed = []
    for r in runs:
        if r.timing is None:
            untimed.append(r)
            continue
        key = (r.task, r.planner, r.model, r.timing)
        rows.setdefault(key, Row(*key)).runs.append(r)
    for r in untimed:
        same = [row for k, row in rows.items() if k[:3] == (r.task, r.planner, r.model)]
        target = same[0] if len(same) == 1 else None
        if target is None:
            key = (r.task, r.planner, r.model, None)
            target = rows.setdefault(key, Row(*key))
        target.runs.append(r)
    return sorted(rows.values(), key=lambda w: (w.task, w.planner, w.model or "", w.timing or ""))


# ---------------------------------------------------------------------- cells

HEADERS = (
    "task",
    "planner",
    "model",
    "best",
    "policy",
    "best ms",
    "speedup",
    "tokens",
    "cost $",
    "cand/correct",
    "runs",
    "status",
)
_RIGHT = {"best ms", "speedup", "tokens", "cost $", "cand/correct", "runs"}


def cells(row: Row) -> list[str]:
    """The row's cells in HEADERS order, as printed."""
    best = row.best
    speedup, ref = row.speedup()
    cost = row.usage("llm_cost_usd")
    tokens = row.tokens
    ms = MISSING
    if best is not None:
        ms = format_ms(best.ms) + ("*" if best.timing == "estimated" else "")
    return [
        row.task,
        row.planner,
        row.model or MISSING,
        MISSING if best is None else best.candidate_id + ("" if row.checked else "?"),
        MISSING if best is None else best.policy,
        ms,
        MISSING if speedup is None else f"{speedup:.2f}x" + ("†" if ref == "first" else ""),
        MISSING if tokens is None else str(tokens),
        MISSING if cost is None else f"{cost:.4f}",
        f"{len(row.candidates)}/{sum(c.correct for c in row.candidates)}",
        str(len(row.runs)),
        row.status,
    ]


def footnotes(rows: list[Row]) -> list[str]:
    """The footnotes the rows' marks need, in a fixed order."""
    notes = []
    if any(r.best is not None and r.best.timing == "estimated" for r in rows):
        notes.append(ESTIMATED_FOOTNOTE)
    if any(r.best is not None and not r.checked for r in rows):
        notes.append(UNCHECKED_FOOTNOTE)
    if any(r.speedup()[1] == "first" for r in rows):
        notes.append(FIRST_FOOTNOTE)
    return notes


# ---------------------------------------------------------------------- renderings


def render_text(rows: list[Row], scope: Scope) -> str:
    """A fixed-width table with a title line and footnotes, ending without a newline."""
    body = [cells(r) for r in rows]
    out = [scope.describe(sum(len(r.runs) for r in rows)), ""]
    out += text_table(HEADERS, body, [h in _RIGHT for h in HEADERS])
    if not body:
        out.append("(no runs)")
    return "\n".join(out + footnotes(rows))


def render_markdown(rows: list[Row], scope: Scope) -> str:
    """A Markdown document: a heading, the table, the footnotes, ending with a newline."""

    from tabulate import tabulate

    def escaped(values: list[str]) -> list[str]:
        return [v.replace("|", "\\|") for v in values]

    table = tabulate(
        [escaped(cells(r)) for r in rows],
        escaped(list(HEADERS)),
        tablefmt="pipe",
        disable_numparse=True,
        colalign=["right" if h in _RIGHT else "left" for h in HEADERS],
    )
    out = [f"# Argus report: {scope.label}", "", scope.describe(sum(len(r.runs) for r in rows))]
    out += ["", table]
    notes = footnotes(rows)
    if notes:
        out += [""] + [f"{n}  " for n in notes]
    return "\n".join(out) + "\n"


def to_json(rows: list[Row], scope: Scope) -> dict[str, Any]:
    """The report as plain data: the scope, one object per row with raw numbers, footnotes."""
    return {
        "scope": {
            "tracking_uri": scope.uri,
            "experiment": scope.experiment,
            "experiment_id": scope.experiment_id,
            "sweep_id": scope.sweep_id,
            "sweep_name": scope.sweep_name,
        },
        "rows": [_row_json(r) for r in rows],
        "footnotes": footnotes(rows),
    }


def _row_json(row: Row) -> dict[str, Any]:
    best = row.best
    speedup, ref = row.speedup()
    run_of_best = next((r for r in row.runs if any(c is best for c in r.candidates)), None)
    return {
        "task": row.task,
        "planner": row.planner,
        "model": row.model,
        "timing": row.timing,
        "best": None
        if best is None
        else {
            "candidate_id": best.candidate_id,
            "policy": best.policy,
            "ms": best.ms,
            "timing": best.timing,
            "correctness_checked": best.correct,
            "run_id": run_of_best.run_id if run_of_best else None,
            "candidate_run_id": best.run_id,
        },
        "speedup": speedup,
        "speedup_over": ref,
        "llm_prompt_tokens": row.usage("llm_prompt_tokens"),
        "llm_completion_tokens": row.usage("llm_completion_tokens"),
        "llm_cost_usd": row.usage("llm_cost_usd"),
        "n_candidates": len(row.candidates),
        "n_correct": sum(c.correct for c in row.candidates),
        "runs": [{"run_id": r.run_id, "name": r.name, "status": r.status} for r in row.runs],
        "status": row.status,
    }


def render_json(rows: list[Row], scope: Scope) -> str:
    return json.dumps(to_json(rows, scope), indent=2)
