"""Which synthesized invariants caught which candidates, per run (issue #19): the run's
MLflow metrics and param in a real SQLite store, and the line the run's summary prints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from argus_core.spec import caught
from argus_core.types import Candidate, CandidateResult, Policy, VerifyReport

mlflow = pytest.importorskip("mlflow")
KERNEL = Path(__file__).parent / "pipeline" / "attention_kv_head_mod.py"
K_HEAD = "o <- k[o0, o1 // (HQ // HKV), k1, k0]"


def _result(cid: str, cexs: list[dict], status: str = "violated") -> CandidateResult:
    cand = Candidate(
        id=cid, kernel="attention", source="", entry="attention", policy=Policy({}, {})
    )
    res = CandidateResult(candidate=cand, failure="verify: x" if cexs else None)
    res.verify = VerifyReport(status=status, counterexamples=cexs, summary="x")
    return res


def test_catches_metrics_and_summary_from_results():
    head = {"assertion": "synth_dataflow", "invariant": K_HEAD, "message": "..."}
    old = {  # a record written before counterexamples named their invariant
        "assertion": "synth_dataflow",
        "message": "o[0, 1, 0, 0] should read v[0, 0, 0, 0] (v[o0, o1 // (HQ // HKV), k1, o3]) "
        "but reads v[0, 1, 0, 0]",
    }
    results = [
        _result("c001", [], status="verified"),
        _result("c002", [head, old]),
        _result("c003", [{"assertion": "dot_contract"}]),  # an implied assertion: not counted
        _result("c004", [head]),
    ]
    found = caught.catches(results)
    assert found == {K_HEAD: ["c002", "c004"], "v[o0, o1 // (HQ // HKV), k1, o3]": ["c002"]}
    m = caught.metrics(found)
    assert m["synth_caught"] == 2 and m["synth_caught_invariants"] == 2
    assert m["synth_caught.o.k"] == 2
    line = caught.summary_line(found)
    assert line.startswith("synthesized invariants caught 2 candidates: ")
    assert f"{K_HEAD} caught c002, c004" in line
    assert caught.summary_line({}) is None
    assert caught.metrics({}) == {"synth_caught": 0.0, "synth_caught_invariants": 0.0}
    # results.json's dicts give the same
    assert caught.catches([json.loads(r.to_json()) for r in results]) == found


@pytest.mark.slow
def test_run_logs_what_the_synthesized_invariants_caught(tmp_path, run_argus):
    uri = f"sqlite:///{tmp_path}/m.db"
    proc = run_argus(
        "+kernel=attention",
        "budget=1",
        f"kernel.source={KERNEL}",
        "+verifier.options.synthesize=true",
        "tracking=mlflow",
        f"tracking.uri={uri}",
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f"synthesized invariants caught 1 candidate: {K_HEAD} caught c001" in proc.stdout
    client = mlflow.MlflowClient(tracking_uri=uri)
    (exp,) = [e for e in client.search_experiments() if e.name == "argus"]
    parent = next(
        r
        for r in client.search_runs([exp.experiment_id])
        if "mlflow.parentRunId" not in r.data.tags
    )
    metrics, params = parent.data.metrics, parent.data.params
    assert metrics["synth_caught"] == 1
    assert metrics["synth_caught_invariants"] == 2  # the K and the V load's KV head
    assert metrics["synth_caught.o.k"] == 1 and metrics["synth_caught.o.v"] == 1
    assert json.loads(params[caught.PARAM])[K_HEAD] == ["c001"]
