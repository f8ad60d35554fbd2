"""`resume=true` skips the sweep jobs that finished (by the MLflow store, or by the sweep
directory for tracking=none) and runs KILLED or unfinished ones again; Ctrl-C marks the
run KILLED, keeps what it logged, and stops the sweep."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from argus_core.tracking.config import MlflowSettings
from argus_core.tracking.mlflow_tracker import open_client
from argus_core.tracking.resume import already_finished, finished_in_mlflow
from argus_core.tracking.sweep import (
    JOB_FILE,
    SWEEP_ID_TAG,
    SweepJob,
    job_identity,
    sweep_id,
    write_job_file,
)

FAST = ("budget=1", "evaluate.correctness=off", "progress=off")


def job(tmp_path: Path, overrides: str = "+kernel=gemm planner=icrl", num: int = 0) -> SweepJob:
    sweep_dir = tmp_path / "sweep"
    out = sweep_dir / f"{num}_{overrides.replace(' ', ',')}"
    return SweepJob(str(sweep_dir), "sweep", num, overrides, str(out))


# ---------------------------------------------------------------------- identity


def test_job_identity_ignores_order_and_resume():
    a = job_identity(["planner=icrl", "+kernel=gemm", "resume=true"])
    assert a == job_identity(["+kernel=gemm", "planner=icrl"]) == "+kernel=gemm planner=icrl"
    assert a != job_identity(["+kernel=gemm", "planner=search"])


def test_sweep_id_is_stable_and_tells_same_named_sweeps_apart(tmp_path):
    here, there = tmp_path / "a" / "2026-01-01_00-00-00", tmp_path / "b" / "2026-01-01_00-00-00"
    assert sweep_id(here) == sweep_id(str(here) + "/") and sweep_id(here) != sweep_id(there)
    assert sweep_id(here).startswith("2026-01-01_00-00-00-")


# ---------------------------------------------------------------------- tracking=none: files


def test_sweep_directory_answers_only_for_finished_jobs_with_results(tmp_path):
    done, killed = job(tmp_path), job(tmp_path, "+kernel=gemm planner=search", 1)
    none = {"name": "none"}
    assert already_finished(done, none) is None  # nothing recorded yet
    path = write_job_file(done, 0, finished=True, skipped=False)
    assert already_finished(done, none) is None  # no results.json beside it
    Path(done.output_dir, "results.json").write_text("[]")
    assert already_finished(done, none) == str(path)
    write_job_file(killed, 130, finished=False, skipped=False)
    Path(killed.output_dir, "results.json").write_text("[]")
    assert already_finished(killed, none) is None
    other_sweep = SweepJob(str(tmp_path / "other"), "o", 0, done.overrides, done.output_dir)
    assert already_finished(other_sweep, none) is None  # the same overrides elsewhere


# ---------------------------------------------------------------------- tracking=mlflow: store


def test_mlflow_store_answers_only_for_a_finished_parent_of_the_same_job(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    settings = MlflowSettings.from_config({"uri": uri, "experiment": "exp"}, str(tmp_path))
    mine, other = job(tmp_path), job(tmp_path, "+kernel=gemm planner=search", 1)
    assert finished_in_mlflow(mine, settings) is None  # no experiment yet
    client = open_client(uri)
    exp = client.create_experiment("exp")
    for j, status in ((mine, "KILLED"), (other, "FINISHED")):
        run = client.create_run(exp, tags=j.tags())
        client.set_terminated(run.info.run_id, status)
    # a finished child run carrying the tags is not a finished job
    parent = client.create_run(exp, tags=mine.tags())
    child = client.create_run(exp, tags={"mlflow.parentRunId": parent.info.run_id, **mine.tags()})
    client.set_terminated(child.info.run_id, "FINISHED")
    assert finished_in_mlflow(mine, settings) is None  # KILLED, unfinished, child: run again
    assert run.info.run_id in finished_in_mlflow(other, settings)
    client.set_terminated(parent.info.run_id, "FINISHED")
    assert parent.info.run_id in already_finished(
        mine, {"name": "mlflow", "uri": uri, "experiment": "exp"}
    )


def test_an_unreadable_store_means_run_again(tmp_path, caplog):
    settings = MlflowSettings(f"sqlite:///{tmp_path}/file/mlflow.db", "exp", None, None)
    Path(tmp_path, "file").write_text("a file where a directory should be")
    with caplog.at_level(logging.WARNING, logger="argus.tracking"):
        assert finished_in_mlflow(job(tmp_path), settings) is None
    assert "resume: cannot read MLflow store" in caplog.text


# ---------------------------------------------------------------------- through the CLI


def _job_records(sweep_dir: Path) -> dict[str, dict]:
    return {
        json.loads(p.read_text())["overrides"]: json.loads(p.read_text())
        for p in sweep_dir.rglob(JOB_FILE)
    }


@pytest.mark.slow
def test_resume_skips_finished_jobs_and_reruns_a_killed_one(run_argus, tmp_path):
    sweep = ("-m", "+kernel=gemm", "planner=icrl,search", *FAST, "hydra.sweep.dir=sw")
    first = run_argus(*sweep, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    client = open_client(f"sqlite:///{tmp_path}/.argus/mlflow.db")
    exp = client.get_experiment_by_name("argus").experiment_id
    icrl = client.search_runs([exp], "tags.`argus.job_num` = '0'")[0]
    client.set_terminated(icrl.info.run_id, "KILLED")  # as Ctrl-C leaves it

    second = run_argus(*sweep, "resume=true", timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    skipped = [ln for ln in second.stdout.splitlines() if " skipped: finished before" in ln]
    assert len(skipped) == 1 and "planner=search" in skipped[0], second.stdout[-3000:]
    runs = client.search_runs([exp], f"tags.`{SWEEP_ID_TAG}` = '{sweep_id(tmp_path / 'sw')}'")
    statuses = sorted((r.info.run_name, r.info.status) for r in runs)
    assert statuses == [
        ("gemm-icrl-0", "FINISHED"),  # run again
        ("gemm-icrl-0", "KILLED"),
        ("gemm-search-1", "FINISHED"),  # not run again
    ]
    records = _job_records(tmp_path / "sw")
    assert [r["skipped"] for r in records.values()].count(True) == 1


@pytest.mark.slow
def test_resume_with_tracking_none_reads_the_sweep_directory(run_argus, tmp_path):
    sweep = ("-m", "+kernel=gemm", "planner=icrl,search", *FAST, "tracking=none")
    sweep = (*sweep, "hydra.sweep.dir=sw")
    assert run_argus(*sweep, timeout=600).returncode == 0
    sweep_dir = tmp_path / "sw"
    records = _job_records(sweep_dir)
    search = next(Path(r["path"]) for r in _with_paths(sweep_dir) if "search" in r["overrides"])
    search.unlink()  # as if that job's process died before it recorded its end
    results = {p: p.stat().st_mtime_ns for p in sweep_dir.rglob("results.json")}

    again = run_argus(*sweep, "resume=true", timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.count(" skipped: finished before") == 1
    changed = [p.parent.name for p, t in results.items() if p.stat().st_mtime_ns != t]
    assert len(changed) == 1 and "planner=search" in changed[0]
    assert set(_job_records(sweep_dir)) == set(records)


def _with_paths(sweep_dir: Path) -> list[dict]:
    return [{**json.loads(p.read_text()), "path": p} for p in sweep_dir.rglob(JOB_FILE)]


@pytest.mark.slow
def test_ctrl_c_marks_the_run_killed_keeps_its_candidates_and_stops_the_sweep(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = open_client(uri)  # the store exists before the child and this test both poll it
    exp = client.create_experiment("argus")
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "HYDRA_FULL_ERROR": "0"}
    env.pop("TRITON_INTERPRET", None)
    args = ["-m", "+kernel=gemm", "planner=search", "seed=0,1", "budget=40"]
    args += ["evaluate.correctness=off", "progress=off", f"tracking.uri={uri}"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "argus_core.cli", *args, "hydra.sweep.dir=sw"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's Ctrl-C reaches
        # SIGINT as a foreground process has it: an ignored SIGINT is inherited through
        # exec, and Python then installs no KeyboardInterrupt (twice in the full suite the
        # child ended 0 with nothing on stderr: a disposition the pytest worker had taken)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 240
        while not client.search_runs([exp], "tags.`mlflow.parentRunId` != ''"):
            assert proc.poll() is None and time.monotonic() < deadline, "no candidate logged"
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err[-3000:]
    runs = client.search_runs([exp])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1, "the sweep must stop: job #1 never starts"
    assert parents[0].info.status == "KILLED", err[-3000:]
    assert parents[0].info.run_name == "gemm-search-0"
    assert 1 <= len(children) < 40
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parents[0].info.run_id}
    (record,) = _job_records(tmp_path / "sw").values()
    assert record["exit_status"] == 130 and not record["finished"]
