"""The persistent attention probe (benchmarks/attn_persistent_probe.py) cross-compiles for
sm_90 on the CPU without spills, and its shared memory fits an H200 SM in both forms."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
probe = pytest.importorskip("attn_persistent_probe")

SMEM_PER_BLOCK = 232448  # the H200's opt-in shared memory per block


def test_the_probe_compiles_within_one_sm():
    for stages, direct_o, pingpong in ((2, False, False), (2, False, True), (3, True, True)):
        rep = probe.compile_config(128, stages, direct_o, pingpong)
        assert rep["spills"] == 0
        assert rep["shared_bytes"] <= SMEM_PER_BLOCK, (stages, direct_o, pingpong, rep)
    # a third stage with O through shared memory would not fit: why the O-regs form exists
    assert probe.compile_config(128, 3, False)["shared_bytes"] > SMEM_PER_BLOCK
