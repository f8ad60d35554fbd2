"""The overlapping-column-tile probe (benchmarks/overlap_probe.py) cross-compiles for sm_90 on
the CPU: its TMA-store epilogue keeps the TMA store, the masked ones store from registers,
and none spills."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
probe = pytest.importorskip("overlap_probe")


def test_each_epilogue_cross_compiles_and_stores_as_named():
    from argus_plugins.backends.hopper.gluon import nvmma_desc_type

    bm, bn, bk, stages, warps = 128, 128, 64, 4, 4
    sig = {
        "a_desc": nvmma_desc_type("bf16", bm, bk),
        "b_desc": nvmma_desc_type("bf16", bk, bn),
        "c_desc": nvmma_desc_type("bf16", bm, bn),
        "c_ptr": "*bf16",
        **{s: "i32" for s in ("M", "N", "K")},
    }
    for label, epi in probe.EPILOGUES.items():
        consts = dict(BM=bm, BN=bn, BK=bk, STAGES=stages, GROUP=8, NUM_WARPS=warps)
        rep = probe.compile_report(
            probe.gemm_overlap, sig, {**consts, "EPI": epi, "NS": 112}, warps
        )
        ptx = rep.pop("ptx")
        assert rep["spills"] == 0, label
        tma_store = "cp.async.bulk.tensor.2d.global.shared" in ptx
        assert tma_store == (label == "dup"), label
        assert ("st.global" in ptx) == (label != "dup"), label
