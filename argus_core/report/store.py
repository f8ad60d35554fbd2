"""Reading an MLflow store for `argus report`: which runs to compare, and what they logged.

The tracker (`argus_core.tracking.mlflow_tracker`) writes one parent run per invocation and
one child run per candidate; this module reads them back as plain records. Runs tagged
`argus.report` (the report's own runs) are never read as results.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from argus_core.errors import ArgusError

REPORT_TAG = "argus.report"
SWEEP_ID_TAG = "argus.sweep_id"
SWEEP_NAME_TAG = "argus.sweep_name"
PARENT_TAG = "mlflow.parentRunId"
_PAGE = 1000  # runs per search page; the store may hold more


class ReportInputError(ArgusError):
    """The report cannot be made from what the user named (exit status 2)."""


class NothingToReport(ArgusError):
    """The store, experiment or sweep holds no runs to compare (exit status 1)."""


@dataclass(frozen=True)
class CandidateRecord:
    """One child run: a candidate's outcome as logged."""

    run_id: str
    index: int  # the candidate's place in its run (the metrics' step)
    candidate_id: str
    policy: str
    ok: bool  # no stage failed
    correct: bool  # checked against the reference and matched
    ms: float | None
    timing: str | None  # "estimated" | "measured" | None (never timed)
    speedup: float | None  # over the library baseline, when one was timed beside it
    reward: float | None
    failure_stage: str = ""

    @property
    def timed(self) -> bool:
        """A time worth comparing: no stage failed and a figure was logged."""
        return self.ok and self.ms is not None


@dataclass
class RunRecord:
    """One parent run (an `argus` invocation) with its candidates in index order."""

    run_id: str
    name: str
    status: str  # FINISHED | KILLED | FAILED | RUNNING ...
    start_time: int  # ms since the epoch
    experiment_id: str
    params: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    candidates: list[CandidateRecord] = field(default_factory=list)

    @property
    def planner(self) -> str:
        return self.params.get("planner", "?")

    @property
    def model(self) -> str | None:
        """The LLM's model name, or None when the run had no LLM."""
        model = self.params.get("llm_model")
        return None if model in (None, "", "none", "null") else model

    @property
    def task(self) -> str:
        """'gemm bf16 M=4096 N=4096 K=4096': the kernel, its task file, dtype and shape."""
        parts = [self.params.get("kernel", "?")]
        for key in ("config.kernel.task", "config.kernel.dtype"):
            value = self.params.get(key)
            if value not in (None, "", "null"):
                parts.append(value)
        prefix = "config.kernel.shape."
        # params come back in the order they were logged, which is the config's order
        shape = [f"{k[len(prefix) :]}={v}" for k, v in self.params.items() if k.startswith(prefix)]
        return " ".join(parts + shape)

    @property
    def sweep_id(self) -> str | None:
        return self.tags.get(SWEEP_ID_TAG)

    @property
    def timing(self) -> str | None:
        """'measured' when any candidate was measured, else 'estimated' when any was
        estimated, else None (nothing was timed)."""
        kinds = {c.timing for c in self.candidates}
        return next((k for k in ("measured", "estimated") if k in kinds), None)


@dataclass(frozen=True)
class Scope:
    """What a report covers: an experiment, and one sweep of it or all its runs."""

    uri: str
    experiment: str
    experiment_id: str
    sweep_id: str | None = None
    sweep_name: str | None = None

    @property
    def label(self) -> str:
        """A short name for titles and directories: the sweep's name, else the experiment's."""
        return self.sweep_name or self.sweep_id or self.experiment

    def describe(self, n_runs: int) -> str:
        """One line saying what the report covers."""
        what = f"experiment '{self.experiment}'"
        if self.sweep_id is not None:
            name = f"'{self.sweep_name}' " if self.sweep_name else ""
            what += f", sweep {name}(id {self.sweep_id})"
        else:
            what += ", all runs"
        return f"{what}: {n_runs} run{'s' if n_runs != 1 else ''} ({self.uri})"


# ---------------------------------------------------------------------- opening the store


def import_mlflow() -> Any:
    """mlflow with telemetry off and its schema-migration chatter quiet (as the tracker)."""
    from argus_core.tracking.mlflow_tracker import import_mlflow

    return import_mlflow()


def local_store_path(uri: str) -> str | None:
    """The file or folder a local store lives in ('sqlite:///x.db' -> 'x.db'); None for a
    server. Opening a missing SQLite file would create an empty store, so callers check."""
    if uri.startswith("sqlite:///"):
        return uri[len("sqlite:///") :]
    if uri.startswith("file://"):
        return uri[len("file://") :]
    if uri.startswith(("/", ".")):
        return uri
    return None


def open_client(uri: str) -> Any:
    """An MlflowClient on `uri`; ReportInputError when a local store does not exist."""
    path = local_store_path(uri)
    if path is not None and not os.path.exists(path):
        raise ReportInputError(
            f"no MLflow store at {path!r} (tracking URI {uri!r}); run `argus +kernel=...` "
            "here first, or pass --tracking-uri"
        )
    return import_mlflow().MlflowClient(tracking_uri=uri)


