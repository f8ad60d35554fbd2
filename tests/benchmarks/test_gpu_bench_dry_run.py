"""The GPU benchmark's CPU dry run: every case traced and lowered, one policy per family
cross-compiled for sm_90 (the harness checked without a GPU)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).parents[2]


def test_dry_run_checks_every_case(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_bench.py"), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = proc.stdout
    assert "dry run: 20 cases checked" in out
    for family in ("gemm/gemm", "attention/attention", "moe/moe_up", "moe/moe_align"):
        assert f"compiled {family} for sm_90" in out
    assert "skinny 16x14336x4096" in out and "Mixtral decode T16" in out
    assert "Mixtral decode T1 " in out and "Mixtral decode T128" in out


def test_every_case_cross_compiles_for_mi300x_without_spills(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_bench.py"), "--mi300x-static"],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = [
        ln.split()
        for ln in proc.stdout.splitlines()
        if ln.startswith(("gemm ", "attention ", "moe "))
    ]
    assert len(rows) == 20 and "none fits" not in proc.stdout
    for row in rows:
        vgprs, spills, lds, occ, mfma, buffer_loads = (int(v) for v in row[-6:])
        assert spills == 0 and lds <= 64 * 1024 and mfma > 0 and vgprs > 0, row


def test_merge_reports_each_target_met_or_missed_by_how_much(tmp_path):
    """`--merge`: the recorded H200 runs' table and one verdict line per issue target,
    recomputed from the JSON (each case's best ratio against its own run's baselines)."""
    results = ROOT / "benchmarks" / "results"
    full = results / "2026-11-29-h200-b.json"
    extra = results / "2026-11-29-h200-b-extra.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "gpu_bench.py"),
            "--merge",
            str(full),
            str(extra),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = {ln.split(":")[0]: ln for ln in proc.stdout.splitlines() if ln.startswith("target ")}
    assert len(lines) == 6, proc.stdout
    assert "MISSED by" in lines["target attention vs fastest library"]
    # the verdict follows the numbers: recompute attention's geomean from the JSON
    cases = [c for r in (full, extra) for c in json.loads(r.read_text())["cases"]]
    best: dict[str, float] = {}
    for c in cases:
        if c["family"] == "attention" and c.get("best"):
            b = c["best"]
            best[c["name"]] = max(best.get(c["name"], 0), min(b["baselines"].values()) / b["ms"])
    gm = math.exp(sum(map(math.log, best.values())) / len(best))
    assert f"{gm:.2f}x" in lines["target attention vs fastest library"]
