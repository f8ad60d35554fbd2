"""`argus -m`: real sweeps through the CLI in a subprocess, grouped in one MLflow experiment,
with a bad value failing only its own jobs; the joblib launcher; the Ray launcher when it is
installed. Budgets are one candidate and correctness is off, so each job is a real
trace -> verify -> lower -> gfx942 compile -> estimate in a few seconds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from argus_core.cli import EXIT_BAD_INPUT, plan_sweep
from argus_core.tracking.sweep import (
    JOB_FILE,
    JOB_NUM_TAG,
    JOB_OVERRIDES_TAG,
    SWEEP_ID_TAG,
    SWEEP_NAME_TAG,
    job_identity,
    sweep_id,
)

FAST = ("budget=1", "evaluate.correctness=off", "progress=off")


def parents(uri: str, experiment: str = "argus") -> list:
    """The parent runs of `experiment` in the store at `uri`."""
    from argus_core.tracking.mlflow_tracker import open_client

    client = open_client(uri)
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None, f"no experiment {experiment!r} in {uri}"
    runs = client.search_runs([exp.experiment_id], max_results=500)
    return [r for r in runs if "mlflow.parentRunId" not in r.data.tags]


# ---------------------------------------------------------------------- planning (in-process)


def test_plan_drops_a_value_that_fails_every_job_it_is_in(capsys):
    plan = plan_sweep(["+kernel=gemm,attention", "backend=nope,mi300x", "budget=1"])
    err = capsys.readouterr().err
    assert err.count("argus: job ") == 2  # (gemm, nope) and (attention, nope)
    assert "unknown backend 'nope'; valid choices: " in err and "mi300x" in err
    assert "+kernel=gemm,attention" in plan.overrides and "backend=mi300x" in plan.overrides
    assert plan.bad_jobs == 2
    assert plan.jobs == [
        job_identity(["+kernel=gemm", "backend=mi300x", "budget=1"]),
        job_identity(["+kernel=attention", "backend=mi300x", "budget=1"]),
    ]
    # the sweep directory is resolved once here and handed to every job
    assert plan.sweep_dir and "${" not in plan.sweep_dir
    assert plan.overrides[-1] == f"hydra.sweep.dir='{plan.sweep_dir}'"


def test_plan_of_a_good_sweep_keeps_the_overrides_as_written(capsys):
    ovs = ["+kernel=gemm", "planner=choice(icrl,search)", "seed=range(0,2)", "hydra.sweep.dir=x"]
    plan = plan_sweep(ovs)
    assert capsys.readouterr().err == ""
    assert plan.overrides[:3] == ovs[:3] and plan.overrides[3] == "hydra.sweep.dir='x'"
    assert len(plan.jobs) == 4 and plan.bad_jobs == 0


def test_plan_with_every_job_bad_runs_nothing(capsys):
    plan = plan_sweep(["+kernel=gemm", "backend=nope,nada"])
    assert plan.overrides == [] and plan.bad_jobs == 2
    assert "unknown backend 'nada'" in capsys.readouterr().err


# ---------------------------------------------------------------------- the basic launcher


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """2 kernels x 2 planners, plus a backend value that fails every job it is in."""
    import os
    import subprocess
    import sys

    cwd = tmp_path_factory.mktemp("sweep")
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "HYDRA_FULL_ERROR": "0"}
    env.pop("TRITON_INTERPRET", None)
    args = ["+kernel=gemm,attention", "planner=icrl,search", "backend=nope,mi300x", *FAST]
    proc = subprocess.run(
        [sys.executable, "-m", "argus_core.cli", "-m", *args, "hydra.sweep.dir=.argus/sw"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return cwd, proc


@pytest.mark.slow
def test_a_bad_value_fails_its_jobs_and_the_others_run(sweep):
    cwd, proc = sweep
    assert proc.returncode == EXIT_BAD_INPUT, proc.stderr[-3000:]
    bad = [ln for ln in proc.stderr.splitlines() if ln.startswith("argus: job ")]
    assert len(bad) == 4 and all("unknown backend 'nope'" in ln for ln in bad), bad
    assert "Traceback" not in proc.stderr
    results = sorted(Path(cwd, ".argus", "sw").glob("*/results.json"))
    assert len(results) == 4
    assert all(json.loads(p.read_text())[0]["failure"] is None for p in results)


@pytest.mark.slow
def test_sweep_lands_in_one_experiment_with_sweep_tags_and_readable_names(sweep):
    cwd, proc = sweep
    runs = parents(f"sqlite:///{cwd}/.argus/mlflow.db")
    assert len(runs) == 4, [r.info.run_name for r in runs]
    tags = [r.data.tags for r in runs]
    assert {t[SWEEP_ID_TAG] for t in tags} == {sweep_id(cwd / ".argus" / "sw")}
    assert {t[SWEEP_NAME_TAG] for t in tags} == {"sw"}
    assert sorted(int(t[JOB_NUM_TAG]) for t in tags) == [0, 1, 2, 3]
    expected = {
        job_identity([f"+kernel={k}", f"planner={p}", "backend=mi300x", *FAST])
        for k in ("gemm", "attention")
        for p in ("icrl", "search")
    }
    assert {t[JOB_OVERRIDES_TAG] for t in tags} == expected
    for run in runs:
        kernel, planner = run.data.params["kernel"], run.data.params["planner"]
        assert run.info.run_name == f"{kernel}-{planner}-{run.data.tags[JOB_NUM_TAG]}"
        assert run.info.status == "FINISHED"


@pytest.mark.slow
def test_job_directories_are_named_by_number_and_overrides(sweep):
    cwd, _ = sweep
    names = sorted(p.name for p in Path(cwd, ".argus", "sw").iterdir() if p.is_dir())
    assert names[0].startswith("0_") and "+kernel=gemm" in names[0] and "planner=icrl" in names[0]
    for name in names:
        record = json.loads(Path(cwd, ".argus", "sw", name, JOB_FILE).read_text())
        assert record["finished"] and record["exit_status"] == 0
        assert name.startswith(f"{record['job_num']}_")


@pytest.mark.slow
def test_single_runs_get_no_sweep_tags(run_argus, tmp_path):
    proc = run_argus("+kernel=gemm", *FAST)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = parents(f"sqlite:///{tmp_path}/.argus/mlflow.db")
    assert not any(k.startswith(("argus.sweep", "argus.job")) for k in run.data.tags)
    assert not list(tmp_path.rglob(JOB_FILE))


# ---------------------------------------------------------------------- other launchers


@pytest.mark.slow
def test_joblib_launcher_runs_jobs_in_workers_and_reports_their_status(run_argus, tmp_path):
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    proc = run_argus(
        "-m",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        "+kernel=gemm",
        "planner=icrl,search",
        "progress=off,loud",  # bad in the job: validated in the worker, status read back
        "budget=1",
        "evaluate.correctness=off",
        timeout=600,
    )
    assert "Joblib.Parallel(n_jobs=2" in proc.stdout + proc.stderr
    assert proc.returncode == EXIT_BAD_INPUT, proc.stderr[-3000:]
    assert proc.stderr.count("argus: invalid progress 'loud'") == 2
    runs = parents(f"sqlite:///{tmp_path}/.argus/mlflow.db")
    assert sorted(r.info.run_name for r in runs) == ["gemm-icrl-0", "gemm-search-2"]
    assert len({r.data.tags[SWEEP_ID_TAG] for r in runs}) == 1
    records = [json.loads(p.read_text()) for p in tmp_path.rglob(JOB_FILE)]
    assert sorted(r["exit_status"] for r in records) == [0, 0, 2, 2]


@pytest.mark.slow
def test_ray_launcher_against_a_local_ray(run_argus, tmp_path):
    pytest.importorskip("ray")
    pytest.importorskip("hydra_plugins.hydra_ray_launcher")
    proc = run_argus(
        "-m",
        "hydra/launcher=ray",
        "+hydra.launcher.ray.init.num_cpus=2",
        "+kernel=gemm",
        "planner=icrl,search",
        *FAST,
        env={"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = parents(f"sqlite:///{tmp_path}/.argus/mlflow.db")
    assert sorted(r.info.run_name for r in runs) == ["gemm-icrl-0", "gemm-search-1"]
    assert len({r.data.tags[SWEEP_ID_TAG] for r in runs}) == 1
