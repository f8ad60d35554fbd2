"""`resume=true`: has an earlier run of this sweep job already finished?

Where the answer comes from depends on the tracker, because that is where a finished run
is recorded for good:

- `tracking=mlflow`: the MLflow store (`tracking.uri`): a parent run tagged with the same
  `argus.sweep_id` and `argus.job_overrides` whose status is FINISHED. Runs that were
  KILLED (Ctrl-C), FAILED, or never closed (the process died) do not count.
- any other tracker (`tracking=none`): the sweep directory: a job status file
  (`.argus_job.json`) with the same sweep id and overrides that says the pipeline ran to
  its end, next to the job's results.json.
"""

from __future__ import annotations

import logging
from typing import Any

from argus_core.tracking.config import MlflowSettings, field
from argus_core.tracking.sweep import (
    JOB_OVERRIDES_TAG,
    SWEEP_ID_TAG,
    SweepJob,
    finished_in_dir,
)

log = logging.getLogger("argus.tracking")

PARENT_TAG = "mlflow.parentRunId"


def already_finished(job: SweepJob, tracking: Any, cwd: str | None = None) -> str | None:
    """Where a finished earlier run of `job` is recorded (an MLflow run or a status file),
    or None when the job must run (again). `tracking` is the run's `tracking` group."""
    if field(tracking, "name") == "mlflow":
        return finished_in_mlflow(job, MlflowSettings.from_config(tracking, cwd))
    return finished_in_dir(job)


def finished_in_mlflow(job: SweepJob, settings: MlflowSettings) -> str | None:
    """`mlflow run <id> in <uri>` for a FINISHED parent run of `job`, or None.

    A store that cannot be read is not proof that the job finished: it logs a warning and
    answers None, so the job runs again.
    """
    try:
        run_id = _finished_run_id(job, settings)
    except Exception as exc:  # an unreachable server or a broken store: run the job
        log.warning(
            "resume: cannot read MLflow store %s (%s: %s); running job #%d again",
            settings.uri,
            type(exc).__name__,
            exc,
            job.num,
        )
        return None
    return None if run_id is None else f"MLflow run {run_id} in {settings.uri}"


def _finished_run_id(job: SweepJob, settings: MlflowSettings) -> str | None:
    from argus_core.tracking.mlflow_tracker import open_client

    client = open_client(settings.uri)
    experiment = client.get_experiment_by_name(settings.experiment)
    if experiment is None or experiment.lifecycle_stage == "deleted":
        return None
    # the sweep id is a plain token; the overrides (free text) are compared here, not quoted
    # into the filter
    query = f"tags.`{SWEEP_ID_TAG}` = '{job.sweep_id}' and attributes.status = 'FINISHED'"
    token = None
    while True:
        page = client.search_runs(
            [experiment.experiment_id], filter_string=query, max_results=500, page_token=token
        )
        for run in page:
            tags = run.data.tags
            if PARENT_TAG not in tags and tags.get(JOB_OVERRIDES_TAG) == job.overrides:
                return str(run.info.run_id)
        token = page.token
        if not token:
            return None
