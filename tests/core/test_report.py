"""`argus report` against real MLflow stores: one written run by run with MlflowClient
(fast, every case on purpose), and one written by a real `argus -m` sweep."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from argus_core.report import main
from argus_core.report.store import CandidateRecord, RunRecord, Scope
from argus_core.report.table import build_rows, cells, footnotes, render_text

mlflow = pytest.importorskip("mlflow")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
T0 = 1_700_000_000_000  # start times are set, so "latest" does not depend on the clock


@dataclass
class C:
    """A candidate to log as a child run."""

    ms: float
    correct: bool = True
    ok: bool = True
    timing: str = "estimated"
    reward: float = 1.0
    speedup: float | None = None


def log_run(client, exp_id, start, *, kernel="gemm", planner="search", model="none",
            status="FINISHED", sweep=None, metrics=None, children=()):  # fmt: skip
    """A parent run with the params, tags and metrics the tracker logs, and its children."""
    from mlflow.entities import Metric, Param

    tags = {"argus.run_id": f"r{start}"}
    if sweep is not None:
        tags |= {"argus.sweep_id": sweep[0], "argus.sweep_name": sweep[1], "argus.job_num": "0"}
    pid = client.create_run(exp_id, start_time=T0 + start, tags=tags).info.run_id
    params = {"kernel": kernel, "planner": planner, "llm_model": model, "backend": "mi300x"}
    params |= {"config.kernel.task": "null", "config.kernel.dtype": "bf16"}
    params |= {"config.kernel.shape.M": "64", "config.kernel.shape.N": "32"}
    client.log_batch(
        pid,
        params=[Param(k, v) for k, v in params.items()],
        metrics=[Metric(k, v, T0, 0) for k, v in (metrics or {}).items()],
    )
    for i, c in enumerate(children):
        child_tags = {"mlflow.parentRunId": pid, "status": "ok" if c.ok else "failed"}
        child_tags["timing"] = c.timing
        if not c.ok:
            child_tags["failure_stage"] = "correctness"
        cid = f"c{i + 1:03d}"
        child = client.create_run(
            exp_id, start_time=T0 + start + i + 1, tags=child_tags, run_name=f"{cid} BM{64 + i}"
        ).info.run_id
        # a failed candidate keeps the figure it got before failing (the report must skip it)
        values = {"correct": float(c.correct), "reward": c.reward, f"{c.timing}_ms": c.ms}
        if c.speedup is not None:
            values["speedup"] = c.speedup
        client.log_batch(
            child,
            params=[Param("candidate_id", cid)],
            metrics=[Metric(k, v, T0, i) for k, v in values.items()],
        )
        client.set_terminated(child, "FINISHED" if c.ok else "FAILED")
    client.set_terminated(pid, status)
    return pid


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Sweep 'grid' (gemm: search, icrl with an LLM twice), the later sweep 'latest'
    (attention: search measured, icrl KILLED), one run outside any sweep, an empty
    experiment."""
    tmp = tmp_path_factory.mktemp("report_store")
    uri = f"sqlite:///{tmp}/mlflow.db"
    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("synthetic", artifact_location=str(tmp / "artifacts"))
    client.create_experiment("empty", artifact_location=str(tmp / "artifacts_empty"))
    grid, latest = ("sw-1", "grid"), ("sw-2", "latest")
    # the fastest figure (0.10) failed to compile: it must not be called best
    log_run(
        client, exp, 0, sweep=grid, children=[C(0.30), C(0.10, False, False, reward=-1.0), C(0.25)]
    )
    llm = {"planner": "icrl", "model": "gpt-4o-mini", "sweep": grid}
    usage1 = {"llm_prompt_tokens": 1000, "llm_completion_tokens": 200, "llm_cost_usd": 0.01}
    usage2 = {"llm_prompt_tokens": 500, "llm_completion_tokens": 100, "llm_cost_usd": 0.005}
    log_run(client, exp, 100, **llm, metrics=usage1, children=[C(0.30), C(0.18, reward=1.6)])
    log_run(client, exp, 200, **llm, metrics=usage2, children=[C(0.30), C(0.15, reward=2.0)])
    measured = [C(1.0, timing="measured", speedup=0.9), C(0.8, timing="measured", speedup=1.125)]
    log_run(client, exp, 300, kernel="attention", sweep=latest, children=measured)
    log_run(client, exp, 400, kernel="attention", planner="icrl", sweep=latest,
            status="KILLED", children=[C(1.1)])  # fmt: skip
    log_run(client, exp, 500, children=[C(0.5)])  # a single run, outside any sweep
    return tmp, uri, client, exp


