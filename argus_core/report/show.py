"""`argus show [RUN] [CANDIDATE]`: why a run's candidates failed, in full.

    argus show                         # the newest run under .argus/runs, every candidate
    argus show .argus/runs/2026-...    # that run
    argus show RUN c003                # one candidate (its id, or its index)

Reads the run directory's results (`results.json`, or `results.jsonl` of a run that never
ended) and prints each candidate's status, failure, verifier summary and counterexamples,
check and compile errors, and where its artifacts are: the files in the run directory and,
when the run was tracked to a local MLflow store, its child run's artifact paths.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from argus_core.tracking.results import RECORDS, RESULTS, read_results

EXIT_BAD_INPUT = 2
RUNS = Path(".argus") / "runs"
WIDTH = 100


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="argus show",
        description="Print why a run's candidates failed: the failure, counterexamples, "
        "check and compile errors, and the paths of their artifacts.",
    )
    p.add_argument("run", nargs="?", help=f"a run directory (default: the newest in {RUNS})")
    p.add_argument("candidate", nargs="?", help="a candidate id (c003) or index (default: all)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        run_dir = _run_dir(args.run)
        records = read_results(run_dir)
        chosen = _choose(records, args.candidate)
    except ValueError as exc:
        print(f"argus show: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    artifacts = _mlflow_artifacts(run_dir)
    print(f"Run directory: {run_dir}  ({len(records)} candidates)")
    for rec in chosen:
        print()
        print(render(rec, artifacts.get(str(rec["candidate"]["id"]))))
    return 0


def _run_dir(given: str | None) -> Path:
    if given:
        path = Path(given)
        if not path.is_dir():
            raise ValueError(f"run directory {given!r} does not exist")
        return path.resolve()
    runs = [d for d in RUNS.iterdir() if d.is_dir()] if RUNS.is_dir() else []
    runs = [d for d in runs if (d / RESULTS).exists() or (d / RECORDS).exists()]
    if not runs:
        raise ValueError(f"no run with results under {RUNS.resolve()}; name a run directory")
    return max(runs, key=lambda d: d.stat().st_mtime).resolve()


def _choose(records: list[dict[str, Any]], which: str | None) -> list[dict[str, Any]]:
    if which is None:
        return records
    ids = [str(r["candidate"]["id"]) for r in records]
    for r, cid in zip(records, ids):
        if which in (cid, str(r.get("index"))):
            return [r]
    raise ValueError(f"no candidate {which!r} in this run; valid choices: {', '.join(ids)}")


def _wrap(label: str, text: str) -> list[str]:
    out = []
    for k, part in enumerate(str(text).splitlines() or [""]):
        head = f"  {label}: " if k == 0 else "      "
        out += textwrap.wrap(
            head + part, WIDTH, subsequent_indent="      ", break_long_words=True
        ) or [head]
    return out


def render(rec: dict[str, Any], artifacts: list[str] | None = None) -> str:
    """A candidate's record as readable lines, every reason in full (wrapped)."""
    cand = rec["candidate"]
    policy = cand.get("policy") or {}
    tiles = " ".join(f"{k}{v}" for k, v in (policy.get("tiles") or {}).items())
    lines = [f"{cand['id']} (#{rec.get('index')}) {tiles}  origin={cand.get('origin')}"]
    lines += _wrap("status", "FAILED" if rec.get("failure") else "ok")
    if rec.get("failure"):
        lines += _wrap("failure", rec["failure"])
    verify = rec.get("verify") or {}
    lines += _wrap("verify", f"{verify.get('status')} {verify.get('summary') or ''}".strip())
    for i, cex in enumerate(verify.get("counterexamples") or []):
        lines += _wrap(f"counterexample {i + 1}", json.dumps(cex, default=str, sort_keys=True))
    comp = rec.get("compile") or {}
    if comp.get("error"):
        lines += _wrap("compile error", comp["error"])
    corr = rec.get("correctness") or {}
    if corr.get("error"):
        lines += _wrap("check error", corr["error"])
    timing = rec.get("timing") or {}
    if timing:
        kind = "estimated" if timing.get("estimated") else "measured"
        lines += _wrap("time", f"{timing.get('ms')} ms ({kind}; {timing.get('model')})")
    if rec.get("cache"):  # stages reused from the result cache (argus_core.cache)
        lines += _wrap("from the result cache", ", ".join(rec["cache"]))
    lines += [f"  artifact: {path}" for path in artifacts or []]  # paths whole, to copy
    return "\n".join(lines)


def _mlflow_artifacts(run_dir: Path) -> dict[str, list[str]]:
    """Candidate id -> its child run's artifact paths, from the local store beside the run
    directory (`<dir>/.argus/mlflow.db` for a run in `<dir>/.argus/runs/`); {} when there is
    none or it cannot be read (the records are still shown)."""
    store = run_dir.parent.parent / "mlflow.db"
    if not store.is_file():
        return {}
    try:
        from argus_core.tracking.mlflow_tracker import import_mlflow

        client = import_mlflow().MlflowClient(tracking_uri=f"sqlite:///{store}")
        found: dict[str, list[str]] = {}
        for exp in client.search_experiments():
            parents = client.search_runs(
                [exp.experiment_id], filter_string=f"tags.`argus.run_dir` = '{run_dir}'"
            )
            for parent in parents:
                children = client.search_runs(
                    [exp.experiment_id],
                    filter_string=f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'",
                    max_results=1000,
                )
                for child in children:
                    cid = child.data.params.get("candidate_id")
                    base = child.info.artifact_uri.rstrip("/")
                    names = [a.path for a in client.list_artifacts(child.info.run_id)]
                    found[str(cid)] = [f"{base}/{n}" for n in names]
        return found
    except Exception as exc:  # the store is optional here: say so, show the records
        print(f"argus show: MLflow artifacts not read from {store}: {exc}", file=sys.stderr)
        return {}
