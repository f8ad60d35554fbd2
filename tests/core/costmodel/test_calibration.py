"""The calibrated cost model: fitted on the committed H200 measurements, it ranks held-out
candidates better than the analytic model, and every estimate names its error."""

from __future__ import annotations

import math

import pytest

from argus_core.costmodel import fit
from argus_core.costmodel.h200_fit import CALIBRATION
from argus_core.evaluate.costmodel import CALIBRATED, MODEL, estimate_time
from argus_core.types import CompileReport, Policy

SPEC, FAMILIES = fit.registry_objects()
# the files the committed calibration was fitted on (a later recording needs a refit)
RECORDS = fit.load_records([fit.RESULTS / name for name in CALIBRATION["sources"]])


def test_spearman_is_a_rank_correlation():
    assert fit.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert fit.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert fit.spearman([1, 2, 3], [5, 5, 5]) == 0.0  # no order to agree with
    assert fit.spearman([1, 1, 2], [1, 1, 2]) == pytest.approx(1.0)  # ties share a rank


def test_the_records_are_h200_measurements_with_compile_reports():
    assert len(RECORDS) >= 500
    assert {r.family for r in RECORDS} == {"gemm", "attention", "moe"}
    with_report = [r for r in RECORDS if r.report is not None]
    assert len(with_report) >= 150 and any(r.report.spills for r in with_report)


def test_the_committed_fit_is_what_the_records_give():
    """Refitting on the committed measurements reproduces the committed coefficients and
    held-out figures (nobody edited either by hand)."""
    cal = fit.fit(RECORDS, SPEC, FAMILIES)
    assert cal["records"] == CALIBRATION["records"]
    for name, value in CALIBRATION["coef"].items():
        assert cal["coef"][name] == pytest.approx(value, rel=1e-6, abs=1e-9), name
    assert cal["spearman"] == pytest.approx(CALIBRATION["spearman"])


def test_calibration_ranks_held_out_candidates_better_than_the_analytic_model():
    stats = fit.evaluate(RECORDS, SPEC, FAMILIES)
    assert stats["spearman_heldout"] > stats["spearman_analytic"] + 0.2
    assert stats["spearman_heldout_pooled"] >= 0.8  # across shapes
    assert stats["median_error"] < 0.3


def test_spills_and_occupancy_move_the_estimate():
    gemm = FAMILIES["gemm"]
    shape = {"M": 4096, "N": 4096, "K": 4096}
    p = Policy({"BM": 128, "BN": 256, "BK": 64, "GROUP": 8}, {"num_warps": 8, "num_stages": 3})
    clean = CompileReport(target="cuda:90", ok=True, registers=168, spills=0, shared_bytes=147456)
    spilled = CompileReport(
        target="cuda:90", ok=True, registers=255, spills=200, shared_bytes=147456
    )
    a = estimate_time(SPEC, gemm, shape, "bf16", p, clean)
    b = estimate_time(SPEC, gemm, shape, "bf16", p, spilled)
    assert a.ms != b.ms and a.estimated and b.estimated


def test_every_estimate_names_its_model_and_error():
    gemm = FAMILIES["gemm"]
    p = Policy({"BM": 128, "BN": 128, "BK": 64, "GROUP": 8}, {"num_warps": 8, "num_stages": 3})
    h200 = estimate_time(SPEC, gemm, {"M": 4096, "N": 4096, "K": 4096}, "bf16", p)
    assert h200.model.startswith(CALIBRATED) and "±" in h200.model and "Spearman" in h200.model
    assert math.isfinite(h200.ms) and h200.ms > 0
    mi300x = fit.registry_objects("mi300x")[0]
    amd = estimate_time(mi300x, gemm, {"M": 4096, "N": 4096, "K": 4096}, "bf16", p)
    assert amd.model == MODEL  # no MI300X measurements: the analytic model on its spec
