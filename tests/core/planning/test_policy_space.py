"""The derived policy space: tile values from the shape, options from the backend, and
constraints from the target's spec; it holds the H200's measured best policies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from argus_core.planning.space import derive, tile_values
from argus_core.plugin_manager import Registry, default_plugin_manager
from argus_core.types import Policy

REG = Registry(default_plugin_manager())
RESULTS = Path(__file__).resolve().parents[3] / "benchmarks" / "results"
GRID = {"num_warps": [4, 8], "num_stages": [3, 4]}
ATTN = {"B": 4, "HQ": 32, "HKV": 32, "S": 4096, "SKV": 4096, "D": 128, "CAUSAL": 1, "VARLEN": 0}
GEMM = {"M": 4096, "N": 4096, "K": 4096}


def _space(family: str, shape: dict, backend: str = "h200", grid=GRID):
    tiles = {"gemm": {"BM": [64], "BN": [64], "BK": [32], "GROUP": [8]}}.get(
        family, {"BM": [64], "BN": [32], "HEAD_D": [128]}
    )
    return derive(REG.get("kernel", family), REG.get("backend", backend), shape, tiles, grid)


@pytest.mark.parametrize(
    "extent, values",
    [(4096, [64, 128, 256]), (128, [32, 64, 128]), (16, [16]), (1, [16]), (100, [32, 64, 128])],
)
def test_tile_values_fit_the_extent(extent, values):
    assert tile_values(extent) == values


def test_the_attention_space_offers_what_the_hand_grid_excluded():
    space = _space("attention", ATTN)
    assert 128 in space.tiles["BN"] and 128 in space.tiles["BM"]  # the grid had BN [32, 64]
    assert space.tiles["HEAD_D"] == [128]  # not derived: the config's list
    assert {"tma", "persistent", "warp_specialize"} <= set(space.compiler)
    best = Policy(
        {"BM": 128, "BN": 128, "HEAD_D": 128}, {"num_warps": 8, "num_stages": 3, "tma": 1}
    )
    assert space.contains(best)


def test_constraints_come_from_the_spec():
    space = _space("gemm", GEMM)
    spec = space.spec
    # 4 stages of (128+256)x128 16-bit tiles: over the 227 KiB an sm_90 block may use
    big = Policy({"BM": 128, "BN": 256, "BK": 128, "GROUP": 8}, {"num_warps": 8, "num_stages": 4})
    assert "shared memory" in space.why_not(big)
    # a 256x256 fp32 accumulator over 4 warps: 512 registers a lane
    acc = Policy({"BM": 256, "BN": 256, "BK": 32, "GROUP": 8}, {"num_warps": 4, "num_stages": 3})
    assert "registers per lane" in space.why_not(acc)
    # wgmma: 64 rows per warpgroup, so 8 warps need BM >= 128
    rows = Policy({"BM": 64, "BN": 128, "BK": 64, "GROUP": 8}, {"num_warps": 8, "num_stages": 3})
    assert "rows per warp" in space.why_not(rows) and spec.wave_size == 32
    ok = Policy({"BM": 128, "BN": 256, "BK": 64, "GROUP": 8}, {"num_warps": 8, "num_stages": 3})
    assert space.why_not(ok) is None
    points = list(space.points())
    assert points and all(space.ok(p) for p in points)
    assert len({p.key() for p in points}) == len(points) == space.size()


def test_mi300x_gets_no_hopper_switches_and_its_own_limits():
    grid = {"num_warps": [4, 8], "num_stages": [2], "waves_per_eu": [0, 2]}
    space = _space("gemm", GEMM, "mi300x", grid)
    assert not {"tma", "persistent", "warp_specialize"} & set(space.compiler)
    assert space.compiler["waves_per_eu"] == [0, 2]
    # 64 KiB of LDS: the backend's own check rejects what an H200 would take
    p = Policy({"BM": 256, "BN": 256, "BK": 128, "GROUP": 8}, {"num_warps": 8, "num_stages": 2})
    assert "LDS" in space.why_not(p)


def test_the_h200_measured_best_of_the_hand_lists_lies_in_the_space():
    """Every case's fastest policy in the recorded gpu_bench runs (hand-picked lists) is a
    point of the derived space or differs from one only in a KB rewrite's constant (SPLIT)."""
    from argus_core.costmodel.fit import policy_of

    data = json.loads((RESULTS / "2026-12-01-h200-redesign.json").read_text())
    checked = 0
    for case in data["cases"]:
        best = case["best"]
        policy = policy_of(case["family"], case["shape"], best["policy"])
        if "SPLIT" in policy.tiles:
            continue
        fam = case["family"]
        tiles = {k: [v] for k, v in policy.tiles.items()}
        space = derive(
            REG.get("kernel", fam), REG.get("backend", "h200"), case["shape"], tiles, GRID
        )
        assert space.contains(policy), (case["name"], policy, space.why_not(policy))
        checked += 1
    assert checked >= 2


def test_a_few_rows_still_get_the_warpgroup_mma_on_hopper():
    """MoE decode T64 (~16 slots an expert: BM's extent 16) ran fastest at BM 64 on the H200
    (2026-12-04, the warpgroup MMA's m64; BM 16 and 32 lower to mma.sync): the derived
    space offers BM 64 there, and on a target without wgmma it does not."""
    from argus_core.costmodel.fit import policy_of

    data = json.loads((RESULTS / "2026-12-04-h200-tile-moe-decode.json").read_text())
    case = next(c for c in data["cases"] if c["name"] == "Mixtral decode T64")
    best = policy_of("moe", case["shape"], case["best"]["policy"])
    assert best.tiles["BM"] == 64
    tiles = {k: [v] for k, v in best.tiles.items()}
    moe = REG.get("kernel", "moe")
    space = derive(moe, REG.get("backend", "h200"), case["shape"], tiles, GRID)
    assert space.tiles["BM"][-1] == 64 and max(space.tiles["BM"][:-1]) < 64
    assert space.contains(best), space.why_not(best)
    grid = {"num_warps": [4], "num_stages": [2]}
    amd = derive(moe, REG.get("backend", "mi300x"), case["shape"], tiles, grid)
    assert amd.tiles["BM"] == space.tiles["BM"][:-1]
    # a GEMM whose M fills the warpgroup MMA keeps its derived values
    assert 64 in _space("gemm", {"M": 128, "N": 4096, "K": 4096}).tiles["BM"]
    assert _space("gemm", {"M": 16, "N": 4096, "K": 4096}).tiles["BM"] == [16, 64]
