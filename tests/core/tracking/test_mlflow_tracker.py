"""The MLflow listener against a real SQLite store, fired through a real pluggy manager."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

import pluggy
import pytest
from omegaconf import OmegaConf
from tracking_samples import LONG_VALUE, artifacts_for, make_results, make_run

import argus_core.tracking
from argus_core import hookspecs
from argus_core.plugin_manager import Registry
from argus_core.types import CandidateResult

mlflow = pytest.importorskip("mlflow")


def tracking_pm() -> pluggy.PluginManager:
    # only the tracking plugin: other built-ins are not what these tests are about
    pm = pluggy.PluginManager("argus")
    pm.add_hookspecs(hookspecs)
    pm.register(argus_core.tracking)
    return pm


def invoke(cfg, tmp: Path, results: list[CandidateResult], status: str = "FINISHED", run_id="r1"):
    """One invocation as the pipeline runs it: create, register, fire the events, unregister."""
    pm = tracking_pm()
    listener = Registry(pm).get("tracking", "mlflow").create(cfg, str(tmp / "run"))
    pm.register(listener)
    run = make_run(run_id)
    pm.hook.argus_on_run_start(run=run)
    for r in results:
        pm.hook.argus_on_candidate_result(run=run, result=r, artifacts=artifacts_for(r))
    pm.hook.argus_on_run_end(run=run, results=results, status=status)
    pm.unregister(listener)
    return listener


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A default-config invocation (uri null) run from a temporary working directory."""
    tmp = tmp_path_factory.mktemp("store")
    mp = pytest.MonkeyPatch()
    mp.chdir(tmp)
    try:
        cfg = OmegaConf.create(
            {
                "name": "mlflow",
                "uri": None,
                "experiment": "argus",
                "artifact_location": None,
                "run_name": None,
            }
        )
        results = make_results()
        listener = invoke(cfg, tmp, results)
    finally:
        mp.undo()
    client = mlflow.MlflowClient(tracking_uri=listener.settings.uri)
    return tmp, listener, client, results


