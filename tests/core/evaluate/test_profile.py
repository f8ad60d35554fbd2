"""Profiler feedback: roofline points, occupancy, proton's tree, and labels."""

from __future__ import annotations

import pytest

from argus_core.evaluate.profile import (
    ESTIMATE,
    MEASURED,
    feedback,
    kernel_times,
    occupancy,
    roofline_point,
    summary_line,
)
from argus_core.plugin_manager import Registry, default_plugin_manager
from argus_core.types import CompileReport, Policy, TimingReport

REG = Registry(default_plugin_manager())
H200 = REG.get("backend", "h200").spec


def test_a_big_gemm_is_compute_bound_and_a_skinny_one_memory_bound():
    big = roofline_point(2 * 4096**3, 3 * 4096 * 4096 * 2, 0.2, H200)
    assert big["bound"] == "compute" and big["intensity"] > big["ridge"]
    assert big["tflops"] == pytest.approx(2 * 4096**3 / 0.2e-3 / 1e12)
    skinny = roofline_point(2 * 16 * 4096 * 4096, 4096 * 4096 * 2, 0.0142, H200)
    assert skinny["bound"] == "memory"
    assert skinny["roof_tflops"] == pytest.approx(skinny["intensity"] * H200.hbm_tbps)
    measured = roofline_point(2 * 4096**3, 1e8, 0.2, H200, ceilings={"matmul_tflops": 770})
    assert measured["peak_tflops"] == 770 and measured["pct_roof"] > big["pct_roof"]
    with pytest.raises(ValueError, match="ms=0"):
        roofline_point(1.0, 1.0, 0, H200)


def test_occupancy_is_limited_by_registers_or_shared_memory():
    regs = occupancy(H200, 255, 16 * 1024, 4)
    assert regs["limited_by"] == "registers" and regs["waves_per_simd"] == 2
    smem = occupancy(H200, 64, 200 * 1024, 4)
    assert smem["limited_by"] == "shared memory" and smem["blocks_per_cu"] == 1
    assert occupancy(H200, None, None, 4) is None


def test_kernel_times_sum_the_leaves_of_a_proton_tree():
    tree = [
        {
            "frame": {"name": "ROOT"},
            "metrics": {"time (ns)": 300.0, "count": 3},
            "children": [
                {"frame": {"name": "gemm"}, "metrics": {"time (ns)": 200.0, "count": 2}},
                {"frame": {"name": "cast"}, "metrics": {"time (ns)": 100.0, "count": 1}},
            ],
        }
    ]
    assert kernel_times(tree) == {
        "gemm": {"ns": 200.0, "count": 2.0},
        "cast": {"ns": 100.0, "count": 1.0},
    }


def test_feedback_labels_estimates_and_measurements():
    gemm = REG.get("kernel", "gemm")
    shape = {"M": 4096, "N": 4096, "K": 4096}
    p = Policy({"BM": 128, "BN": 256, "BK": 64}, {"num_warps": 8})
    rep = CompileReport(target="cuda:90", ok=True, registers=168, spills=0, shared_bytes=147456)
    est = feedback(gemm, shape, "bf16", H200, TimingReport(ms=0.2, estimated=True), p, rep)
    got = feedback(gemm, shape, "bf16", H200, TimingReport(ms=0.2, estimated=False), p, rep)
    assert est["label"] == ESTIMATE and got["label"] == MEASURED
    # 8 warps of 168 registers, one block an SM: 2 of 16 warps a sub-partition
    assert got["bound"] == "compute" and got["occupancy"] == pytest.approx(2 / 16)
    line = summary_line(got)
    assert line.startswith("MEASURED 0.2 ms") and "compute-bound" in line and "0 spills" in line
