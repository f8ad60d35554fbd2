"""Roofline with occupancy: a first cost model for tiled kernels (docs/cost_model.md).

time = max(compute, memory) (+ the shorter one when nothing overlaps them) + launch.

compute: the tiles each CU runs (wave quantization: the busiest CU sets the pace), each
    padded to whole tiles, at the matrix-core peak (vector peak when the compile report
    shows no MFMA) times an efficiency: the tightest of LDS bandwidth per wave tile,
    instruction issue per main-loop iteration, and SIMDs left idle by small workgroups.
memory: bytes the tiling moves (A re-read for every column of tiles and B for every row,
    less what concurrently running tiles share through L2 under grouped ordering), plus
    scratch traffic of spilled registers, at an HBM bandwidth limited by the bytes in
    flight (Little's law).

Every figure is labelled estimated. The model reads the target's figures from the
`TargetSpec` it is given (each backend declares its own, `backend.spec`); its own constants
are the few below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from argus_core.costmodel.h200_fit import CALIBRATION as H200_CALIBRATION
from argus_core.evaluate.dtypes import element_bytes
from argus_core.target import TargetSpec
from argus_core.types import CompileReport, Policy, TimingReport

__all__ = ["analytic_time", "estimate_time", "features", "lds_bytes_estimate"]

MODEL = "roofline-occupancy v1"
CALIBRATED = "calibrated roofline-occupancy v1"
# fitted corrections per target name, with their held-out error and rank correlation
# (argus_core/costmodel/fit.py writes them; docs/costmodel.md); a target without one
# (the MI300X: no measurements recorded) gets the analytic model on its spec's figures
CALIBRATIONS: dict[str, dict[str, Any]] = {"h200": H200_CALIBRATION} if H200_CALIBRATION else {}
ITER_OVERHEAD_INSTR = 24  # loop control, address increments, masks, waitcnt, barrier
VECTOR_BYTES = 16  # widest per-lane load/store (dwordx4)
REG_OVERHEAD = 48  # addresses, masks, indices beside the tiles themselves
# bandwidth one CU/SM can draw, as a multiple of its fair share (HBM / CUs): on the H200
# a 32-program skinny GEMM streamed 1.4 TB/s, ~1.4x the share of 32 of 132 SMs
PER_CU_BW_SHARE = 1.5


@dataclass
class Tiling:
    bm: int
    bn: int
    bk: int
    group: int
    num_warps: int
    num_stages: int


def _ceil(a: float, b: float) -> int:
    return int(math.ceil(a / b))


def lds_bytes_estimate(policy: Policy, elem_bytes: int) -> int | None:
    """LDS a pipelined tile loop holds: one A and one B tile per buffered stage.

    Triton's AMD stream pipeliner keeps num_stages - 1 stages in LDS (at least one).
    None when the policy has no BM/BN/BK tiles.
    """
    t = policy.tiles
    if not all(k in t for k in ("BM", "BN", "BK")):
        return None
    stages = max(1, int(policy.compiler.get("num_stages", 2)) - 1)
    return (t["BM"] + t["BN"]) * t["BK"] * elem_bytes * stages


def _warp_tile(t: Tiling, min_mma: int = 16) -> tuple[float, float, float]:
    """(wave rows, wave cols, useful fraction) for the best split of warps over the tile.

    A wave tile narrower than one MFMA (16) is padded, so part of its work is waste.
    """
    best = (0.0, 0.0, 0.0, -1.0)
    wr = 1
    while wr <= t.num_warps:
        wm, wn = t.bm / wr, t.bn / (t.num_warps // wr)
        em, en = max(wm, min_mma), max(wn, min_mma)
        useful = (wm * wn) / (em * en)
        score = useful * em * en / (em + en)
        if score > best[3]:
            best = (em, en, useful, score)
        wr *= 2
    return best[0], best[1], best[2]


def _registers(t: Tiling, e: int, spec: TargetSpec) -> int:
    """Registers per lane: fp32 accumulator, operand fragments, next-stage prefetch."""
    wm, wn, _ = _warp_tile(t)
    lanes = spec.wave_size
    acc = t.bm * t.bn / (lanes * t.num_warps)
    operands = (wm + wn) * t.bk * e / (4 * lanes)
    prefetch = (t.bm + t.bn) * t.bk * e / (4 * lanes * t.num_warps) if t.num_stages > 1 else 0
    return int(acc + operands + prefetch + REG_OVERHEAD)


def _tiling(policy: Policy) -> Tiling | None:
    tiles, comp = policy.tiles, policy.compiler
    if "BM" not in tiles or "BN" not in tiles:
        return None
    return Tiling(
        bm=int(tiles["BM"]),
        bn=int(tiles["BN"]),
        bk=int(tiles.get("BK", 32)),
        group=max(1, int(tiles.get("GROUP", 1))),
        num_warps=int(comp.get("num_warps", 4)),
        num_stages=int(comp.get("num_stages", 2)),
    )


def _ab_traffic(m: int, n: int, k: int, t: Tiling, slots: int, e: int) -> float:
    """Bytes of A and B read from memory: per set of `slots` concurrently running tiles,
    each distinct row panel of A and column panel of B once (L2 serves the rest)."""
    tm, tn = _ceil(m, t.bm), _ceil(n, t.bn)
    tiles = tm * tn
    s = min(slots, tiles)
    # grouped ordering walks GROUP rows column by column; s consecutive tiles span:
    rows = min(tm, max(min(t.group, s), _ceil(s, tn)))
    cols = min(tn, _ceil(s, rows))
    per_set = (rows * t.bm + cols * t.bn) * k * e
    floor = (m * k + k * n) * e  # everything is read at least once
    return max(floor, per_set * tiles / s)


def _report_value(report: CompileReport | None, field: str) -> Any:
    return getattr(report, field, None) if report is not None and report.ok else None


def estimate_time(
    spec: TargetSpec,
    family: Any,
    shape: dict[str, int],
    dtype: str,
    policy: Policy,
    report: CompileReport | None = None,
) -> TimingReport:
    """Estimated time of one launch of `family`'s kernel at `shape` under `policy`: the
    roofline-occupancy model (`analytic_time`), corrected by the calibration fitted on
    recorded measurements of `spec`'s device where one exists (`CALIBRATIONS`, fitted by
    `python -m argus_core.costmodel.fit`). `model` names which, with the fit's held-out
    error beside the figure."""
    analytic = analytic_time(spec, family, shape, dtype, policy, report)
    cal = CALIBRATIONS.get(spec.name)
    if cal is None or not math.isfinite(analytic.ms) or family.name not in cal["families"]:
        return analytic
    from argus_core.costmodel import features as calibrated

    if cal.get("features") == calibrated.VERSION:  # argus_core/costmodel/features.py's
        feats = calibrated.features(spec, family, shape, dtype, policy, report, analytic.ms)
    else:
        feats = features(spec, family, shape, dtype, policy, report, analytic.ms)
    log_ms = sum(cal["coef"].get(k, 0.0) * v for k, v in feats.items())
    ms = math.exp(log_ms)
    flops, min_bytes = float(family.flops(shape)), float(family.bytes(shape, dtype))
    roofline_s = max(flops / spec.peak(dtype), min_bytes / (spec.hbm_tbps * 1e12))
    return TimingReport(
        ms=ms,
        estimated=True,
        shape=dict(shape),
        tflops=flops / (ms * 1e-3) / 1e12,
        gbps=min_bytes / (ms * 1e-3) / 1e9,
        pct_roofline=100.0 * roofline_s * 1e3 / ms,
        model=f"{CALIBRATED} {spec.name}: ±{cal['error_pct']:.0f}% (held-out median error"
        + (
            f"; ±{cal['error_pct_new_shape']:.0f}% on a shape it was not fitted on"
            if cal.get("error_pct_new_shape") is not None
            else ""
        )
        + f"), Spearman {cal['spearman']:.2f} on held-out candidates",
    )


def features(
    spec: TargetSpec,
    family: Any,
    shape: dict[str, int],
    dtype: str,
    policy: Policy,
    report: CompileReport | None,
    analytic_ms: float,
) -> dict[str, float]:
    """What the calibration weighs (docs/costmodel.md): the analytic model's log time; the
    wave quantization of the grid (the last wave's idle SMs); occupancy and spills (the
    compile report's, else estimated from the tiles); the tile shape and the compiler
    options; one indicator per family."""
    t = _tiling(policy)
    comp = policy.compiler
    e = element_bytes(dtype)
    out = {"bias": 1.0, "log_analytic": math.log(analytic_ms)}
    regs = _report_value(report, "registers")
    spills = _report_value(report, "spills")
    if t is not None:
        regs = regs or _registers(t, e, spec)
        if spills is None:
            spills = max(0, regs - spec.regs_per_lane // 2)
        problems = family.gemm_problems(shape, dict(policy.tiles)) or [shape]
        p = problems[0]
        if "M" in p:  # a GEMM's grid: output tiles (times split-K's ranges)
            tiles = _ceil(p["M"], t.bm) * _ceil(p["N"], t.bn) * max(1, int(p.get("SPLIT", 1)))
        else:  # attention's: query blocks per batch and head (BN is the inner loop's)
            tiles = _ceil(int(p.get("S", 1)), t.bm) * int(p.get("B", 1)) * int(p.get("HQ", 1))
        granule = 8 * _ceil(min(regs, 255), 8)
        per_cu = max(1, (spec.regs_per_lane // granule) * spec.simds_per_cu // t.num_warps)
        waves = tiles / (spec.cus * per_cu)
        out["wave_eff"] = waves / math.ceil(waves) if waves > 0 else 1.0
        out["log_waves"] = math.log(max(waves, 1e-3))
        out["log_split"] = math.log2(max(1, int(p.get("SPLIT", 1))))
        # bytes of A and B tiles in flight over the device (Little's law: memory-bound
        # kernels stream at the rate their resident programs' pipelines request)
        resident = min(tiles, spec.cus * per_cu)
        stages = max(1, t.num_stages - 1)
        out["log_inflight"] = math.log(resident * (t.bm + t.bn) * t.bk * e * stages)
        out["occupancy"] = min(1.0, per_cu * t.num_warps / (spec.simds_per_cu * 4))
        out["log_bm"], out["log_bn"] = math.log2(t.bm), math.log2(t.bn)
        out["log_bk"] = math.log2(t.bk) if "BK" in policy.tiles else 0.0
    out["spills"] = math.log1p(float(spills or 0))
    out["warps8"] = float(int(comp.get("num_warps", 4)) >= 8)
    out["stages"] = float(comp.get("num_stages", 2))
    for name in ("tma", "persistent", "warp_specialize"):
        out[name] = float(bool(comp.get(name)))
    return expand(out, family.name)


# the features whose squares and pairwise products the calibration also weighs, and which
# it weighs once more per family (a family's own slope)
_CORE = ("log_bm", "log_bn", "log_bk", "warps8", "stages", "tma", "persistent")
_CORE += ("warp_specialize", "occupancy", "wave_eff", "log_inflight", "log_split", "spills")


def expand(base: dict[str, float], family: str) -> dict[str, float]:
    """`base` with the family's indicator, every feature times it, and the squares and
    pairwise products of the `_CORE` features (a quadratic model in them)."""
    out = dict(base)
    tag = f"family_{family}"
    out[tag] = 1.0
    for k, v in base.items():
        if k != "bias":
            out[f"{tag}*{k}"] = v
    core = [k for k in _CORE if k in base]
    for i, a in enumerate(core):
        for b in core[i:]:
            out[f"{a}*{b}"] = base[a] * base[b]
    return out


def analytic_time(
    spec: TargetSpec,
    family: Any,
    shape: dict[str, int],
    dtype: str,
    policy: Policy,
    report: CompileReport | None = None,
) -> TimingReport:
    """The roofline-occupancy model's time of one launch of `family`'s kernel at `shape`
    under `policy`.

    Uses the compile report's registers, spills, occupancy, LDS and MFMA count where it
    has them, and estimates them from the tiles otherwise. An LDS need over the CU's
    capacity cannot launch: ms is infinite.
    """
    e = element_bytes(dtype)
    flops, min_bytes = float(family.flops(shape)), float(family.bytes(shape, dtype))
    mma = _report_value(report, "mma_count")
    peak = spec.peak(dtype, matrix=mma != 0)
    roofline_s = max(flops / spec.peak(dtype), min_bytes / (spec.hbm_tbps * 1e12))
    t = _tiling(policy)
    # a family whose work is several GEMM-like problems (MoE's grouped GEMMs) names them
    problems = family.gemm_problems(shape, dict(policy.tiles))
    if t is not None and problems:
        seconds = sum(_tiled_seconds(spec, p, e, t, peak, report) for p in problems)
    elif t is None or not all(k in shape for k in ("M", "N", "K")):
        seconds = _untiled_seconds(spec, flops, min_bytes, peak, report)
    else:
        seconds = _tiled_seconds(spec, shape, e, t, peak, report)
    ms = seconds * 1e3 + spec.launch_us * 1e-3
    return TimingReport(
        ms=ms,
        estimated=True,
        shape=dict(shape),
        tflops=flops / (ms * 1e-3) / 1e12,
        gbps=min_bytes / (ms * 1e-3) / 1e9,
        pct_roofline=100.0 * roofline_s * 1e3 / ms,
        model=MODEL,
    )


def _untiled_seconds(
    spec: TargetSpec, flops: float, nbytes: float, peak: float, report: CompileReport | None
) -> float:
    """Kernels without a BM x BN tiling: the plain roofline, slowed by low occupancy."""
    occ = _report_value(report, "occupancy") or spec.max_waves_per_simd
    hide = min(1.0, occ / 2)  # two waves per SIMD hide most latency
    compute = flops / (peak * spec.sustained_compute * hide)
    memory = nbytes / (spec.hbm_tbps * 1e12 * spec.sustained_bw * hide)
    return max(compute, memory)


def _tiled_seconds(
    spec: TargetSpec,
    shape: dict[str, int],
    e: int,
    t: Tiling,
    peak: float,
    report: CompileReport | None,
) -> float:
    m, n, k = int(shape["M"]), int(shape["N"]), int(shape["K"])
    # split-K: SPLIT programs per output tile, each over a K/SPLIT range
    split = max(1, int(shape.get("SPLIT", 1)))
    tiles = _ceil(m, t.bm) * _ceil(n, t.bn) * split
    k_iters = _ceil(_ceil(k, t.bk), split)

    # residency: registers (or the compiler's occupancy) and LDS bound workgroups per CU
    regs = _report_value(report, "registers") or _registers(t, e, spec)
    spills = _report_value(report, "spills")
    if spills is None:
        spills = max(0, regs - spec.regs_per_lane)
    granule = 8 * _ceil(min(regs, spec.regs_per_lane), 8)  # registers are allocated in 8s
    occ = _report_value(report, "occupancy") or max(
        1, min(spec.max_waves_per_simd, spec.regs_per_lane // granule)
    )
    lds = _report_value(report, "shared_bytes") or lds_bytes_estimate(
        Policy(tiles={"BM": t.bm, "BN": t.bn, "BK": t.bk}, compiler={"num_stages": t.num_stages}), e
    )
    if lds and lds > spec.lds_bytes_per_cu:
        return math.inf
    by_regs = max(1, occ * spec.simds_per_cu // t.num_warps)
    by_lds = spec.lds_bytes_per_cu // lds if lds else by_regs
    per_cu = min(by_regs, by_lds)
    tiles_per_cu = _ceil(tiles, spec.cus)  # the busiest CU sets the pace
    active = min(per_cu, tiles_per_cu)
    waves_per_simd = active * t.num_warps / spec.simds_per_cu

    # compute: padded tile work on the busiest CU at an efficiency from three bounds
    wm, wn, useful = _warp_tile(t)
    per_simd_clk = peak / (spec.cus * spec.simds_per_cu * spec.clock_ghz * 1e9)
    # LDS per main-loop iteration: the tile written once, each wave reading its fragments
    lds_iter = ((t.bm + t.bn) + t.num_warps * (wm + wn)) * t.bk * e
    intensity = 2 * t.bm * t.bn * t.bk / lds_iter  # flops per LDS byte
    needed = per_simd_clk * spec.simds_per_cu / spec.lds_bytes_per_clk
    lds_eff = min(1.0, intensity / needed)
    mfma_cycles = 2 * wm * wn * t.bk / per_simd_clk
    wave_bytes = (t.bm + t.bn) * t.bk * e / t.num_warps
    per_instr = spec.wave_size * VECTOR_BYTES
    mem_instr = 2 * _ceil(wave_bytes, per_instr) + _ceil((wm + wn) * t.bk * e, per_instr)
    other_cycles = (ITER_OVERHEAD_INSTR + mem_instr) * spec.valu_cycles
    # with two or more waves per SIMD one wave's MFMAs hide another's other instructions
    issue_eff = mfma_cycles / (
        max(mfma_cycles, other_cycles) if waves_per_simd >= 2 else mfma_cycles + other_cycles
    )
    simd_fill = min(1.0, waves_per_simd)
    eff = spec.sustained_compute * useful * min(lds_eff, issue_eff) * simd_fill
    tile_flops = 2.0 * t.bm * t.bn * k_iters * t.bk
    compute = tiles_per_cu * tile_flops / (peak / spec.cus * eff)

    # memory: tiled A/B traffic + C + spill round trips, at a latency-limited bandwidth
    slots = spec.cus * per_cu
    traffic = _ab_traffic(m, n, k, t, slots, e) + m * n * e
    if shape.get("GROUPED"):  # each row block multiplies its own B (an expert's weights)
        traffic = (m * k + _ceil(m, t.bm) * n * k + m * n) * e
    if split > 1:  # zero-fill, atomic adds and the cast read an fp32 workspace (+ a launch)
        traffic += m * n * 4 * (split + 2)
    traffic += spills * 4 * spec.wave_size * t.num_warps * 2 * k_iters * tiles
    running = min(tiles, spec.cus * active)  # programs resident at once
    in_flight = running * (t.bm + t.bn) * t.bk * e * max(1, t.num_stages - 1)
    bw = spec.hbm_tbps * 1e12
    bw *= spec.sustained_bw * min(1.0, in_flight / (bw * spec.mem_latency_ns * 1e-9))
    # one CU pulls at most PER_CU_BW_SHARE times its fair share of HBM bandwidth: a grid
    # that leaves CUs idle cannot stream at the full rate
    busy = min(spec.cus, tiles)
    bw = min(bw, spec.hbm_tbps * 1e12 * spec.sustained_bw * PER_CU_BW_SHARE * busy / spec.cus)
    memory = traffic / bw

    overlap = 1.0 if (t.num_stages >= 2 or waves_per_simd >= 2) else 0.5
    extra_launches = 2 * spec.launch_us * 1e-6 if split > 1 else 0.0  # the fill and the cast
    return max(compute, memory) + (1 - overlap) * min(compute, memory) + extra_launches
