"""The roofline-occupancy model ranks policies the way the hardware would."""

from __future__ import annotations

import math

import pytest

from argus_core.evaluate.costmodel import MODEL, estimate_time, lds_bytes_estimate
from argus_core.plugin_manager import Registry, default_plugin_manager
from argus_core.types import CompileReport, Policy

# the model takes a target's spec; the MI300X's is the one its backend declares
_REGISTRY = Registry(default_plugin_manager())
MI300X = _REGISTRY.get("backend", "mi300x").spec
GEMM = _REGISTRY.get("kernel", "gemm")
BIG = {"M": 4096, "N": 4096, "K": 4096}


def _policy(bm, bn, bk, warps, stages=2, group=8) -> Policy:
    return Policy(
        tiles={"BM": bm, "BN": bn, "BK": bk, "GROUP": group},
        compiler={"num_warps": warps, "num_stages": stages},
    )


def _ms(policy: Policy, shape=BIG, report: CompileReport | None = None, dtype="bf16") -> float:
    return estimate_time(MI300X, GEMM, shape, dtype, policy, report).ms


GOOD = [_policy(128, 128, 64, 4), _policy(128, 128, 64, 8), _policy(256, 256, 64, 8)]
BAD = [
    _policy(16, 16, 16, 4),  # tiny tiles: LDS- and issue-bound
    _policy(16, 16, 16, 1),
    _policy(128, 128, 64, 1),  # one warp: idle SIMDs and a register file overflow
    _policy(32, 32, 32, 4),
]


@pytest.mark.parametrize("shape", [BIG, {"M": 8192, "N": 8192, "K": 8192}])
def test_good_policies_rank_above_obviously_bad_ones(shape):
    worst_good = max(_ms(p, shape) for p in GOOD)
    for bad in BAD:
        assert _ms(bad, shape) > 1.5 * worst_good, bad.key()


def test_spills_from_the_compile_report_cost_time():
    p = _policy(128, 128, 64, 4)
    clean = CompileReport(target="hip:gfx942", ok=True, registers=200, spills=0, occupancy=2)
    spilled = CompileReport(target="hip:gfx942", ok=True, registers=512, spills=300, occupancy=1)
    assert _ms(p, report=spilled) > 2 * _ms(p, report=clean)


def test_no_mfma_in_the_report_means_vector_peak():
    p = _policy(128, 128, 64, 4)
    mfma = CompileReport(target="hip:gfx942", ok=True, mma_count=64, occupancy=2)
    none = CompileReport(target="hip:gfx942", ok=True, mma_count=0, occupancy=2)
    assert _ms(p, report=none) > 5 * _ms(p, report=mfma)


def test_wave_quantization_one_tile_past_a_full_wave_doubles_the_time():
    p = _policy(256, 256, 64, 8)
    full = {"M": 256 * 16, "N": 256 * 19, "K": 8192}  # 304 tiles: one per CU
    over = {"M": 256 * 16, "N": 256 * 19 + 1, "K": 8192}  # 320 tiles: a second, thin wave
    assert _ms(p, over) / _ms(p, full) == pytest.approx(2.0, rel=0.1)


def test_grouped_ordering_helps_a_memory_bound_shape():
    shape = {"M": 16384, "N": 16384, "K": 256}
    assert _ms(_policy(64, 64, 64, 4, group=1), shape) > _ms(
        _policy(64, 64, 64, 4, group=16), shape
    )


def test_lds_overflow_cannot_launch():
    p = _policy(256, 256, 128, 8, stages=3)
    assert lds_bytes_estimate(p, 2) == (256 + 256) * 128 * 2 * 2
    assert math.isinf(_ms(p))


def test_report_fields_are_consistent_and_labelled_estimated():
    r = estimate_time(MI300X, GEMM, BIG, "bf16", _policy(128, 128, 64, 4), None)
    assert r.estimated and r.model == MODEL == "roofline-occupancy v1"
    assert r.tflops == pytest.approx(GEMM.flops(BIG) / (r.ms * 1e-3) / 1e12)
    assert r.gbps == pytest.approx(GEMM.bytes(BIG, "bf16") / (r.ms * 1e-3) / 1e9)
    assert 0 < r.pct_roofline <= 100
    assert r.tflops < 1307.4


def test_policy_without_tiles_falls_back_to_the_plain_roofline():
    r = estimate_time(MI300X, GEMM, BIG, "bf16", Policy(compiler={"num_warps": 4}), None)
    roof_ms = GEMM.flops(BIG) / 1307.4e12 * 1e3
    assert roof_ms < r.ms < 3 * roof_ms
