"""What the calibrated cost model weighs (v3): the analytic model's time plus the effects it
misses, each computed from the target spec, the shape, the policy and the compile report.

- **waves and the tail**: the grid's programs over the SMs at the residency registers *and*
  shared memory allow; the last wave's fill (`wave_eff`), log waves, and for a persistent
  grid the imbalance of its static schedule;
- **occupancy**: resident warps per SM from the compile report's registers and shared
  memory (estimated from the tiles without one), and which of the two limits it; a
  persistent grid launches `persistent` programs per SM (Hopper's lowering), so no more
  of them reside, whatever registers and shared memory would allow (v3);
- **spills**: log(1 + spills) from the report;
- **pipeline depth vs the K loop**: log of the K-loop trip count (GEMM: K / BK per split;
  attention: the key blocks a query block visits, half of them under a causal mask), and
  the share of the loop the prologue fills (stages - 1 over the trip count);
- **tile efficiency vs the shape**: the share of the padded tile grid that is real output
  (a 128-row tile over 16 rows does 8x the MMA work), and the tile's arithmetic
  intensity (BM·BN / (BM + BN): operand bytes per flop);
- **bytes in flight** against what the device needs to stream at full rate (Little's law,
  `spec.mem_latency_ns`), capped at 1, and its log uncapped (v3: the nominal latency is
  the unloaded one, so a weight stream gains from more in flight past the cap, and a
  persistent grid's one program per SM can hold too little);
- the tile sizes, warps, stages and the Hopper options (`tma`, `persistent`,
  `warp_specialize`), and whether the problem is memory-bound (its intensity below the
  ridge point).

`expand` adds one indicator per family, every feature once more per family and once more
for memory-bound problems (their own slopes), and the squares and pairwise products of the
tile, option and occupancy features. Only arithmetic: no numpy, so the pipeline's estimate
stays cheap. See docs/costmodel.md.
"""

from __future__ import annotations

import math
from typing import Any

from argus_core.evaluate.dtypes import element_bytes
from argus_core.target import TargetSpec
from argus_core.types import CompileReport, Policy

VERSION = 3  # v3: a persistent grid's residency, log bytes in flight (v2 had neither)
# the features whose squares and pairwise products are weighed too (a quadratic model in
# them), and which get a slope of their own per family and for memory-bound problems
CORE = (
    "log_bm",
    "log_bn",
    "log_bk",
    "warps8",
    "stages",
    "tma",
    "persistent",
    "warp_specialize",
    "occupancy",
    "wave_eff",
    "log_waves",
    "inflight",
    "log_split",
    "spills",
    "log_kiters",
    "prologue",
    "tile_eff",
    "log_tile_ai",
    "smem_limited",
)


def _ceil(a: float, b: float) -> int:
    return int(math.ceil(a / b))


def _report(report: CompileReport | None, field: str) -> Any:
    return getattr(report, field, None) if report is not None and report.ok else None


