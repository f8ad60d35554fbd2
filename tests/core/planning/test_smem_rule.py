"""The shared-memory rule of the derived space (`space.pipelined_smem`) against what Triton
3.6 allocated on the H200 (benchmarks/results/2026-12-01-h200-space-17.json and the MoE
prefill and skinny GEMM spaces of 2026-12-03-h200-space-18a/-18b.json): policies it lets
through compiled, the ones it keeps out ran out of shared memory there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from argus_core.costmodel.fit import policy_of
from argus_core.planning.space import TMA_EXTRA_BYTES, pipelined_smem
from argus_core.plugin_manager import Registry, default_plugin_manager

REG = Registry(default_plugin_manager())
H200 = REG.get("backend", "h200").spec
RESULTS = Path(__file__).resolve().parents[3] / "benchmarks/results"
RECORDED = [
    RESULTS / name
    for name in (
        "2026-12-01-h200-space-17.json",
        "2026-12-03-h200-space-18a.json",
        "2026-12-03-h200-space-18b.json",
    )
]


def _recorded():
    for path in RECORDED:
        yield from _cases(json.loads(path.read_text()))


def _cases(data):
    for case in data["cases"]:
        fam = REG.get("kernel", case["family"])
        for t in case["tried"]:
            p = policy_of(case["family"], case["shape"], t["policy"])
            yield fam, p, t


@pytest.mark.parametrize(
    "family, tiles, compiler, allocated",
    [
        # a 128x256x64 GEMM, 3 stages, TMA + persistent: 213016 bytes allocated
        (
            "gemm",
            {"BM": 128, "BN": 256, "BK": 64},
            {"num_stages": 3, "tma": 1, "persistent": 1},
            213016,
        ),
        ("gemm", {"BM": 128, "BN": 256, "BK": 64}, {"num_stages": 3}, 147456),
        # MoE decode: BM 16, BN 64, BK 128, 3 stages: 73728 bytes (stages - 1 buffers)
        ("moe", {"BM": 16, "BN": 64, "BK": 128}, {"num_stages": 3}, 73728),
        # MoE prefill: BM 128 is a warpgroup MMA, every stage resident: 196608 bytes at 4
        # stages; 294912 asked (and refused) at BM 64, BN 64, BK 256, 3 stages
        ("moe", {"BM": 128, "BN": 128, "BK": 64}, {"num_stages": 4}, 196608),
        ("moe", {"BM": 64, "BN": 64, "BK": 256}, {"num_stages": 3}, 294912),
    ],
)
def test_the_rule_is_what_triton_allocated(family, tiles, compiler, allocated):
    need = pipelined_smem(REG.get("kernel", family), tiles, compiler)
    assert allocated <= need <= allocated + TMA_EXTRA_BYTES


def test_every_recorded_shared_memory_failure_is_outside_the_space():
    out_of_smem = ok = 0
    for fam, p, t in _recorded():
        need = pipelined_smem(fam, p.tiles, p.compiler)
        if "shared memory" in str(t.get("error", "")):
            out_of_smem += 1
            assert need > H200.lds_bytes_per_cu, (fam.name, p)
        elif t.get("compile", {}).get("shared_bytes"):
            ok += 1
            assert need <= H200.lds_bytes_per_cu, (fam.name, p)
    assert out_of_smem >= 100 and ok >= 1200
