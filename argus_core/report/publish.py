"""Putting the report into MLflow, so its figures show in the UI beside the runs.

The report gets a run of its own in the same experiment, tagged `argus.report=1` (and the
sweep it covers), holding every file; the figures are also attached to each parent run
they cover, under `report/`. The reader (`store.load_runs`) skips tagged report runs.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from argus_core.report.store import REPORT_TAG, SWEEP_ID_TAG, SWEEP_NAME_TAG, RunRecord, Scope

PARENT_ARTIFACT_DIR = "report"


def log_report(client: Any, scope: Scope, files: list[Path], runs: list[RunRecord]) -> str:
    """Create the report run, log `files` on it and the PNGs among them on every run in
    `runs`; returns the report run's id. The run ends FAILED if logging fails midway."""
    tags = {REPORT_TAG: "1", "mlflow.note.content": scope.describe(len(runs))}
    if scope.sweep_id is not None:
        tags[SWEEP_ID_TAG] = scope.sweep_id
        if scope.sweep_name:
            tags[SWEEP_NAME_TAG] = scope.sweep_name
    name = f"report-{scope.label}-{time.strftime('%Y%m%d-%H%M%S')}"
    run = client.create_run(scope.experiment_id, tags=tags, run_name=name)
    run_id = run.info.run_id
    try:
        client.log_param(run_id, "runs", len(runs))
        for path in files:
            client.log_artifact(run_id, str(path))
        pngs = [p for p in files if p.suffix == ".png"]
        for parent in runs:
            for path in pngs:
                client.log_artifact(parent.run_id, str(path), PARENT_ARTIFACT_DIR)
    except Exception:
        client.set_terminated(run_id, "FAILED")
        raise
    client.set_terminated(run_id, "FINISHED")
    return run_id