def _grid(family: Any, shape: dict[str, int], policy: Policy) -> dict[str, float] | None:
    """(programs, K-loop trips, padded-tile efficiency) of the family's main kernel."""
    tiles = policy.tiles
    bm, bn = int(tiles["BM"]), int(tiles["BN"])
    problems = family.gemm_problems(shape, dict(tiles)) or []
    if problems:
        p = problems[0]
        m, n, k = int(p["M"]), int(p["N"]), int(p["K"])
        split = max(1, int(p.get("SPLIT", tiles.get("SPLIT", 1)) or 1))
        bk = int(tiles.get("BK", 32))
        programs = _ceil(m, bm) * _ceil(n, bn) * split
        kiters = _ceil(_ceil(k, bk), split)
        if family.name == "moe":  # rows are the routed slots per expert, padded to BM
            d = {k2: int(v) for k2, v in shape.items()}
            slots = d.get("T", m) * d.get("TOPK", 1)
            eff_m = min(1.0, slots / max(1, m))
        else:
            eff_m = m / (_ceil(m, bm) * bm)
        eff = eff_m * n / (_ceil(n, bn) * bn)
        return {"programs": programs, "kiters": kiters, "tile_eff": eff, "split": split}
    if "S" in shape:  # attention: query blocks per batch and head; BN the key loop's step
        s, skv = int(shape["S"]), int(shape.get("SKV", shape["S"]))
        programs = _ceil(s, bm) * int(shape.get("B", 1)) * int(shape.get("HQ", 1))
        kiters = _ceil(skv, bn)
        if int(shape.get("CAUSAL", 0)):
            kiters = max(1, kiters // 2)
        # a causal diagonal block does a full tile of work for half a tile of output
        eff = s / (_ceil(s, bm) * bm)
        if int(shape.get("CAUSAL", 0)):
            eff *= 1.0 - 0.5 * max(bm, bn) / max(1, skv)
        return {"programs": programs, "kiters": kiters, "tile_eff": eff, "split": 1}
    return None


def features(
    spec: TargetSpec,
    family: Any,
    shape: dict[str, int],
    dtype: str,
    policy: Policy,
    report: CompileReport | None,
    analytic_ms: float,
) -> dict[str, float]:
    """The calibration's features of one candidate (module docstring), expanded."""
    comp = policy.compiler
    e = element_bytes(dtype)
    out: dict[str, float] = {"bias": 1.0, "log_analytic": math.log(analytic_ms)}
    flops, nbytes = float(family.flops(shape)), float(family.bytes(shape, dtype))
    # constant within a case: the level of a new shape (fit.py's stage 2)
    out["log_flops"], out["log_bytes"] = math.log(max(flops, 1.0)), math.log(max(nbytes, 1.0))
    ridge = spec.peak(dtype) / (spec.hbm_tbps * 1e12)
    membound = float(flops / max(nbytes, 1.0) < ridge)
    warps = int(comp.get("num_warps", 4))
    stages = int(comp.get("num_stages", 2))
    spills = _report(report, "spills")
    tiles = policy.tiles
    grid = _grid(family, shape, policy) if "BM" in tiles and "BN" in tiles else None
    if grid is not None:
        bm, bn = int(tiles["BM"]), int(tiles["BN"])
        bk = int(tiles.get("BK", tiles.get("HEAD_D", 64)))
        regs = _report(report, "registers")
        if not regs:  # accumulator + operand fragments + overhead, per lane
            regs = int(bm * bn / (spec.wave_size * warps) + 48 + (bm + bn) * bk * e / 512)
        if spills is None:
            spills = max(0, regs - 255)
        smem = _report(report, "shared_bytes")
        if not smem:
            smem = (bm + bn) * bk * e * max(1, stages - 1)
        granule = 8 * _ceil(min(regs, 255), 8)
        by_regs = max(1, (spec.regs_per_lane // granule) * spec.simds_per_cu // warps)
        by_smem = max(1, spec.lds_bytes_per_cu // max(1, smem))
        per_sm = max(1, min(by_regs, by_smem, 32 // max(1, warps // 4)))
        slots = spec.cus * per_sm
        programs = grid["programs"]
        waves = programs / slots
        out["wave_eff"] = waves / math.ceil(waves) if waves > 0 else 1.0
        out["log_waves"] = math.log(max(waves, 1e-3))
        persist = int(comp.get("persistent") or 0)
        if persist:
            # `persistent` programs per SM loop over the tiles: no more reside, whatever
            # registers and shared memory would let (H200 MoE decode T16: persistent costs
            # 0-41%, the most where one program holds the fewest bytes in flight)
            per_sm = min(per_sm, persist)
            slots = spec.cus * per_sm
        out["occupancy"] = min(1.0, per_sm * warps / (spec.simds_per_cu * 16))
        out["smem_limited"] = float(by_smem < by_regs)
        out["log_split"] = math.log2(grid["split"])
        kiters = max(1, grid["kiters"])
        out["log_kiters"] = math.log2(kiters)
        out["prologue"] = min(1.0, max(0, stages - 1) / kiters)
        out["tile_eff"] = grid["tile_eff"]
        out["log_tile_ai"] = math.log2(bm * bn / (bm + bn))
        resident = min(programs, slots)
        inflight = resident * (bm + bn) * bk * e * max(1, stages - 1)
        need = spec.hbm_tbps * 1e12 * spec.mem_latency_ns * 1e-9
        out["inflight"] = min(1.0, inflight / need)
        out["log_inflight"] = math.log2(inflight / need)
        out["log_bm"], out["log_bn"] = math.log2(bm), math.log2(bn)
        out["log_bk"] = math.log2(bk) if "BK" in tiles else 0.0
    out["spills"] = math.log1p(float(spills or 0))
    out["warps8"] = float(warps >= 8)
    out["stages"] = float(stages)
    for name in ("tma", "persistent", "warp_specialize"):
        out[name] = float(bool(comp.get(name)))
    if grid is not None and out["persistent"]:
        # a persistent grid runs min(programs, slots) programs that stride over the tiles
        out["persist_imbalance"] = 1.0 - out["wave_eff"]
    return expand(out, family.name, membound)


def expand(base: dict[str, float], family: str, membound: float) -> dict[str, float]:
    """`base` with the family's indicator, every feature once more per family and once more
    for a memory-bound problem, and the squares and pairwise products of the CORE ones."""
    out = dict(base)
    tag = f"family_{family}"
    out[tag] = 1.0
    out["membound"] = membound
    for k, v in base.items():
        if k != "bias":
            out[f"{tag}*{k}"] = v
            if membound:
                out[f"membound*{k}"] = v
    core = [k for k in CORE if k in base]
    for i, a in enumerate(core):
        for b in core[i:]:
            out[f"{a}*{b}"] = base[a] * base[b]
            out[f"{tag}*{a}*{b}"] = base[a] * base[b]
    return out
