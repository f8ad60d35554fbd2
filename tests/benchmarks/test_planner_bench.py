"""benchmarks/planner_bench.py: the planners at equal budget against an oracle, on the CPU
(the cost model, labelled ESTIMATE) and replaying the recorded H200 space measurements."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).parents[2]
PLANNERS = {"icrl", "icrl-nomodel", "random", "grid", "pattern"}


def _run(tmp_path: Path, *args: str) -> tuple[str, dict]:
    out = tmp_path / "pb.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "planner_bench.py"), *args, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout, json.loads(out.read_text())


def _check_rows(data: dict, budget: int) -> None:
    for row in data["rows"]:
        assert set(row["planners"]) == PLANNERS
        for name, res in row["planners"].items():
            assert 1 <= res["tried"] <= budget, (row["case"], name)
            # nobody beats the exhaustive best of the space they move in
            if res["best_ms"] is not None:
                assert res["best_ms"] >= row["exhaustive_ms"] * (1 - 1e-9), (row["case"], name)
                assert res["gap"] >= -1e-9
            keys = [json.dumps(c["policy"], sort_keys=True) for c in res["candidates"]]
            assert len(keys) == len(set(keys)), (row["case"], name)  # no repeats


def test_dry_run_uses_the_cost_model_as_the_oracle(tmp_path):
    out, data = _run(tmp_path, "--dry-run", "--cases", "4096x4096x4096,decode T16", "--budget", "5")
    assert [r["case"] for r in data["rows"]] == ["gemm 4096x4096x4096", "moe Mixtral decode T16"]
    assert all(r["oracle"] == "ESTIMATE" for r in data["rows"])
    _check_rows(data, 5)
    assert "ESTIMATE: the cost model is the oracle" in out
    assert any(line.startswith("budget 5 candidates") for line in out.splitlines())


def test_the_recorded_h200_spaces_replay(tmp_path):
    # one case of each family (the whole 20-case replay is the benchmark's, ~35 s alone)
    cases = "4096x4096x4096,S4k D64,decode T64"
    out, data = _run(tmp_path, "--budget", "8", "--cases", cases)
    assert len(data["rows"]) == 3
    assert data["rows"] and all(r["oracle"] == "MEASURED" for r in data["rows"])
    assert data["meta"]["measured_from"]
    _check_rows(data, 8)
    gemm = next(r for r in data["rows"] if r["case"] == "gemm 4096x4096x4096")
    assert gemm["baselines"]  # the library's time from the same run, for the ratio
    assert "icrl: within 2% on" in out
