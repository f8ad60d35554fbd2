"""`argus report`: compare the runs in an MLflow store as a table, and plot them.

    argus report [--tracking-uri URI] [--experiment NAME] [--sweep ID_OR_NAME | --all]
                 [--out DIR] [--format table|markdown|json] [--no-mlflow]

Reads the parent and child runs the MLflow tracker wrote (`store`), groups them into one
row per task x planner x LLM model (`table`), draws best time so far and reward against
the candidate index (`plots`), writes report.md, report.json and the PNGs to --out, and
logs them to MLflow on a report run of their own (`publish`). docs/report.md shows it.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from argus_core.report.store import (
    NothingToReport,
    ReportInputError,
    Scope,
    choose_runs,
    find_experiment,
    load_runs,
    open_client,
)
from argus_core.report.table import build_rows, render_json, render_markdown, render_text

__all__ = ["EXIT_BAD_INPUT", "EXIT_NOTHING", "main", "make_report"]

EXIT_BAD_INPUT = 2  # as `argus` and argparse use for a bad command line
EXIT_NOTHING = 1  # the store was read, but holds nothing to compare
FORMATS = ("table", "markdown", "json")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="argus report",
        description="Compare Argus runs in an MLflow store: a table per task x planner x "
        "model, and plots of best time so far and reward per candidate.",
    )
    p.add_argument(
        "--tracking-uri",
        help="the MLflow store (default: the tracker's, sqlite:///<cwd>/.argus/mlflow.db)",
    )
    p.add_argument("--experiment", default="argus", help="experiment name (default: argus)")
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--sweep", help="a sweep's id or name (default: the latest sweep, if any run has one)"
    )
    which.add_argument("--all", action="store_true", help="every run of the experiment")
    p.add_argument("--out", help="output folder (default: .argus/reports/<sweep or experiment>)")
    p.add_argument("--format", choices=FORMATS, default="table", help="what to print")
    p.add_argument(
        "--no-mlflow", action="store_true", help="write files only; log nothing to the store"
    )
    return p


def main(argv: Sequence[str]) -> int:
    """Run `argus report ARGV` and return the exit status: 0 when the report was made,
    2 for bad input (unknown experiment or sweep, no store there, bad flags), 1 when the
    store holds no runs to compare. Errors are one `argus report: ...` line on stderr."""
    try:
        args = _parser().parse_args(list(argv))
    except SystemExit as exc:  # argparse has printed its usage; --help exits 0
        return int(exc.code or 0)
    try:
        return make_report(args)
    except ReportInputError as exc:
        print(f"argus report: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except NothingToReport as exc:
        print(f"argus report: {exc}", file=sys.stderr)
        return EXIT_NOTHING


def default_uri() -> str:
    """The store `argus` writes to when `tracking.uri` is null (the tracker's own rule)."""
    from argus_core.tracking.config import MlflowSettings

    return MlflowSettings.from_config(None, create=False).uri


def make_report(args: argparse.Namespace) -> int:
    """Read, write and print the report the parsed arguments ask for; returns 0."""
    uri = args.tracking_uri or default_uri()
    client = open_client(uri)
    experiment_id = find_experiment(client, args.experiment)
    runs = load_runs(client, experiment_id)
    if not runs:
        raise NothingToReport(f"experiment '{args.experiment}' in {uri} holds no Argus runs")
    base = Scope(uri, args.experiment, experiment_id)
    scope, chosen = choose_runs(runs, args.sweep, args.all, base)
    rows = build_rows(chosen)
    out = Path(args.out) if args.out else Path(".argus", "reports", _safe(scope.label))
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(render_markdown(rows, scope), encoding="utf-8")
    (out / "report.json").write_text(render_json(rows, scope) + "\n", encoding="utf-8")
    files = [out / "report.md", out / "report.json"]
    notes = []
    try:
        from argus_core.report.plots import write_plots

        files += write_plots(rows, out, scope.label)
        from argus_core.report.roofline import write_rooflines

        # one per task (docs/costmodel.md), written beside the others, not logged
        roofs, skipped = write_rooflines(rows, out)
        notes += skipped
        if roofs:
            notes.append("roofline plots: " + ", ".join(p.name for p in roofs))
    except ImportError as exc:  # the table is still worth having without the figures
        notes.append(f"plots skipped: {exc} (pip install matplotlib)")
    if not args.no_mlflow:
        from argus_core.report.publish import log_report

        run_id = log_report(client, scope, files, chosen)
        notes.append(f"MLflow: report run {run_id} in experiment '{scope.experiment}'")
    render = {"table": render_text, "markdown": render_markdown, "json": render_json}
    print(render[args.format](rows, scope).rstrip("\n"))
    # json goes to stdout alone, so it can be piped; the rest is for a person
    info = sys.stderr if args.format == "json" else sys.stdout
    print(f"\nWrote {', '.join(p.name for p in files)} to {out.resolve()}", file=info)
    for note in notes:
        print(note, file=info)
    return 0


def _safe(label: str) -> str:
    """A folder name from a sweep or experiment name: path separators and odd characters
    become '_'."""
    return re.sub(r"[^\w.-]", "_", label) or "report"