def children(client, listener):
    runs = client.search_runs(
        [listener.experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{listener.parent_run_id}'",
    )
    return {r.data.params["candidate_id"]: r for r in runs}


def test_default_store_lives_under_cwd(store):
    tmp, listener, _, _ = store
    assert listener.error is None
    assert listener.settings.uri == f"sqlite:///{tmp.resolve()}/.argus/mlflow.db"
    assert (tmp / ".argus" / "mlflow.db").is_file()
    assert listener.settings.artifact_location == str(tmp.resolve() / ".argus" / "artifacts")


def test_one_parent_three_children(store):
    _, listener, client, _ = store
    runs = client.search_runs([listener.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert [p.info.run_id for p in parents] == [listener.parent_run_id]
    kids = children(client, listener)
    assert sorted(kids) == ["c000", "c001", "c002"]
    assert kids["c001"].info.run_name == "c001 BM128 BN128 BK64 GROUP8 | w4 s2"
    assert kids["c001"].info.artifact_uri.startswith(listener.settings.artifact_location)


def test_parent_params_tags_status_and_metrics(store):
    _, listener, client, _ = store
    parent = client.get_run(listener.parent_run_id)
    params, tags, metrics = parent.data.params, parent.data.tags, parent.data.metrics
    assert parent.info.status == "FINISHED"
    assert parent.info.run_name.startswith("gemm-baseline-")
    assert {
        k: params[k] for k in ("kernel", "backend", "planner", "budget", "seed", "llm_model")
    } == {
        "kernel": "gemm",
        "backend": "mi300x",
        "planner": "baseline",
        "budget": "3",
        "seed": "7",
        "llm_model": "replay/gemm-demo",
    }
    assert params["config.kernel.shape.M"] == "256"
    assert params["config.kernel.dtypes"] == '["bf16"]'
    assert params["config.tracking.uri"] == "null"
    note = params["config.planner.note"]
    assert len(note) == 6000 and note.endswith("...") and LONG_VALUE.startswith(note[:-3])
    assert tags["argus.version"] == argus_core.__version__
    assert tags["argus.host"] and tags["argus.run_id"] == "r1" and tags["argus.sweep"] == "demo"
    assert metrics["n_correct"] == 2 and metrics["n_failed"] == 1 and metrics["n_candidates"] == 3
    assert metrics["best_estimated_ms"] == pytest.approx(0.412)
    assert metrics["best_speedup"] == pytest.approx(0.5 / 0.412)
    assert "best_measured_ms" not in metrics
    summary = [a.path for a in client.list_artifacts(listener.parent_run_id)]
    assert summary == ["config.yaml", "summary.txt"]
    assert tags["argus.pid"] == str(os.getpid())
    exp = client.get_experiment(listener.experiment_id)
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"  # runs, not evals


def test_child_params_metrics_tags(store):
    _, listener, client, _ = store
    kids = children(client, listener)
    ok, failed = kids["c001"], kids["c002"]
    assert ok.data.params["policy.BM"] == "128" and ok.data.params["policy.num_warps"] == "4"
    assert ok.data.params["techniques"] == "tile-sweep"
    assert ok.data.params["parent_candidate"] == "c000"
    m = ok.data.metrics
    assert m["correct"] == 1.0 and m["registers"] == 129 and m["spills"] == 0
    assert m["shared_bytes"] == 32768 and m["occupancy"] == 2 and m["mma_count"] == 64
    assert m["estimated_ms"] == pytest.approx(0.412) and "measured_ms" not in m
    assert m["verify_seconds"] == 0.25 and m["compile_seconds"] == 1.5
    assert m["correctness_seconds"] == 2.0 and m["speedup"] == pytest.approx(0.5 / 0.412)
    assert "sgprs" not in m  # unknown numbers are left out, not logged as zero
    history = client.get_metric_history(ok.info.run_id, "estimated_ms")
    assert [h.step for h in history] == [1]
    assert ok.info.status == "FINISHED"
    assert ok.info.end_time - ok.info.start_time == 4000  # the candidate's own 4.0 s
    assert ok.data.tags["status"] == "ok" and ok.data.tags["verify_status"] == "verified"
    assert failed.info.status == "FAILED"
    assert failed.data.metrics["correct"] == 0.0 and "estimated_ms" not in failed.data.metrics
    assert failed.data.tags["status"] == "failed"
    assert failed.data.tags["failure_stage"] == "compile"
    assert failed.data.tags["failure_reason"] == "out of registers (VGPR 600 > 512)"


def test_child_artifacts(store, tmp_path):
    _, listener, client, results = store
    kids = children(client, listener)
    expected = {"dsl_source.py", "lowered_triton.py", "kernel.amdgcn", "result.json"}
    for cid, run in kids.items():
        names = {a.path for a in client.list_artifacts(run.info.run_id)}
        assert names == expected | ({"counterexamples.json"} if cid == "c002" else set())
    local = client.download_artifacts(kids["c001"].info.run_id, "result.json", str(tmp_path))
    assert json.loads(Path(local).read_text()) == json.loads(results[1].to_json())


def test_summary_lines_say_where_and_how(store):
    tmp, listener, _, _ = store
    uri = f"sqlite:///{tmp.resolve()}/.argus/mlflow.db"
    assert listener.summary_lines() == [
        f"MLflow store: {uri} (experiment 'argus', run {listener.parent_run_id})",
        f"Open the UI: mlflow ui --backend-store-uri {uri} --port 5000",
    ]


def test_killed_run_reuses_experiment(store):
    tmp, first, client, _ = store
    cfg = {"name": "mlflow", "uri": first.settings.uri, "run_name": "interrupted"}
    listener = invoke(cfg, tmp, make_results()[:1], status="KILLED", run_id="r2")
    assert listener.error is None and listener.experiment_id == first.experiment_id
    parent = client.get_run(listener.parent_run_id)
    assert parent.info.status == "KILLED" and parent.info.run_name == "interrupted"


def test_explicit_uri_and_experiment(tmp_path):
    uri = f"sqlite:///{tmp_path}/team.db"
    cfg = {
        "name": "mlflow",
        "uri": uri,
        "experiment": "moe-study",
        "artifact_location": str(tmp_path / "blobs"),
    }
    listener = invoke(cfg, tmp_path, make_results()[1:2])
    exp = mlflow.MlflowClient(tracking_uri=uri).get_experiment(listener.experiment_id)
    assert exp.name == "moe-study" and exp.artifact_location == str(tmp_path / "blobs")
    stored = {p.name for p in (tmp_path / "blobs").rglob("*") if p.is_file()}
    assert stored == {
        "config.yaml",
        "dsl_source.py",
        "lowered_triton.py",
        "kernel.amdgcn",
        "result.json",
        "summary.txt",
    }


@pytest.mark.parametrize(
    "uri", ["bogus-scheme://nowhere", "sqlite:///{tmp}/a-file/x.db", "http://127.0.0.1:1"]
)
def test_unreachable_store_does_not_raise(uri, tmp_path, monkeypatch, caplog):
    (tmp_path / "a-file").write_text("a file where the store's directory should be")
    uri = uri.format(tmp=tmp_path)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    with caplog.at_level(logging.WARNING, logger="argus.tracking"):
        listener = invoke({"name": "mlflow", "uri": uri}, tmp_path, make_results())
    assert listener.parent_run_id is None and listener.error.startswith("start: ")
    warnings = [r for r in caplog.records if r.name == "argus.tracking"]
    assert len(warnings) == 1 and uri in warnings[0].getMessage()
    assert listener.summary_lines()[0].startswith("MLflow tracking off: start: ")


def test_missing_mlflow_package_is_a_warning(tmp_path, monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # makes `import mlflow` fail
    with caplog.at_level(logging.WARNING, logger="argus.tracking"):
        listener = invoke({"name": "mlflow", "uri": f"sqlite:///{tmp_path}/m.db"}, tmp_path, [])
    assert "mlflow is not installed" in listener.error
    assert len([r for r in caplog.records if r.name == "argus.tracking"]) == 1
    assert "tracking=none" in listener.summary_lines()[0]
