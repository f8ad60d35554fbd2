"""The end-of-run summary table, and the small judgements it shares with progress and tracking.

`render_table` prints one fixed-width row per candidate (laid out by `tabulate`). The helpers (`failure_parts`,
`is_correct`, `best_result`, `format_ms`) are the one place that decides what "failed at
which stage", "correct" and "best" mean, so the table, the progress lines and the MLflow
tracker never disagree.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence

from argus_core.types import CandidateResult

ESTIMATED_FOOTNOTE = "* estimated by the cost model (no GPU); not a measurement"
MISSING = "-"


def failure_parts(result: CandidateResult) -> tuple[str, str]:
    """('stage', 'reason') of a failed result, ('', '') for one that did not fail.

    `CandidateResult.failure` is 'stage: reason'; a failure without a colon is all stage.
    """
    if result.failure is None:
        return "", ""
    stage, _, reason = result.failure.partition(":")
    return stage.strip(), reason.strip()


def is_correct(result: CandidateResult) -> bool:
    """True only when no stage failed and the output was checked against the reference and
    matched; a candidate whose correctness was never checked is not called correct."""
    return result.ok and result.correctness is not None and result.correctness.ok


def best_result(results: Sequence[CandidateResult]) -> CandidateResult | None:
    """The fastest correct result that has a time (first one on ties), or None."""
    timed = [r for r in results if is_correct(r) and r.timing is not None]
    return min(timed, key=lambda r: r.timing.ms) if timed else None  # type: ignore[union-attr]


def format_ms(ms: float | None) -> str:
    """A time in milliseconds with three decimals (four significant digits below 0.1 ms)."""
    if ms is None:
        return MISSING
    return f"{ms:.3f}" if ms >= 0.1 else f"{ms:.4g}"


def _num(value: int | float | None) -> str:
    return MISSING if value is None else str(value)


def _correct_cell(result: CandidateResult) -> str:
    if result.correctness is None:
        return MISSING
    return "yes" if result.correctness.ok else "no"


def _status_cell(result: CandidateResult, best: CandidateResult | None) -> str:
    if result.failure is not None:
        return f"FAILED {failure_parts(result)[0]}"
    return "BEST" if result is best else "ok"


def _compile_cell(field: str) -> Callable[[CandidateResult], str]:
    return lambda r: _num(getattr(r.compile, field)) if r.compile is not None else MISSING


# (header, cell, right-aligned); the status column is added by render_table (it needs `best`)
# "skipped" means verifier=none: printed as "-" like any other missing figure
_VERIFY_CELL = {"verified": "yes", "violated": "NO", "unknown": "unknown", "skipped": MISSING}

_COLUMNS: list[tuple[str, Callable[[CandidateResult], str], bool]] = [
    ("candidate", lambda r: r.candidate.id, False),
    ("policy", lambda r: r.candidate.policy.key(), False),
    ("verified?", lambda r: _VERIFY_CELL.get(r.verify.status, r.verify.status), False),
    ("correct?", _correct_cell, False),
    ("VGPRs", _compile_cell("registers"), True),
    ("spills", _compile_cell("spills"), True),
    ("LDS bytes", _compile_cell("shared_bytes"), True),
    ("occupancy", _compile_cell("occupancy"), True),
    ("MFMA count", _compile_cell("mma_count"), True),
    ("time", lambda r: format_ms(r.timing.ms) if r.timing is not None else MISSING, True),
]


def render_table(results: list[CandidateResult], estimated: bool) -> str:
    """A fixed-width text table, one row per result in the given order, ending without a newline.

    The time column is headed `est. ms*` and followed by the footnote line
    `ESTIMATED_FOOTNOTE` when `estimated`, and headed `ms` otherwise. The status column says
    `BEST` for the fastest correct candidate, `ok` for other successes and `FAILED <stage>`
    for failures. Missing numbers print as `-`.
    """
    best = best_result(results)
    headers = [h if h != "time" else ("est. ms*" if estimated else "ms") for h, _, _ in _COLUMNS]
    headers.append("status")
    right = [r for _, _, r in _COLUMNS] + [False]
    rows = [[cell(r) for _, cell, _ in _COLUMNS] + [_status_cell(r, best)] for r in results]
    out = text_table(headers, rows, right)
    if not rows:
        out.append("(no candidates)")
    if estimated:
        out.append(ESTIMATED_FOOTNOTE)
    return "\n".join(out)


def text_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool]
) -> list[str]:
    """The lines of a plain-text table (`tabulate`'s "simple" format: a header line, a rule
    of dashes per column, one line per row; cells taken as text, never reparsed as
    numbers), each column right-aligned where `right` says, trailing blanks cut."""
    import tabulate

    # columns as wide as their widest cell: no extra padding around headers (module-level
    # setting of tabulate, restored at once)
    saved, tabulate.MIN_PADDING = tabulate.MIN_PADDING, 0
    try:
        text = tabulate.tabulate(
            [list(r) for r in rows],
            list(headers),
            tablefmt="simple",
            disable_numparse=True,
            colalign=["right" if r else "left" for r in right],
        )
    finally:
        tabulate.MIN_PADDING = saved
    return [line.rstrip() for line in text.splitlines()]


REASON_WIDTH = 100  # characters per line of a wrapped failure reason


def render_reasons(results: Sequence[CandidateResult], width: int = REASON_WIDTH) -> str:
    """Why each failed candidate failed, in full: 'c003  verify: <reason>', wrapped onto
    indented lines (never cut), one paragraph per candidate; '' when none failed. Printed
    under the table whether or not the output is a terminal."""
    out = []
    for r in results:
        if r.failure is None:
            continue
        lines = []
        for k, part in enumerate(r.failure.splitlines() or [""]):
            first = f"{r.candidate.id}  " if k == 0 else ""
            lines += textwrap.wrap(
                first + part,
                width=width,
                subsequent_indent="      ",
                initial_indent="" if k == 0 else "      ",
                break_long_words=True,
                break_on_hyphens=False,
            ) or [""]
        out.append("\n".join(lines))
    return "\n".join(["Failures:", *out]) if out else ""
