"""The MLflow listener: one parent run per invocation, one child run per candidate.

mlflow is imported only inside these methods (`import_mlflow`), so importing this module
costs nothing and machines without mlflow can still run Argus with `tracking=none`.
A tracking failure (store unreachable, bad URI, mlflow missing, a full disk) never raises
out of a hook: it is logged once and kept as `failure()`, which the pipeline reads after
each event; a failure at start stops the run, one later makes its exit status non-zero.

A run that dies without ending its parent (SIGKILL, power loss) would stay RUNNING for ever:
the parent carries its host and process id, and the next run on the same store marks such
a run FAILED, with a note, when that process is gone.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; sweeps there run one job at a time
    fcntl = None  # type: ignore[assignment]

import argus_core
from argus_core.hookspecs import hookimpl
from argus_core.summary import best_result, failure_parts, is_correct, render_table
from argus_core.tracking.config import (
    MAX_PARAM_VALUE_LENGTH,
    MAX_RUN_NAME_LENGTH,
    MAX_TAG_VALUE_LENGTH,
    MlflowSettings,
    clean_key,
    clip,
    field,
    flatten_config,
    is_local_uri,
)
from argus_core.tracking.metadata import git_commit
from argus_core.tracking.sweep import current_job
from argus_core.types import CandidateResult, RunInfo

log = logging.getLogger("argus.tracking")

END_STATUSES = ("FINISHED", "FAILED", "KILLED")
# MLflow 3's UI files an experiment without this tag under "Evaluation runs"
EXPERIMENT_KIND_TAG = ("mlflow.experimentKind", "custom_model_development")
PID_TAG, HOST_TAG, NOTE_TAG = "argus.pid", "argus.host", "mlflow.note.content"


def import_mlflow() -> Any:
    # telemetry off before the first import reads it; the user's own choice wins
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    import mlflow

    # creating a SQLite store logs its schema migrations at INFO; that is noise to a user
    for name in ("mlflow.store.db.utils", "alembic.runtime.migration"):
        logging.getLogger(name).setLevel(logging.WARNING)
    return mlflow


def open_client(uri: str) -> Any:
    """An MlflowClient for `uri` whose store is ready to use (tables created).

    The jobs of a sweep (joblib workers, several processes) may all open a new SQLite store
    at once, and MLflow's table creation is not safe against that ("table ... already
    exists"): for a SQLite store, the first use is serialized with a lock file beside it.
    """
    mlflow = import_mlflow()
    with _sqlite_lock(uri):
        return mlflow.MlflowClient(tracking_uri=uri)  # creates or migrates the store


@contextlib.contextmanager
def _sqlite_lock(uri: str) -> Iterator[None]:
    path = uri.removeprefix("sqlite:///") if uri.startswith("sqlite:///") else None
    if path is None or fcntl is None:  # a server serializes its own store; no flock here
        yield
        return
    parent = Path(path).parent
    if not parent.is_dir():  # a typo in tracking.uri must not make directories
        raise FileNotFoundError(
            f"the directory of the SQLite store {uri!r} does not exist: {parent}"
        )
    with open(f"{path}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class MlflowTracker:
    """Listener for the event hooks; register it with the plugin manager for one invocation."""

    def __init__(self, cfg: Any, run_dir: str, cwd: str | None = None):
        self.settings = MlflowSettings.from_config(cfg, cwd)
        self.run_dir = run_dir
        # a job of a multirun: its parent run is tagged and named for the sweep
        self.job = current_job(field(cfg, "sweep_name"))
        self.experiment_id: str | None = None
        self.parent_run_id: str | None = None
        self.error: str | None = None  # the first tracking failure, if any
        self._client: Any = None
        self._run_metrics: dict[str, float] = {}  # the run's own figures, set at run end
        self._lock = threading.Lock()  # events may arrive from an evaluator pool's threads
        if importlib.util.find_spec("mlflow") is None:
            self._fail(
                "start",
                "mlflow is not installed (pip install 'argus-kernels[tracking]', "
                "or choose tracking=none)",
            )

    # ------------------------------------------------------------------ event hooks

    @hookimpl
    def argus_on_run_start(self, run: RunInfo) -> None:
        """Create (or reuse) the experiment and open the parent run."""
        if self.error is None:
            self._safely("start", lambda: self._start(run))

    @hookimpl
    def argus_on_candidate_result(
        self, run: RunInfo, result: CandidateResult, artifacts: dict[str, str]
    ) -> None:
        """Log the candidate as a finished child run with its params, metrics and artifacts."""
        if self.parent_run_id is not None:
            self._safely(f"candidate {result.candidate.id}", lambda: self._child(result, artifacts))

    @hookimpl
    def argus_on_run_end(self, run: RunInfo, results: list[CandidateResult], status: str) -> None:
        """Log the run's best figures and summary table, then close the parent with `status`."""
        self._run_metrics = dict(run.metrics)
        if self.parent_run_id is not None:
            self._safely("end", lambda: self._end(results, status))

    # ------------------------------------------------------------------ what the user sees

    def failure(self) -> str | None:
        """The first tracking failure ('stage: reason'), or None while all is recorded."""
        return self.error

    def summary_lines(self) -> list[str]:
        """Where the store is and how to open it; or why nothing (or not all) was logged."""
        uri, experiment = self.settings.uri, self.settings.experiment
        if self.parent_run_id is None:
            reason = self.error or "no run was started"
            return [f"MLflow tracking off: {reason}; nothing was logged to {uri}"]
        lines = [f"MLflow store: {uri} (experiment '{experiment}', run {self.parent_run_id})"]
        if is_local_uri(uri):
            lines.append(f"Open the UI: mlflow ui --backend-store-uri {uri} --port 5000")
        else:
            run_path = f"#/experiments/{self.experiment_id}/runs/{self.parent_run_id}"
            lines.append(f"Open the UI: {uri.rstrip('/')}/{run_path}")
        if self.job is not None:
            lines.append(
                f"Sweep '{self.job.sweep_name}': its runs have the tag "
                f"argus.sweep_id = '{self.job.sweep_id}'"
            )
        if self.error is not None:
            lines.append(f"MLflow tracking incomplete: {self.error}")
        return lines

    # ------------------------------------------------------------------ the work

    def _start(self, run: RunInfo) -> None:
        client = open_client(self.settings.uri)
        from mlflow.entities import Param

        experiment_id = self._experiment(client)
        self._close_dead_runs(client, experiment_id)
        if self.settings.run_name:
            name = self.settings.run_name
        elif self.job is not None:
            name = self.job.run_name(run.kernel, run.planner)
        else:
            name = f"{run.kernel}-{run.planner}-{time.strftime('%Y%m%d-%H%M%S')}"

        parent = client.create_run(
            experiment_id, tags=self._parent_tags(run), run_name=clip(name, MAX_RUN_NAME_LENGTH)
        )
        self._client, self.experiment_id = client, experiment_id
        self.parent_run_id = parent.info.run_id
        params = [Param(k, v) for k, v in _parent_params(run).items()]
        client.log_batch(self.parent_run_id, params=params)
        if run.config:  # the composed config, as `--cfg job` would print it
            from omegaconf import OmegaConf

            client.log_text(self.parent_run_id, OmegaConf.to_yaml(run.config), "config.yaml")

    def _close_dead_runs(self, client: Any, experiment_id: str) -> None:
        """Mark FAILED the RUNNING parents of this host whose process is gone (killed)."""
        host = socket.gethostname()
        found = client.search_runs(
            [experiment_id],
            filter_string=f"attributes.status = 'RUNNING' and tags.`{HOST_TAG}` = '{host}'",
            max_results=1000,
        )
        for dead in found:
            pid = dead.data.tags.get(PID_TAG)
            if pid is None or not pid.isdigit() or _alive(int(pid)):
                continue
            note = (
                f"process {pid} on {host} ended without closing this run (killed, e.g. by "
                f"SIGKILL or out of memory); marked FAILED by a later run"
            )
            log.warning("MLflow run %s: %s", dead.info.run_id, note)
            client.set_tag(dead.info.run_id, NOTE_TAG, note)
            client.set_terminated(dead.info.run_id, "FAILED")

    def _experiment(self, client: Any) -> str:
        from mlflow.exceptions import MlflowException

        name = self.settings.experiment
        found = client.get_experiment_by_name(name)
        if found is None:
            try:
                return client.create_experiment(
                    name,
                    artifact_location=self.settings.artifact_location,
                    tags=dict([EXPERIMENT_KIND_TAG]),
                )
            except MlflowException:
                # another process of a multirun sweep may have created it just now
                found = client.get_experiment_by_name(name)
                if found is None:
                    raise
        if found.lifecycle_stage == "deleted":
            client.restore_experiment(found.experiment_id)
        if found.tags.get(EXPERIMENT_KIND_TAG[0]) is None:
            client.set_experiment_tag(found.experiment_id, *EXPERIMENT_KIND_TAG)
        return found.experiment_id

    def _parent_tags(self, run: RunInfo) -> dict[str, str]:
        tags = {
            "argus.version": argus_core.__version__,
            HOST_TAG: socket.gethostname(),
            PID_TAG: str(os.getpid()),
            "argus.run_id": run.run_id,
            "argus.output_dir": run.output_dir,
            "argus.run_dir": str(self.run_dir),
        }
        commit = git_commit()
        if commit:
            tags["mlflow.source.git.commit"] = commit
        if self.job is not None:
            tags.update(self.job.tags())
        tags.update(run.tags)
        return {clean_key(k): clip(v, MAX_TAG_VALUE_LENGTH) for k, v in tags.items()}

    def _child(self, result: CandidateResult, artifacts: dict[str, str]) -> None:
        from mlflow.entities import Metric, Param

        client, cand = self._client, result.candidate
        tags = {"mlflow.parentRunId": self.parent_run_id, **_candidate_tags(result)}
        now = int(time.time() * 1000)
        # the candidate's own span: it started `seconds` before it was reported
        start = now - int(result.seconds * 1000)
        child = client.create_run(
            self.experiment_id,
            tags=tags,
            run_name=clip(f"{cand.id} {cand.policy.key()}", MAX_RUN_NAME_LENGTH),
            start_time=start,
        )
        child_id = child.info.run_id
        try:
            metrics = [
                Metric(k, float(v), now, result.index)
                for k, v in _candidate_metrics(result).items()
            ]
            params = [Param(k, v) for k, v in _candidate_params(result).items()]
            client.log_batch(child_id, metrics=metrics, params=params)
            for name, text in artifacts.items():
                client.log_text(child_id, text, name)
            client.log_text(child_id, result.to_json(), "result.json")
        except Exception:
            client.set_terminated(child_id, "FAILED", end_time=now)
            raise
        client.set_terminated(child_id, "FINISHED" if result.ok else "FAILED", end_time=now)

    def _end(self, results: list[CandidateResult], status: str) -> None:
        from mlflow.entities import Metric, Param

        from argus_core.spec import caught as synth_caught

        if status not in END_STATUSES:
            log.warning(
                "run end status %r is not one of %s; recording FAILED", status, END_STATUSES
            )
            status = "FAILED"
        client, parent = self._client, self.parent_run_id
        best = best_result(results)
        values: dict[str, float] = {
            "n_candidates": len(results),
            "n_correct": sum(is_correct(r) for r in results),
            "n_failed": sum(not r.ok for r in results),
        }
        if best is not None and best.timing is not None:
            values[f"best_{_time_kind(best)}_ms"] = best.timing.ms
            if best.timing.speedup is not None:
                values["best_speedup"] = best.timing.speedup
        values |= {k: float(v) for k, v in self._run_metrics.items()}
        now = int(time.time() * 1000)
        client.log_batch(parent, metrics=[Metric(k, float(v), now, 0) for k, v in values.items()])
        caught = synth_caught.catches(results)  # issue #19: which invariant caught which
        if caught:
            client.log_batch(parent, params=[Param(synth_caught.PARAM, synth_caught.param(caught))])
        estimated = any(r.timing is not None and r.timing.estimated for r in results)
        client.log_text(parent, render_table(results, estimated) + "\n", "summary.txt")
        client.set_terminated(parent, status)

    def _safely(self, what: str, action: Callable[[], None]) -> None:
        with self._lock:
            try:
                action()
            except Exception as exc:  # tracking must never end the run
                self._fail(what, f"{type(exc).__name__}: {exc}")

    def _fail(self, what: str, reason: str) -> None:
        if self.error is None:
            log.error(
                "MLflow tracking to %s failed at %s (%s)",
                self.settings.uri,
                what,
                reason,
            )
            self.error = f"{what}: {reason}"