def report(capsys, uri, *args, experiment="synthetic", out):
    code = main(["--tracking-uri", uri, "--experiment", experiment, "--out", str(out), *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def rows_by_planner(stdout: str) -> dict[tuple[str, str | None], dict]:
    return {(r["planner"], r["model"]): r for r in json.loads(stdout)["rows"]}


def test_default_is_the_latest_sweep(store, capsys, tmp_path):
    _, uri, _, _ = store
    code, out, err = report(capsys, uri, "--no-mlflow", out=tmp_path)
    assert code == 0, err
    assert "sweep 'latest' (id sw-2): 2 runs" in out
    assert "attention bf16 M=64 N=32" in out and "gemm" not in out.split("\n\n")[1]


def test_one_row_per_task_planner_model_with_the_best_correct_candidate(store, capsys, tmp_path):
    _, uri, _, _ = store
    code, out, err = report(capsys, uri, "--sweep", "grid", "--format", "json", "--no-mlflow",
                            out=tmp_path)  # fmt: skip
    assert code == 0, err
    rows = rows_by_planner(out)
    assert set(rows) == {("search", None), ("icrl", "gpt-4o-mini")}
    search = rows[("search", None)]
    assert search["task"] == "gemm bf16 M=64 N=32"
    assert search["best"]["candidate_id"] == "c003" and search["best"]["ms"] == 0.25
    assert search["speedup"] == pytest.approx(0.30 / 0.25) and search["speedup_over"] == "first"
    assert (search["n_candidates"], search["n_correct"]) == (3, 2)
    icrl = rows[("icrl", "gpt-4o-mini")]
    assert icrl["best"]["ms"] == 0.15 and len(icrl["runs"]) == 2
    # LLM usage is summed over the row's runs
    assert icrl["llm_prompt_tokens"] == 1500 and icrl["llm_completion_tokens"] == 300
    assert icrl["llm_cost_usd"] == pytest.approx(0.015)


def test_estimated_and_measured_are_labelled_and_killed_runs_marked(store, capsys, tmp_path):
    _, uri, _, _ = store
    code, out, err = report(capsys, uri, "--sweep", "sw-2", "--no-mlflow", out=tmp_path)
    assert code == 0, err
    lines = {ln.split()[4]: ln for ln in out.splitlines() if ln.startswith("attention")}
    assert " 0.800 " in lines["search"] and "1.12x " in lines["search"]  # measured: no marks
    assert "FINISHED" in lines["search"]
    assert " 1.100* " in lines["icrl"] and "KILLED (interrupted)" in lines["icrl"]
    assert "* estimated by the cost model (no GPU); not a measurement" in out
    md = (tmp_path / "report.md").read_text()
    assert re.search(r"\| +1\.100\* \|", md) and "KILLED (interrupted)" in md  # a cell


def test_unchecked_and_mixed_timings_are_never_compared(store):
    def cand(i, ms, timing, correct):
        return CandidateRecord("x", i, f"c{i}", "p", True, correct, ms, timing, None, 1.0)

    def run(rid, cands):
        params = {"kernel": "gemm", "planner": "search", "llm_model": "none"}
        return RunRecord(rid, rid, "FINISHED", 0, "1", params, candidates=cands)

    estimated = run("a", [cand(0, 0.3, "estimated", False), cand(1, 0.2, "estimated", False)])
    measured = run("b", [cand(0, 0.9, "measured", True)])
    rows = build_rows([estimated, measured])
    assert [r.timing for r in rows] == ["estimated", "measured"]
    est, meas = (cells(r) for r in rows)
    assert est[3] == "c1?" and est[5] == "0.200*"  # unchecked: flagged
    assert meas[3] == "c0" and meas[5] == "0.900"
    text = render_text(rows, Scope("u", "e", "1"))
    assert all(note in text for note in footnotes(rows)) and len(footnotes(rows)) == 3


def test_bad_experiment_names_the_valid_ones(store, capsys, tmp_path):
    _, uri, _, _ = store
    code, _, err = report(capsys, uri, experiment="nope", out=tmp_path)
    assert code == 2
    assert "unknown experiment 'nope'" in err and "synthetic" in err and "empty" in err


def test_bad_sweep_names_the_valid_ones(store, capsys, tmp_path):
    _, uri, _, _ = store
    code, _, err = report(capsys, uri, "--sweep", "nope", out=tmp_path)
    assert code == 2
    assert "unknown sweep 'nope'" in err
    assert "grid (id sw-1)" in err and "latest (id sw-2)" in err


def test_an_empty_experiment_or_a_missing_store_says_so(store, capsys, tmp_path):
    _, uri, _, _ = store
    code, _, err = report(capsys, uri, experiment="empty", out=tmp_path)
    assert code == 1 and "holds no Argus runs" in err
    missing = tmp_path / "missing.db"
    code, _, err = report(capsys, f"sqlite:///{missing}", out=tmp_path)
    assert code == 2 and "no MLflow store" in err and str(missing) in err
    assert not missing.exists()  # reading must not create an empty store


def test_plots_and_tables_are_written_and_logged_on_a_report_run(store, capsys, tmp_path):
    _, uri, client, exp = store
    code, _, err = report(capsys, uri, "--sweep", "grid", out=tmp_path)
    assert code == 0, err
    files = ("best_time_so_far.png", "reward.png", "report.md", "report.json")
    for name in files:
        assert (tmp_path / name).stat().st_size > 0
    for png in files[:2]:
        assert (tmp_path / png).read_bytes()[:8] == PNG_MAGIC
    (run,) = client.search_runs([exp], filter_string="tags.`argus.report` = '1'")
    assert run.data.tags["argus.sweep_id"] == "sw-1" and run.info.status == "FINISHED"
    assert {a.path for a in client.list_artifacts(run.info.run_id)} == set(files)
    sweep_parents = client.search_runs([exp], filter_string="tags.`argus.sweep_id` = 'sw-1'")
    for parent in (p for p in sweep_parents if "argus.report" not in p.data.tags):
        logged = {a.path for a in client.list_artifacts(parent.info.run_id, "report")}
        assert logged == {"report/best_time_so_far.png", "report/reward.png"}
    # the report run is not a result: --all still counts the six argus runs
    code, out, err = report(capsys, uri, "--all", "--format", "json", "--no-mlflow",
                            out=tmp_path)  # fmt: skip
    assert code == 0, err
    assert sum(len(r["runs"]) for r in json.loads(out)["rows"]) == 6


# ---------------------------------------------------------------------- a real sweep


@pytest.fixture(scope="module")
def real_sweep(tmp_path_factory):
    """`argus -m +kernel=gemm planner=search,icrl budget=2` on the CPU defaults, checked
    for correctness on one small shape, in its own working directory."""
    import os

    cwd = tmp_path_factory.mktemp("real_sweep")
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "HYDRA_FULL_ERROR": "0"}
    env.pop("TRITON_INTERPRET", None)
    args = ["-m", "+kernel=gemm", "planner=search,icrl", "budget=2", "progress=off"]
    args += ["evaluate.trials=1", "kernel.check_shapes=[{M:64,N:64,K:64}]"]
    proc = subprocess.run(
        [sys.executable, "-m", "argus_core.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return cwd


@pytest.mark.slow
def test_report_on_a_real_sweep_from_the_default_store(real_sweep, capsys, monkeypatch):
    from argus_core.cli import main as argus_main

    monkeypatch.chdir(real_sweep)  # the default store is the tracker's: ./.argus/mlflow.db
    assert argus_main(["report"]) == 0
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.startswith("gemm bf16 M=4096 N=4096 K=4096")]
    assert sorted(ln.split()[5] for ln in rows) == ["icrl", "search"]
    assert all(re.search(r" \d\.\d+\* ", ln) for ln in rows)  # the CPU defaults estimate
    assert "estimated by the cost model" in out
    report_dir = next(Path(real_sweep, ".argus", "reports").iterdir())
    assert (report_dir / "best_time_so_far.png").read_bytes()[:8] == PNG_MAGIC
    data = json.loads((report_dir / "report.json").read_text())
    for row in data["rows"]:
        assert row["best"]["correctness_checked"] and row["n_correct"] >= 1
        assert row["best"]["timing"] == "estimated" and row["best"]["ms"] > 0
        assert [r["status"] for r in row["runs"]] == ["FINISHED"]