def find_experiment(client: Any, name: str) -> str:
    """The id of the active experiment `name`; ReportInputError naming the valid ones."""
    found = client.get_experiment_by_name(name)
    if found is not None and found.lifecycle_stage == "active":
        return str(found.experiment_id)
    valid = sorted(e.name for e in client.search_experiments())
    raise ReportInputError(
        f"unknown experiment {name!r}; valid choices: {', '.join(valid) or '(none: the store is empty)'}"
    )


# ---------------------------------------------------------------------- reading runs


def load_runs(client: Any, experiment_id: str) -> list[RunRecord]:
    """Every parent run of the experiment, oldest first, each with its candidates; the
    report's own runs are left out."""
    from mlflow.entities import ViewType

    parents: dict[str, RunRecord] = {}
    children: dict[str, list[CandidateRecord]] = {}
    for run in _all_runs(client, experiment_id, ViewType.ACTIVE_ONLY):
        tags = run.data.tags
        if tags.get(REPORT_TAG):
            continue
        if PARENT_TAG in tags:
            children.setdefault(tags[PARENT_TAG], []).append(_candidate(run))
            continue
        parents[run.info.run_id] = RunRecord(
            run_id=run.info.run_id,
            name=run.info.run_name or run.info.run_id,
            status=run.info.status,
            start_time=int(run.info.start_time or 0),
            experiment_id=experiment_id,
            params=dict(run.data.params),
            metrics=dict(run.data.metrics),
            tags=dict(tags),
        )
    for run_id, record in parents.items():
        record.candidates = sorted(children.get(run_id, []), key=lambda c: c.index)
    return sorted(parents.values(), key=lambda r: r.start_time)


def _all_runs(client: Any, experiment_id: str, view: Any) -> Iterable[Any]:
    token = None
    while True:
        page = client.search_runs(
            [experiment_id], run_view_type=view, max_results=_PAGE, page_token=token
        )
        yield from page
        token = page.token
        if not token:
            return


def _candidate(run: Any) -> CandidateRecord:
    metrics, params, tags = run.data.metrics, run.data.params, run.data.tags
    timing = tags.get("timing")
    ms = metrics.get(f"{timing}_ms") if timing else None
    candidate_id = params.get("candidate_id", run.info.run_name or run.info.run_id)
    name = run.info.run_name or ""
    # the tracker names a child 'c003 <policy key>'
    policy = name[len(candidate_id) :].strip() if name.startswith(candidate_id) else name
    return CandidateRecord(
        run_id=run.info.run_id,
        index=_step(run),
        candidate_id=candidate_id,
        policy=policy,
        ok=tags.get("status") == "ok",
        correct=metrics.get("correct") == 1.0,
        ms=ms,
        timing=timing if ms is not None else None,
        speedup=metrics.get("speedup"),
        reward=metrics.get("reward"),
        failure_stage=tags.get("failure_stage", ""),
    )


def _step(run: Any) -> int:
    # every candidate metric is logged at step = the candidate's index; the dict view of
    # run.data drops steps, its protobuf form keeps them
    steps = {m.key: m.step for m in run.data.to_proto().metrics}
    return int(steps.get("correct", steps.get("reward", 0)))


# ---------------------------------------------------------------------- choosing runs


@dataclass(frozen=True)
class Sweep:
    id: str
    name: str | None
    latest_start: int
    n_runs: int

    def title(self) -> str:
        return f"{self.name} (id {self.id})" if self.name else self.id


def sweeps(runs: list[RunRecord]) -> list[Sweep]:
    """The sweeps among `runs`, oldest first (by their latest run's start)."""
    grouped: dict[str, list[RunRecord]] = {}
    for r in runs:
        if r.sweep_id:
            grouped.setdefault(r.sweep_id, []).append(r)
    found = [
        Sweep(sid, rs[-1].tags.get(SWEEP_NAME_TAG), max(r.start_time for r in rs), len(rs))
        for sid, rs in grouped.items()
    ]
    return sorted(found, key=lambda s: s.latest_start)


def choose_runs(
    runs: list[RunRecord], sweep: str | None, all_runs: bool, base: Scope
) -> tuple[Scope, list[RunRecord]]:
    """The scope and runs to report: the sweep named by id or name (the latest of that
    name), every run when `all_runs`, else the latest sweep if any run has a sweep tag,
    else every run. ReportInputError for an unknown sweep, naming the valid ones."""
    known = sweeps(runs)
    if all_runs or (sweep is None and not known):
        return base, runs
    if sweep is None:
        chosen = known[-1]
    else:
        matches = [s for s in known if sweep in (s.id, s.name)]
        if not matches:
            valid = ", ".join(s.title() for s in known) or "(none: no run has a sweep tag)"
            raise ReportInputError(
                f"unknown sweep {sweep!r} in experiment '{base.experiment}'; valid choices: {valid}"
            )
        chosen = matches[-1]
    scope = Scope(base.uri, base.experiment, base.experiment_id, chosen.id, chosen.name)
    return scope, [r for r in runs if r.sweep_id == chosen.id]
