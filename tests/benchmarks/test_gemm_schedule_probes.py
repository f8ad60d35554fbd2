"""The GEMM schedule probes of 2026-12-05 (benchmarks/pingpong_gemm_probe.py: ping-pong and
the deferred epilogue; benchmarks/splitk_probe.py: split-K at M=128) cross-compile for sm_90
on the CPU, and their output says so (no spills, shared memory within one H200 SM)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
pingpong = pytest.importorskip("pingpong_gemm_probe")
splitk = pytest.importorskip("splitk_probe")

SMEM_PER_BLOCK = 232448  # the H200's opt-in shared memory per block


@pytest.mark.parametrize("probe", [pingpong, splitk], ids=["pingpong", "splitk"])
def test_the_largest_probe_configurations_cross_compile_without_spills(probe, capsys, monkeypatch):
    # the configurations with the most shared memory and registers (one of each kernel)
    monkeypatch.setattr(pingpong, "PP_CONFIGS", [(128, 128, 64, 5)])
    monkeypatch.setattr(pingpong, "DE_CONFIGS", [(128, 256, 64, 3, 8, 16)])
    monkeypatch.setattr(splitk, "SK_CONFIGS", {"128x4096x4096": [(128, 128, 128, 3, 4, 4)]})
    assert probe.compile_only() == 0
    reports = re.findall(r"'spills': (\d+), 'shared_bytes': (\d+)", capsys.readouterr().out)
    expected = (
        len(pingpong.PP_CONFIGS) + len(pingpong.DE_CONFIGS)
        if probe is pingpong
        else sum(len(v) for v in splitk.SK_CONFIGS.values())
    )
    assert len(reports) == expected
    for spills, smem in reports:
        assert int(spills) == 0 and 0 < int(smem) <= SMEM_PER_BLOCK


def test_split_k_refuses_a_grid_whose_ctas_cannot_all_be_resident():
    """The reduction spins on the tile's other CTAs: a grid larger than the SMs could hang."""
    with pytest.raises(ValueError, match="not all CTAs resident"):
        splitk.make_sk_runner((256, 4096, 4096), (128, 64, 64, 6, 2, 4), 132, None)