def _alive(pid: int) -> bool:
    """True when process `pid` exists on this host (or cannot be signalled: not ours)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# ---------------------------------------------------------------------- what is logged


def _time_kind(result: CandidateResult) -> str:
    return "estimated" if result.timing is not None and result.timing.estimated else "measured"


def _parent_params(run: RunInfo) -> dict[str, str]:
    config = run.config or {}
    llm = field(config, "llm", {})
    head: dict[str, Any] = {
        "kernel": run.kernel,
        "backend": run.backend,
        "planner": run.planner,
        "budget": run.budget,
        "llm_model": field(llm, "model", field(llm, "name")),
        "seed": field(config, "seed"),
    }
    flat = {f"config.{k}": v for k, v in flatten_config(config).items()}
    merged = {k: v for k, v in head.items() if v is not None} | flat
    return {clean_key(k): clip(v, MAX_PARAM_VALUE_LENGTH) for k, v in merged.items()}


def _candidate_params(result: CandidateResult) -> dict[str, str]:
    cand = result.candidate
    params: dict[str, Any] = {
        "candidate_id": cand.id,
        "kernel": cand.kernel,
        "entry": cand.entry,
        "techniques": ",".join(cand.techniques) or "none",
        "parent_candidate": cand.parent or "none",
    }
    params |= {f"policy.{k}": v for k, v in cand.policy.tiles.items()}
    params |= {f"policy.{k}": v for k, v in cand.policy.compiler.items()}
    return {clean_key(k): clip(v, MAX_PARAM_VALUE_LENGTH) for k, v in params.items()}


def _candidate_tags(result: CandidateResult) -> dict[str, str]:
    stage, reason = failure_parts(result)
    tags = {"status": "ok" if result.ok else "failed", "verify_status": result.verify.status}
    if not result.ok:
        tags |= {"failure_stage": stage, "failure_reason": reason}
    if result.verify.summary:
        tags["verify_summary"] = result.verify.summary
    if result.compile is not None:
        tags["target"] = result.compile.target
    if result.timing is not None:
        tags |= {"timing": _time_kind(result), "timing_model": result.timing.model}
    return {k: clip(v, MAX_TAG_VALUE_LENGTH) for k, v in tags.items()}


_COMPILE_METRICS = (
    "registers",
    "sgprs",
    "agprs",
    "spills",
    "scratch_bytes",
    "occupancy",
    "shared_bytes",
    "mma_count",
    "buffer_loads",
)
_TIMING_METRICS = ("tflops", "gbps", "pct_roofline", "baseline_ms", "speedup")


def _candidate_metrics(result: CandidateResult) -> dict[str, float]:
    """Every number known about the candidate; absent ones are left out, not zeroed."""
    values: dict[str, Any] = {"correct": 1.0 if is_correct(result) else 0.0}
    values["reward"] = result.reward
    values["seconds"] = result.seconds
    if result.verify.status != "skipped":
        values["verify_seconds"] = result.verify.seconds
        values["counterexamples"] = len(result.verify.counterexamples)
    if result.compile is not None:
        values |= {k: getattr(result.compile, k) for k in _COMPILE_METRICS}
        values["compile_seconds"] = result.compile.seconds
    if result.correctness is not None:
        values["correctness_seconds"] = result.correctness.seconds
        values["max_abs_err"] = result.correctness.max_abs_err
        values["max_rel_err"] = result.correctness.max_rel_err
    if result.timing is not None:
        values[f"{_time_kind(result)}_ms"] = result.timing.ms
        values |= {k: getattr(result.timing, k) for k in _TIMING_METRICS}
    values |= {f"planner.{k}": v for k, v in result.planner.items()}
    return {k: float(v) for k, v in values.items() if v is not None}
