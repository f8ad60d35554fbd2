"""`argus +kernel=gemm` end to end in a subprocess: DSL -> Triton -> gfx942 -> interpreter ->
MLflow. The documented main job, at a budget of 3 candidates to keep CI short."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gemm_run(tmp_path_factory):
    import os
    import subprocess
    import sys

    cwd = tmp_path_factory.mktemp("e2e")
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "HYDRA_FULL_ERROR": "0"}
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run(
        [sys.executable, "-m", "argus_core.cli", "+kernel=gemm", "budget=3"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    return cwd, proc


def test_main_job_succeeds_and_prints_the_summary(gemm_run):
    cwd, proc = gemm_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    for column in (
        "candidate",
        "policy",
        "verified?",
        "correct?",
        "VGPRs",
        "spills",
        "LDS bytes",
        "occupancy",
        "MFMA count",
        "est. ms*",
    ):
        assert column in out, f"summary lacks column {column!r}:\n{out}"
    assert "estimated" in out  # the footnote: no GPU here, times are estimates
    assert "mlflow ui --backend-store-uri sqlite:///" in out
    results = json.loads(next(Path(cwd, ".argus", "runs").glob("*/results.json")).read_text())
    assert len(results) == 3
    correct = [r for r in results if r["failure"] is None]
    assert correct, [r["failure"] for r in results]
    for r in correct:
        assert r["verify"]["status"] == "verified"  # verifier=smt is the default
        assert r["correctness"]["ok"] and r["correctness"]["runner"] == "interpret"
        assert r["correctness"]["shapes"], "correctness must run on the configured ragged shapes"
        assert r["compile"]["mma_count"] > 0 and r["compile"]["spills"] == 0
        assert r["timing"]["estimated"] is True and r["timing"]["ms"] > 0


def test_mlflow_holds_a_parent_and_one_child_per_candidate_with_artifacts(gemm_run):
    from mlflow import MlflowClient

    cwd, proc = gemm_run
    uri = f"sqlite:///{cwd}/.argus/mlflow.db"
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("argus")
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and len(children) == 3
    assert parents[0].info.status == "FINISHED"
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parents[0].info.run_id}
    for child in children:
        names = {a.path for a in client.list_artifacts(child.info.run_id)}
        assert {"dsl_source.py", "lowered_triton.py", "kernel.amdgcn"} <= names, names
        if child.data.metrics.get("correct") == 1.0:
            path = client.download_artifacts(child.info.run_id, "kernel.amdgcn", str(cwd))
            assert "v_mfma" in Path(path).read_text()
            assert "estimated_ms" in child.data.metrics


def test_a_violated_candidate_is_not_compiled_and_its_counterexample_is_logged(tmp_path, run_argus):
    from mlflow import MlflowClient

    planted = Path(__file__).parents[1] / "plugins/verifiers/smt/planted/wrong_k_offset.py"
    proc = run_argus("+kernel=gemm", "budget=1", f"kernel.source={planted}", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]  # no correct candidate
    assert "FAILED verify" in proc.stdout
    (result,) = json.loads(
        next(Path(tmp_path, ".argus", "runs").glob("*/results.json")).read_text()
    )
    assert result["failure"].startswith("verify: ")
    assert result["verify"]["status"] == "violated" and result["compile"] is None
    cex = result["verify"]["counterexamples"][0]
    assert cex["program_point"]["file"] == str(planted)
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/.argus/mlflow.db")
    exp = client.get_experiment_by_name("argus")
    (child,) = [
        r for r in client.search_runs([exp.experiment_id]) if "mlflow.parentRunId" in r.data.tags
    ]
    names = {a.path for a in client.list_artifacts(child.info.run_id)}
    assert "counterexamples.json" in names and "kernel.amdgcn" not in names


def test_interpret_backend_with_tracking_off(tmp_path, run_argus):
    proc = run_argus("+kernel=gemm", "backend=interpret", "tracking=none", "budget=2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "MLflow" not in proc.stdout and not (tmp_path / ".argus" / "mlflow.db").exists()
    results = json.loads(next(Path(tmp_path, ".argus", "runs").glob("*/results.json")).read_text())
    assert all(r["failure"] is None and r["correctness"]["ok"] for r in results)


@pytest.mark.parametrize(
    ("kernel", "dtype"),
    # each dtype once per family pair (the families' own tests run both dtypes in-process;
    # the four combinations cost a minute of CI)
    [("attention", "bf16"), ("moe", "fp16")],
)
def test_attention_and_moe_run_end_to_end_on_the_cpu_defaults(tmp_path, run_argus, kernel, dtype):
    args = [f"+kernel={kernel}", "budget=1", "tracking=none", f"kernel.dtype={dtype}"]
    proc = run_argus(*args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (r,) = json.loads(next(Path(tmp_path, ".argus", "runs").glob("*/results.json")).read_text())
    assert r["failure"] is None, r["failure"]
    assert r["verify"]["status"] == "verified", r["verify"]["summary"]
    assert r["correctness"]["ok"] and len(r["correctness"]["shapes"]) >= 3
    assert r["compile"]["mma_count"] > 0 and r["compile"]["spills"] == 0
    assert "est. ms*" in proc.stdout


def test_backend_auto_without_a_gpu_falls_back_to_the_cpu_defaults(tmp_path, run_argus):
    proc = run_argus("+kernel=gemm", "backend=auto", "budget=1", "tracking=none", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "backend=mi300x" in proc.stdout and "est. ms*" in proc.stdout
    (r,) = json.loads(next(Path(tmp_path, ".argus", "runs").glob("*/results.json")).read_text())
    assert r["compile"]["target"] == "hip:gfx942" and r["correctness"]["runner"] == "interpret"
