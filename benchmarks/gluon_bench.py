"""Check and time the explicit-level (Gluon) kernels against the libraries, on one Hopper GPU.

    python benchmarks/gluon_bench.py              # every case (an H200: a few minutes)
    python benchmarks/gluon_bench.py --quick      # first configs, a few cases, short timing
    python benchmarks/gluon_bench.py --families attention [--consumers 1,2,2o,2p,2op,2s]
    python benchmarks/gluon_bench.py --families moe   # MoE prefill + decode (Mixtral)
    python benchmarks/gluon_bench.py --pipeline   # also explicit candidates through the
                                                  # pipeline's stages (the family's GPU check)
    python benchmarks/gluon_bench.py --dry-run    # no GPU: verify and cross-compile every
                                                  # config for sm_90/gfx942, static report

Kernels: the warp-specialized persistent GEMM (`plugins/kernels/gemm/kernel_explicit.py`:
a TMA producer warp, a ring of STAGES shared stages with ready/empty mbarriers, one or two
consumer warpgroups issuing wgmma, a TMA-store epilogue), lowered by Hopper's Gluon rule
table (`plugins/backends/hopper/gluon.py`). For each case and each tile configuration it
is verified (z3, when installed), lowered, launched on one CTA per SM (at most one per
tile), checked against the GEMM family's PyTorch reference at the timed shape (a wrong
kernel is never timed), and timed with `argus_core.evaluate.timing.measure` (do_bench
medians, CUDA-graph replay under 1 ms, inputs rotated past the L2) next to cuBLAS
(`torch.matmul`) timed the same way in the same process. The fastest correct
configuration is reported; the table is printed last; every figure goes to the JSON file
(`--out`, default `$OUT/gluon_bench.json` when $OUT is set). The attention cases (the
gpu_bench ones) run the FA3-style kernel (`plugins/kernels/attention/kernel_explicit.py`,
`c1`: two lockstep warpgroups, `c2`: two independent warpgroup partitions), each checked on
`o` and `lse` against the attention family's reference before it is timed next to SDPA
cuDNN and flash (`2o`: the next S overlapping this softmax, `p`: the two warpgroups taking
turns issuing their wgmmas). The MoE cases run the whole layer through the MoE family's
explicit launcher (`plugins/kernels/moe/kernel_explicit.py`: routing, the sync-free
alignment, the explicit grouped GEMM twice, SiLU·up, the fp32 combine), checked against the
family's reference by `measure` and timed next to `torch._grouped_mm` and the per-expert
loop; prefill also reports each stage's time, decode the share of the copy bandwidth
measured in the same process. Every configuration timed is first verified (z3) in the same
run; the GPU is warmed up (3 s of matmuls) before the first timing. `--dry-run` also
cross-compiles the CDNA3 kernels (GEMM, attention at every benchmark case, MoE) for gfx942.

Run on the lent GPU as `bash benchmarks/on_device.sh python benchmarks/gluon_bench.py`.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

# (num_warps, wgmmas in flight, constexprs): one consumer warpgroup at BN=128, two at BN=256
GEMM_CONFIGS = [
    (8, 1, dict(BM=128, BN=256, BK=64, STAGES=3, GROUP=8)),
    (4, 1, dict(BM=128, BN=128, BK=64, STAGES=4, GROUP=8)),
    (8, 0, dict(BM=128, BN=256, BK=64, STAGES=3, GROUP=8)),
    (8, 1, dict(BM=128, BN=256, BK=64, STAGES=3, GROUP=16)),
    (4, 1, dict(BM=128, BN=128, BK=64, STAGES=5, GROUP=8)),
    (4, 1, dict(BM=128, BN=64, BK=64, STAGES=6, GROUP=8)),
    # M <= 128: more, smaller tiles so that every SM streams part of the weight
    (4, 1, dict(BM=64, BN=128, BK=64, STAGES=8, GROUP=8)),
    (4, 1, dict(BM=64, BN=64, BK=64, STAGES=10, GROUP=8)),
    (4, 1, dict(BM=64, BN=256, BK=64, STAGES=4, GROUP=8)),
    # M <= 128, BK 128: half the K steps (barrier waits, TMA issues) of each stream
    (4, 1, dict(BM=64, BN=64, BK=128, STAGES=5, GROUP=8)),
    # 128x4096x4096: a sixth 32 KiB stage (cuBLAS keeps ~210 KB in flight there); +3% on the
    # H100 in two pdl_probe calls (2026-12-06)
    (4, 1, dict(BM=64, BN=64, BK=128, STAGES=6, GROUP=8)),
    (4, 1, dict(BM=128, BN=128, BK=128, STAGES=3, GROUP=8)),
    (4, 1, dict(BM=64, BN=128, BK=128, STAGES=4, GROUP=8)),
    # overlapping column tiles (`build(column_stride=1)`): NS "auto" is `column_tiles` of
    # each shape (112 at 128x14336: 128 tiles of 128x112, not 112 of 128x128; BN elsewhere),
    # the epilogue by masked stores from registers frees c_smem for a sixth stage
    (4, 1, dict(BM=128, BN=128, BK=64, STAGES=6, GROUP=8, NS="auto")),
    (4, 1, dict(BM=128, BN=128, BK=64, STAGES=5, GROUP=8, NS="auto")),
    (4, 1, dict(BM=64, BN=256, BK=64, STAGES=4, GROUP=8, NS="auto")),
    # the large shapes (NS = BN there): a fourth 48 KiB stage in c_smem's 64 KiB
    (8, 1, dict(BM=128, BN=256, BK=64, STAGES=4, GROUP=16, NS="auto")),
]
# the shape an "auto" NS is verified and cross-compiled at (a static run has no shape)
NS_SHAPE = (128, 14336, 132)
GEMM_SHAPES = [
    (8192, 8192, 8192),
    (4096, 4096, 4096),
    (4096, 14336, 4096),
    (4096, 4096, 14336),
    (16384, 7168, 2048),
    (128, 14336, 4096),
    (128, 4096, 4096),
]
TARGET = 1.02  # issue 15: >= 1.02x cuBLAS geomean
# MI300X (static only: cross-compiled for gfx942): (LDS stages, constexprs)
CDNA3_CONFIGS = [
    (2, dict(BM=128, BN=128, BK=64, GROUP=8)),
    (1, dict(BM=128, BN=128, BK=64, GROUP=8)),
    (1, dict(BM=256, BN=128, BK=64, GROUP=8)),
    (2, dict(BM=64, BN=128, BK=64, GROUP=8)),
]


def _kernel(num_warps: int, in_flight: int = 1, consts: dict[str, Any] | None = None):
    """The explicit GEMM; with overlapping column tiles where `consts` binds NS."""
    from argus_plugins.kernels.gemm.kernel_explicit import build

    return build(num_warps, in_flight, int("NS" in (consts or {})))


def _ns(consts: dict[str, Any], m: int, n: int, units: int) -> dict[str, int]:
    """`consts` with an "auto" NS resolved for an M x N output on `units` SMs."""
    if consts.get("NS") != "auto":
        return consts
    from argus_plugins.kernels.gemm.kernel_explicit import column_tiles

    return {**consts, "NS": column_tiles(m, n, consts["BM"], consts["BN"], units)}


@functools.cache
def _family(name: str) -> Any:
    """Kernel family `name` from the plugins (discovered once a process)."""
    from argus_core.plugin_manager import Registry, default_plugin_manager

    return Registry(default_plugin_manager()).get("kernel", name)


def _verify(kernel, consts) -> str:
    """The thread-level invariants and, where the family binds its reference spec to the
    kernel (issue #19), the spec's obligations too ("N+M spec": M from the reference)."""
    try:
        from argus_plugins.verifiers.smt.explicit_ops import verify_explicit
        from argus_plugins.verifiers.smt.explicit_spec import verify as verify_with_spec
    except ImportError as exc:  # the GPU image may lack z3
        return f"skipped ({exc.name} missing)"
    rep = verify_explicit(kernel, consts)
    try:
        from argus_core.spec.explicit import attach

        spec = _family(kernel.family).explicit_spec(kernel, {**kernel.consts, **consts})
    except Exception as exc:  # no spec (a plugin or torch missing): the invariants alone
        return f"{rep.status} ({rep.assertions} obligations, {rep.seconds:.2f}s; no spec: {exc})"
    if spec is None:
        return f"{rep.status} ({rep.assertions} obligations, {rep.seconds:.2f}s)"
    both = verify_with_spec(attach(kernel, spec), consts)
    extra = both.assertions - rep.assertions
    status = rep.status if both.status == "verified" else both.status
    return f"{status} ({rep.assertions}+{extra} spec, {both.seconds:.2f}s)"


def _static_row(config: str, kernel, consts: dict[str, int], rep) -> dict[str, Any]:
    """One row of the static report: verification, and the cross-compile's figures (on
    gfx942 MMA = v_mfma and LOAD = buffer loads, plus VGPRs, occupancy and LDS bytes)."""
    return {
        "config": config,
        "verify": _verify(kernel, consts),
        "ok": rep.ok,
        "hgmma": rep.instructions.get("hgmma") if rep.asm_kind == "sass" else rep.mma_count,
        "utmaldg": rep.instructions.get("utmaldg") if rep.asm_kind == "sass" else rep.buffer_loads,
        "registers": rep.registers,
        "spills": rep.spills,
        "shared": rep.shared_bytes,
        "occupancy": rep.occupancy,
        "error": rep.error[-300:],
        "seconds": round(rep.seconds, 2),
    }


def dry_run(
    families: frozenset[str] = frozenset({"gemm", "attention", "moe"}),
) -> list[dict[str, Any]]:
    """Verify and cross-compile every configuration: sm_90 for the Hopper kernels, gfx942
    for the CDNA3 ones (GEMM configs, every attention benchmark case, the MoE GEMM)."""
    from argus_plugins.backends.hopper.gluon import compile_explicit
    from argus_plugins.backends.mi300x.gluon import compile_explicit as compile_cdna3

    rows = []
    for warps, fly, cfg_consts in GEMM_CONFIGS if "gemm" in families else []:
        consts = _ns(cfg_consts, *NS_SHAPE)
        k = _kernel(warps, fly, consts)
        rows.append(_static_row(_cfg(warps, fly, consts), k, consts, compile_explicit(k, consts)))
    for d, causal in ((128, False), (128, True), (64, False)) if "attention" in families else []:
        for cons, stages, bm, bn in ATTN_CONFIGS[d]:
            if causal and "s" in cons:
                continue  # the persistent kernel is non-causal
            k = _abuild(d, causal, cons, stages)
            consts = {"BM": bm, "BN": bn}
            cfg = f"attn D{d}{' causal' if causal else ''} {_acfg(cons, stages, bm, bn)}"
            rows.append(_static_row(cfg, k, consts, compile_explicit(k, consts)))
    for warps, fly, spec in MOE_CONFIGS + MOE_DECODE_CONFIGS if "moe" in families else []:
        k = _moe_kernel(warps, fly, spec)
        cfg = "moe " + _moe_cfg(warps, fly, spec)
        rows.append(_static_row(cfg, k, k.consts, compile_explicit(k, k.consts)))
    from argus_plugins.kernels.gemm.kernel_explicit import build_cdna3

    for stages, consts in CDNA3_CONFIGS if "gemm" in families else []:
        k = build_cdna3(stages)
        cfg = "gfx942 lds" + str(stages) + " " + _cfg(4, 0, consts).split(" ", 2)[2]
        rows.append(_static_row(cfg, k, consts, compile_cdna3(k, consts)))
    if "attention" in families:
        from argus_plugins.kernels.attention.kernel_explicit import build_cdna3 as attn_cdna3

        for name, shape in ATTN_CASES:  # every benchmark case (its D and causality)
            k = attn_cdna3(shape["D"], bool(shape["CAUSAL"]))
            consts = dict(k.consts)
            cfg = f"gfx942 attn {name} {consts['BM']}x{consts['BN']}"
            rows.append(_static_row(cfg, k, consts, compile_cdna3(k, consts)))
    if "moe" in families:
        from argus_plugins.kernels.moe.kernel_explicit import build_cdna3 as moe_cdna3

        k = moe_cdna3()
        consts = dict(k.consts)
        cfg = f"gfx942 moe {consts['BM']}x{consts['BN']}x{consts['BK']}"
        rows.append(_static_row(cfg, k, consts, compile_cdna3(k, consts)))
    return rows


def _warm_gpu(seconds: float = 3.0) -> None:
    """Bf16 matmuls for `seconds` before the first timing: the first case timed on an idle
    GPU ran at low clocks (2026-12-01 11:00 UTC: cuBLAS 8192^3 at 1.62 ms, 1.40 ms when
    warm), which skews the first ratio."""
    import torch

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    end = time.time() + seconds
    while time.time() < end:
        for _ in range(10):
            a @ a
        torch.cuda.synchronize()
    del a
    torch.cuda.empty_cache()


def verify_only(families: frozenset[str]) -> list[dict[str, Any]]:
    """The GPU run's static step: every configuration it times verified (z3), without the
    cross-compiles of `dry_run` (the timed kernels are compiled by their launch)."""
    rows = []
    for warps, fly, cfg_consts in GEMM_CONFIGS if "gemm" in families else []:
        consts = _ns(cfg_consts, *NS_SHAPE)
        k = _kernel(warps, fly, consts)
        rows.append({"config": _cfg(warps, fly, consts), "verify": _verify(k, consts)})
    for d, causal in ((128, False), (128, True), (64, False)) if "attention" in families else []:
        for cons, stages, bm, bn in ATTN_CONFIGS[d]:
            cfg = f"attn D{d}{' causal' if causal else ''} {_acfg(cons, stages, bm, bn)}"
            k = _abuild(d, causal, cons, stages)
            rows.append({"config": cfg, "verify": _verify(k, {"BM": bm, "BN": bn})})
    for warps, fly, spec in MOE_CONFIGS + MOE_DECODE_CONFIGS if "moe" in families else []:
        k = _moe_kernel(warps, fly, spec)
        rows.append({"config": "moe " + _moe_cfg(warps, fly, spec), "verify": _verify(k, k.consts)})
    for r in rows:
        print(f"{r['config']}: {r['verify']}", flush=True)
    return rows


def _cfg(warps: int, fly: int, consts: dict[str, int]) -> str:
    names = {"BM": "", "BN": "x", "BK": "x", "STAGES": " s", "GROUP": " g", "NS": " ns"}
    return f"w{warps} f{fly} " + "".join(f"{names[k]}{v}" for k, v in consts.items())


class GluonGemm:
    """The explicit GEMM lowered for sm_90, launched by the GEMM family's launcher
    (`kernel_explicit.launcher`, the one the pipeline's GPU check uses) on a [M,K], b [K,N],
    c [M,N]: one CTA per SM, at most one per tile."""

    def __init__(self, warps: int, fly: int, consts: dict[str, int]):
        from argus_plugins.backends.hopper.gluon import lower
        from argus_plugins.kernels.gemm.kernel_explicit import launcher

        kernel = _kernel(warps, fly, consts).with_consts(**consts)
        self.run = launcher(kernel, lower(kernel))

    def __call__(self, inputs: dict[str, Any]) -> None:
        self.run(inputs)


# attention (the gpu_bench cases): shape, and (stages, BM, BN) configurations per head dim
ATTN_BASE = dict(B=4, HQ=32, HKV=32, S=4096, SKV=4096, D=128, CAUSAL=1, VARLEN=0)
ATTN_CASES = [
    ("B4 H32 S4k D128 causal", ATTN_BASE),
    ("B4 H32 S4k D128", {**ATTN_BASE, "CAUSAL": 0}),
    ("B1 H32 S16k D128 causal", {**ATTN_BASE, "B": 1, "S": 16384, "SKV": 16384}),
    ("GQA 32/8 S4k D128 causal", {**ATTN_BASE, "HKV": 8}),
    ("B4 H32 S4k D64", {**ATTN_BASE, "D": 64, "CAUSAL": 0}),
]
# (consumers, K/V stages, BM, BN): "1" = two lockstep warpgroups in one partition, "2" =
# two independent warpgroup partitions of BM/2 rows (one's softmax overlaps the other's
# wgmma), "2o" = "2" with the next S = QK^T issued with this PV and overlapping this softmax,
# "p" = the two warpgroups take turns issuing their wgmmas (FA3's ping-pong), "2s" = "2" on a
# persistent grid (one CTA per SM over the tiles, Q double-buffered; non-causal cases only)
ATTN_CONFIGS = {
    128: [
        ("1", 2, 128, 128),
        ("2", 2, 128, 128),
        ("2", 3, 128, 128),
        ("2o", 2, 128, 128),
        ("2p", 2, 128, 128),
        ("2p", 3, 128, 128),
        ("2op", 2, 128, 128),
        ("2s", 2, 128, 128),
    ],
    64: [
        ("1", 2, 128, 128),
        ("2", 2, 128, 256),
        ("2", 3, 128, 256),
        ("2o", 2, 128, 128),
        ("2p", 2, 128, 256),
        ("2p", 3, 128, 256),
        ("2op", 2, 128, 128),
        ("2s", 2, 128, 128),
        ("2s", 3, 128, 128),
        ("2s", 4, 128, 128),
    ],
}


def _acfg(cons: str, stages: int, bm: int, bn: int) -> str:
    return f"c{cons} s{stages} {bm}x{bn}"


def _aparse(cfg: str) -> tuple[str, int, int, int]:
    """(consumers, stages, BM, BN) of a config name `D<d> c<cons> s<stages> <BM>x<BN>`."""
    _, cons, stages, tile = cfg.split()
    bm, bn = tile.split("x")
    return cons[1:], int(stages[1:]), int(bm), int(bn)


def _abuild(d: int, causal: bool, cons: str, stages: int):
    """The attention kernel of form `cons`: the consumer count, then `o` (overlap), `p`
    (ping-pong), `s` (persistent: one CTA per SM over the tiles, non-causal only)."""
    from argus_plugins.kernels.attention.kernel_explicit import build, build_persistent

    if "s" in cons:
        return build_persistent(d, stages, pingpong="p" in cons)
    return build(d, causal, stages, int(cons[0]), overlap="o" in cons, pingpong="p" in cons)


class GluonAttention:
    """The explicit-level attention lowered for sm_90 and launched by the family's launcher
    (`kernel_explicit.launcher`) on its q, k, v, o, lse."""

    def __init__(self, d: int, causal: bool, cons: str, stages: int, bm: int, bn: int):
        from argus_plugins.backends.hopper.gluon import lower
        from argus_plugins.kernels.attention.kernel_explicit import launcher

        kernel = _abuild(d, causal, cons, stages).with_consts(BM=bm, BN=bn)
        self.run = launcher(kernel, lower(kernel))

    def __call__(self, inputs: dict[str, Any]) -> None:
        self.run(inputs)


def run_attention(quick: bool, rounds: int = 0, only: str = "") -> list[dict[str, Any]]:
    import itertools

    import torch

    from argus_core.evaluate.outputs import compare
    from argus_core.evaluate.timing import bench
    from argus_plugins.kernels.attention.family import AttentionFamily

    fam = AttentionFamily()
    rows = []
    cases = ATTN_CASES[:2] if quick else ATTN_CASES
    if only:  # comma-separated case names
        cases = [c for c in cases if c[0] in only.split(",")]
    for name, shape in cases:
        row: dict[str, Any] = {"case": f"attention {name}", "configs": {}}
        d, causal = shape["D"], bool(shape["CAUSAL"])
        sets = [fam.make_inputs(shape, "bf16", seed, "cuda") for seed in range(2)]
        ref = fam.reference(sets[0])
        atol, rtol = fam.tolerance("bf16")
        for cons, stages, bm, bn in ATTN_CONFIGS[d]:
            if causal and "s" in cons:
                continue  # the persistent kernel is non-causal
            cfg = f"D{d} {_acfg(cons, stages, bm, bn)}"
            try:
                run = GluonAttention(d, causal, cons, stages, bm, bn)
                run(sets[0])
                ok, err, _, why = compare(sets[0]["o"], ref["o"], atol, rtol)
                ok_l, err_l, _, why_l = compare(sets[0]["lse"], ref["lse"], atol, rtol)
                if not (ok and ok_l):  # a wrong kernel is never timed
                    row["configs"][cfg] = {"ms": None, "check": why if not ok else f"lse: {why_l}"}
                    print(
                        f"{row['case']} {cfg}: WRONG {row['configs'][cfg]['check']}",
                        file=sys.stderr,
                    )
                    continue
                cyc = itertools.cycle(sets)
                ms = bench(
                    lambda run=run, cyc=cyc: run(next(cyc)),
                    10 if quick else 25,
                    40 if quick else 100,
                )
                row["configs"][cfg] = {"ms": ms, "max_abs_err": err, "lse_max_abs_err": err_l}
                print(f"{row['case']} {cfg}: {ms:.4f} ms", flush=True)
            except Exception as exc:
                row["configs"][cfg] = {"ms": None, "error": traceback.format_exc()[-1500:]}
                print(f"{row['case']} {cfg}: {type(exc).__name__}: {exc}", file=sys.stderr)
        libs: dict[str, float] = {}
        for lib, fn in fam.baselines(sets[0]).items():
            try:
                libs[lib] = bench(fn, 25, 100)
            except Exception as exc:
                libs[lib] = float("nan")
                print(f"{lib}: {exc}", file=sys.stderr)
        row["baselines"] = libs
        good = {c: r for c, r in row["configs"].items() if r.get("ms")}
        lib = min((v for v in libs.values() if v == v), default=None)
        if good:
            best = min(good, key=lambda c: good[c]["ms"])
            ms = good[best]["ms"]
            flops = fam.flops(shape)
            row.update(
                best=best,
                ms=ms,
                tflops=flops / ms / 1e9,
                lib_ms=lib,
                ratio=(lib / ms) if lib else None,
            )
            if rounds and lib:  # the best config and the faster library, in turn
                fastest = min((k for k, v in libs.items() if v == v), key=libs.__getitem__)
                run = GluonAttention(d, causal, *_aparse(best))
                cyc = itertools.cycle(sets)
                lib_fn = fam.baselines(sets[0])[fastest]
                row["rounds"] = _turns(lambda run=run, cyc=cyc: run(next(cyc)), lib_fn, rounds)
                row["rounds"]["library"] = fastest
        else:
            row.update(
                best=None, ms=None, ratio=None, why=[str(r)[:300] for r in row["configs"].values()]
            )
        rows.append(row)
        print(f"{row['case']}: {row.get('best')} ratio {row.get('ratio')}", flush=True)
        del sets
        torch.cuda.empty_cache()
    return rows


def _alternate(
    fam: Any, ours: Callable[[dict[str, Any]], None], shape: dict[str, int], l2: int, rounds: int
) -> dict[str, Any]:
    """The best configuration and cuBLAS timed in turn, `rounds` times each (ours, cuBLAS,
    ours, ...), on the same input sets rotated past the L2: a ratio that a clock change
    between two timings (the GPU warming, throttling) cannot make, as one pair of timings
    can. Returns each round's milliseconds and the median of the per-round ratios."""
    import itertools

    from argus_core.evaluate.timing import prepare

    prep = prepare(fam, shape, "bf16", 0, l2)
    mine = itertools.cycle(prep.sets)
    name = next(iter(fam.baselines(prep.sets[0])))
    fns = itertools.cycle([fam.baselines(s)[name] for s in prep.sets])
    return _turns(lambda: ours(next(mine)), lambda: next(fns)(), rounds)


def _turns(ours: Callable[[], Any], lib: Callable[[], Any], rounds: int) -> dict[str, Any]:
    """`ours` and `lib` timed in turn `rounds` times each (`bench`: do_bench medians)."""
    import statistics

    from argus_core.evaluate.timing import bench

    ours_ms, lib_ms = [], []
    for _ in range(rounds):
        ours_ms.append(bench(ours, 25, 100))
        lib_ms.append(bench(lib, 25, 100))
    ratios = [b / a for a, b in zip(ours_ms, lib_ms)]
    return {
        "ours_ms": ours_ms,
        "lib_ms": lib_ms,
        "ratios": ratios,
        "ratio": statistics.median(ratios),
    }


def run_gpu(
    quick: bool, rounds: int = 0, only: str = "", configs_only: str = ""
) -> list[dict[str, Any]]:
    import torch

    from argus_core.evaluate.timing import measure
    from argus_plugins.kernels.gemm.family import GemmFamily

    fam = GemmFamily()
    l2 = 60 * 1024 * 1024
    rows = []
    configs = GEMM_CONFIGS[:2] if quick else GEMM_CONFIGS
    if configs_only:
        names = {c.strip() for c in configs_only.split(",")}
        unknown = names - {_cfg(*c) for c in GEMM_CONFIGS}
        if unknown:
            raise SystemExit(
                f"unknown GEMM configuration {sorted(unknown)[0]!r}; valid choices: "
                + ", ".join(_cfg(*c) for c in GEMM_CONFIGS)
            )
        configs = [c for c in GEMM_CONFIGS if _cfg(*c) in names]
    launchers: dict[str, GluonGemm] = {}
    shapes = GEMM_SHAPES[:2] + GEMM_SHAPES[-1:] if quick else GEMM_SHAPES
    if only:  # comma-separated MxNxK names
        shapes = [s for s in shapes if "x".join(map(str, s)) in only.split(",")]
    for m, n, k in shapes:
        shape = dict(M=m, N=n, K=k)
        row: dict[str, Any] = {"case": f"gemm {m}x{n}x{k}", "configs": {}}
        units = torch.cuda.get_device_properties(0).multi_processor_count
        keys: dict[str, str] = {}  # config name -> launcher key (its NS resolved)
        for warps, fly, cfg_consts in configs:
            name = _cfg(warps, fly, cfg_consts)  # "ns auto": NS picked per shape
            consts = _ns(cfg_consts, m, n, units)
            key = keys[name] = _cfg(warps, fly, consts)
            try:
                if key not in launchers:
                    launchers[key] = GluonGemm(warps, fly, consts)
                res = measure(
                    fam,
                    launchers[key],
                    shape,
                    "bf16",
                    0,
                    l2,
                    warmup_ms=10 if quick else 25,
                    rep_ms=40 if quick else 100,
                )
                row["configs"][name] = {**res, "consts": consts}
            except Exception as exc:  # one failing config does not stop the others
                row["configs"][name] = {"ms": None, "error": traceback.format_exc()[-1500:]}
                print(f"{row['case']} {name}: {type(exc).__name__}: {exc}", file=sys.stderr)
            torch.cuda.empty_cache()
        good = {c: r for c, r in row["configs"].items() if r.get("ms")}
        if good:
            best = min(good, key=lambda c: good[c]["ms"])
            r = good[best]
            lib = min(r["baselines"].values()) if r["baselines"] else None
            row.update(
                best=best,
                ms=r["ms"],
                tflops=r["tflops"],
                lib_ms=lib,
                ratio=(lib / r["ms"]) if lib else None,
            )
            if rounds and lib:
                row["rounds"] = _alternate(fam, launchers[keys[best]], shape, l2, rounds)
        else:
            row.update(
                best=None,
                ms=None,
                ratio=None,
                why=[
                    r.get("check", {}).get("why") or r.get("error", "")[-300:]
                    for r in row["configs"].values()
                ],
            )
        rows.append(row)
        print(f"{row['case']}: {row.get('best')} ratio {row.get('ratio')}", flush=True)
    return rows


# MoE (explicit grouped GEMM inside the family's explicit launcher): Mixtral prefill
# (case, preset); decode cases are also reported as a share of the copy bandwidth measured
# in the same process (issue 15: >= 85 % at T1..T64), with the decode tile configurations
MOE_CASES = [
    ("moe mixtral-prefill", "mixtral-prefill"),
    ("moe mixtral-decode1", "mixtral-decode1"),
    ("moe mixtral-decode16", "mixtral-decode16"),
    ("moe mixtral-decode64", "mixtral-decode64"),
]
# decode: a few routed rows per expert, so one 64-row block per expert hit and many narrow
# column tiles with deep rings that keep every SM streaming expert weights (H200, 2026-12-03:
# 55-77% of the copy bandwidth at T1..T64; the tile-level layer 91-100%, 2026-12-04)
MOE_DECODE_CONFIGS = [
    (4, 1, dict(BM=64, BN=128, BK=64, STAGES=6, GROUP=8)),
    (4, 1, dict(BM=64, BN=64, BK=64, STAGES=10, GROUP=8)),
    (4, 1, dict(BM=64, BN=128, BK=128, STAGES=4, GROUP=8)),
    # (s5 needed 237772 bytes of shared memory on the H200, over its 232448: s4 not yet run)
    (4, 1, dict(BM=64, BN=256, BK=64, STAGES=4, GROUP=8)),
]
DECODE_BW_TARGET = 0.85
# (num_warps, wgmmas in flight, constexprs)
# (the first run, 11:00 UTC: 6.73 ms g8, 7.14 ms w4 128x128x64 s4, 6.66 ms g16); `silu`: the
# up-projection with the gate/up + SiLU epilogue (`fuse_silu=1`, not yet run on a GPU)
MOE_CONFIGS = [
    (8, 1, dict(BM=128, BN=256, BK=64, STAGES=3, GROUP=8)),
    (8, 1, dict(BM=128, BN=256, BK=64, STAGES=3, GROUP=16)),
    (8, 1, dict(BM=128, BN=128, BK=64, STAGES=3, GROUP=8, silu=1)),
]
MOE_BASELINE = "torch._grouped_mm"  # issue 15's target: >= 1.0x this one


def _moe_kernel(warps: int, fly: int, spec: dict[str, int]):
    """The MoE kernel of a config: `spec` is its constexprs, plus `silu` 1 for the fused
    gate/up + SiLU up-projection."""
    from argus_plugins.kernels.moe.kernel_explicit import build

    consts = {k: v for k, v in spec.items() if k != "silu"}
    return build(warps, fly, bool(spec.get("silu"))).with_consts(**consts)


def _moe_cfg(warps: int, fly: int, spec: dict[str, int]) -> str:
    consts = {k: v for k, v in spec.items() if k != "silu"}
    return _cfg(warps, fly, consts) + (" silu" if spec.get("silu") else "")


def run_moe(quick: bool, only: str = "") -> list[dict[str, Any]]:
    """The MoE layer with the explicit grouped GEMM (`kernel_explicit.launcher`, the one
    the pipeline's GPU check uses), checked against the family's reference by `measure`
    (a wrong kernel is not timed) and timed next to the family's baselines."""
    import torch

    from argus_core.evaluate.timing import Prepared, measure
    from argus_plugins.backends.hopper.gluon import lower
    from argus_plugins.kernels.moe.family import PRESETS, MoEFamily
    from argus_plugins.kernels.moe.kernel_explicit import launcher

    fam = MoEFamily()
    l2 = int(torch.cuda.get_device_properties(0).L2_cache_size)
    rows = []
    copy_tbps = _copy_tbps()
    cases = [c for c in MOE_CASES if only in c[0]]
    for name, preset in cases[:1] if quick else cases:
        decode = "decode" in preset
        configs = MOE_DECODE_CONFIGS if decode else MOE_CONFIGS
        shape = dict(PRESETS[preset])
        row: dict[str, Any] = {"case": name, "shape": shape, "configs": {}}
        prep = Prepared(fam, shape, "bf16", 0, l2, "cuda")
        for warps, fly, spec in configs[:1] if quick else configs:
            cfg = _moe_cfg(warps, fly, spec)
            try:
                k = _moe_kernel(warps, fly, spec)
                res = measure(
                    fam, launcher(k, lower(k)), shape, "bf16", 0, l2,
                    warmup_ms=10 if quick else 25, rep_ms=40 if quick else 100, prepared=prep,
                )  # fmt: skip
                row["configs"][cfg] = res
                print(
                    f"{name} {cfg}: {res.get('ms')} ms {res.get('check')} graph replay "
                    f"{res.get('graph_replay')}",
                    flush=True,
                )
            except Exception as exc:
                row["configs"][cfg] = {"ms": None, "error": traceback.format_exc()[-1500:]}
                print(f"{name} {cfg}: {type(exc).__name__}: {exc}", file=sys.stderr)
            torch.cuda.empty_cache()
        good = {c: r for c, r in row["configs"].items() if r.get("ms")}
        if good:
            best = min(good, key=lambda c: good[c]["ms"])
            r = good[best]
            base = r.get("baselines") or {}
            lib = base.get(MOE_BASELINE) or (min(base.values()) if base else None)
            row.update(
                best=best, ms=r["ms"], tflops=r["tflops"], lib_ms=lib, baselines=base,
                ratio=(lib / r["ms"]) if lib else None, copy_tbps=copy_tbps,
                bw_share=fam.bytes(shape, "bf16") / r["ms"] / 1e9 / copy_tbps,
            )  # fmt: skip
        else:
            row.update(best=None, ms=None, ratio=None,
                       why=[str(r.get("check") or r.get("error", ""))[-300:] for r in row["configs"].values()])  # fmt: skip
        if decode and row.get("bw_share"):
            print(
                f"{name}: {row['bw_share']:.1%} of the copy bandwidth ({copy_tbps:.2f} TB/s; "
                f"target >= {DECODE_BW_TARGET:.0%})",
                flush=True,
            )
        if good and not decode:  # where the time goes: each stage, and the library's GEMMs
            try:
                from argus_plugins.kernels.moe.kernel_explicit import stage_times

                warps, fly, spec = next(c for c in configs if _moe_cfg(*c) == row["best"])
                k = _moe_kernel(warps, fly, spec)
                row["stages_ms"] = stage_times(k, lower(k), prep.sets[0])
                row["grouped_mm_stages_ms"] = _grouped_mm_stages(prep.sets[0])
                print(f"{name} stages (ms): {row['stages_ms']}", flush=True)
                print(f"{name} torch._grouped_mm stages (ms): {row['grouped_mm_stages_ms']}")
            except Exception:
                row["stages_error"] = traceback.format_exc()[-1500:]
                print(row["stages_error"], file=sys.stderr)
        rows.append(row)
        print(f"{name}: {row.get('best')} ratio vs {MOE_BASELINE} {row.get('ratio')}", flush=True)
        del prep
        torch.cuda.empty_cache()
    return rows


def _copy_tbps() -> float:
    """This GPU's device-to-device copy bandwidth now (TB/s, read + write), as gpu_bench's
    ceilings measure it: the reference for the MoE decode share."""
    import torch
    import triton.testing as tt

    x = torch.empty(1 << 30, device="cuda", dtype=torch.uint8)
    y = torch.empty_like(x)
    ms = tt.do_bench(lambda: y.copy_(x), return_mode="median")
    return 2 * (1 << 30) / ms / 1e9


def _grouped_mm_stages(inputs: dict[str, Any], reps: int = 5) -> dict[str, float]:
    """The baseline's two `torch._grouped_mm` calls timed alone (CUDA events, median of
    `reps`), on the same routed rows: the GEMM speed the explicit kernel competes with."""
    import statistics

    import torch
    import torch.nn.functional as F

    from argus_plugins.kernels.moe.routing import route

    x, w1, w2 = inputs["x"], inputs["w1"], inputs["w2"]
    inter = w2.shape[-1]
    ids, _ = route(inputs["router_logits"], int(inputs["topk"]), bool(inputs["renorm"]))
    flat = ids.flatten()
    order = torch.argsort(flat, stable=True)
    offs = torch.cumsum(torch.bincount(flat, minlength=w1.shape[0]), 0).to(torch.int32)
    xs = x[order // ids.shape[1]]
    times: dict[str, list[float]] = {"up-projection": [], "down-projection": []}
    for i in range(reps + 1):
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
        ev[0].record()
        h = torch._grouped_mm(xs, w1.transpose(1, 2), offs=offs)
        ev[1].record()
        act = F.silu(h[:, :inter]) * h[:, inter:]
        start = torch.cuda.Event(enable_timing=True)
        start.record()
        torch._grouped_mm(act, w2.transpose(1, 2), offs=offs)
        ev[2].record()
        torch.cuda.synchronize()
        if i:
            times["up-projection"].append(ev[0].elapsed_time(ev[1]))
            times["down-projection"].append(start.elapsed_time(ev[2]))
    return {k: statistics.median(v) for k, v in times.items()}


def run_pipeline() -> list[dict[str, Any]]:
    """Explicit-level candidates (`level: explicit`) through the pipeline's stages on this
    GPU (verify, lower, compile, the family's check on the device, timing): the path a
    planner's explicit candidates take in `argus ... backend=h200`."""
    from argus_core.config import compose
    from argus_core.pipeline import Stages
    from argus_core.plugin_manager import Registry, default_plugin_manager
    from argus_core.types import Candidate, Policy

    cases = [
        (
            "gemm",
            "kernel.shape={M:2048,N:2048,K:2048}",
            Policy(
                {"BM": 128, "BN": 256, "BK": 64, "STAGES": 3, "GROUP": 8},
                {"level": "explicit", "num_warps": 8, "mma_in_flight": 1},
            ),
        ),
        (
            "attention",
            "kernel.shape={B:2,HQ:8,HKV:8,S:1024,SKV:1024,D:128,CAUSAL:1,VARLEN:0}",
            Policy({"BM": 128, "BN": 128, "STAGES": 2}, {"level": "explicit"}),
        ),
        (
            "moe",
            "kernel.shape={T:256,E:8,TOPK:2,H:512,I:384,RENORM:1}",
            Policy(
                {"BM": 128, "BN": 256, "BK": 64, "STAGES": 3, "GROUP": 8},
                {"level": "explicit", "num_warps": 8},
            ),
        ),
    ]
    out = []
    for name, shape, policy in cases:
        try:
            cfg = compose(
                [f"+kernel={name}", "backend=h200", "tracking=none", "evaluate.correctness=device",
                 "kernel.check_shapes=[]", shape, "evaluate.trials=2"]
            )  # fmt: skip
            stages = Stages.from_config(cfg, Registry(default_plugin_manager()))
            fam = stages.family
            cand = Candidate("c1", name, fam.source(), fam.entry, policy)
            res, _ = stages.evaluate(cand, 0, None)
            row = {
                "case": f"pipeline {name} {policy.key()}",
                "ok": res.ok,
                "failure": res.failure,
                "verify": res.verify.status,
                "compile": res.compile.ok if res.compile else None,
                "checked": res.correctness.shapes if res.correctness else None,
                "ms": res.timing.ms if res.timing else None,
                "estimated": res.timing.estimated if res.timing else None,
                "speedup": res.timing.speedup if res.timing else None,
            }
        except Exception:
            row = {
                "case": f"pipeline {name}",
                "ok": False,
                "failure": traceback.format_exc()[-1500:],
            }
        print(row, flush=True)
        out.append(row)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--families", default="gemm,attention,moe", help="comma-separated subset")
    ap.add_argument("--out", default=None)
    ap.add_argument(
        "--moe-cases", default="", help="only the MoE cases whose name contains this (decode)"
    )
    ap.add_argument(
        "--consumers",
        default="1,2,2o,2p,2op,2s",
        help="attention configs to run, by consumer form (comma-separated subset of "
        "1,2,2o,2p,2op,2s)",
    )
    ap.add_argument(
        "--attn-cases", default="", help="only these attention cases (comma-separated names)"
    )
    ap.add_argument(
        "--gemm-shapes", default="", help="only these GEMM shapes (comma-separated MxNxK)"
    )
    ap.add_argument(
        "--gemm-configs",
        default="",
        help="only the GEMM configurations named here (comma-separated names as the table "
        "prints them, e.g. 'w8 f1 128x256x64 s3 g8,w4 f1 128x128x64 s6 g8 nsauto')",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=0,
        help="GEMM and attention: the best configuration and the (fastest) library then "
        "timed alternately this many times",
    )
    ap.add_argument(
        "--pipeline",
        action="store_true",
        help="also evaluate explicit candidates through the pipeline's stages on the GPU",
    )
    args = ap.parse_args()
    families = set(args.families.split(","))
    wanted = set(args.consumers.split(","))
    for d in ATTN_CONFIGS:
        ATTN_CONFIGS[d] = [c for c in ATTN_CONFIGS[d] if c[0] in wanted]
    unknown = families - {"gemm", "attention", "moe"}
    if unknown:
        ap.error(f"invalid family {sorted(unknown)[0]!r}; valid choices: gemm, attention, moe")
    sys.path.insert(0, str(ROOT))
    out = args.out or (
        os.path.join(os.environ["OUT"], "gluon_bench.json") if os.environ.get("OUT") else None
    )
    t0 = time.time()
    if args.dry_run:
        rows = dry_run(frozenset(families))
        result = {"mode": "dry-run (static, no GPU: estimates only)", "rows": rows}
        if out:
            Path(out).write_text(json.dumps(result, indent=2, default=str))
        print(
            f"\n{'config':44} {'verify':38} {'ok':3} {'MMA':>5} {'LOAD':>4} {'regs':>4} "
            f"{'spill':>5} {'smem':>7} {'occ':>3}"
        )
        for r in rows:
            print(
                f"{r['config']:44} {r['verify'][:38]:38} {str(r['ok'])[0]:3} {r['hgmma']!s:>5} "
                f"{r['utmaldg']!s:>4} {r['registers']!s:>4} {r['spills']!s:>5} {r['shared']!s:>7} "
                f"{r['occupancy']!s:>3}" + (f"  {r['error']}" if not r["ok"] else "")
            )
        print(
            "MMA: HGMMA (sm_90) or v_mfma (gfx942) in the code; LOAD: TMA or buffer loads; "
            "regs: per thread (gfx942: VGPRs + AGPRs); occ: waves per SIMD (gfx942)"
        )
        return 0 if all(r["ok"] for r in rows) else 1
    import torch

    if not torch.cuda.is_available() or torch.cuda.get_device_capability(0) != (9, 0):
        print("needs a Hopper GPU (sm_90); use --dry-run here", file=sys.stderr)
        return 2
    static = verify_only(frozenset(families))  # every timed config verified in this run
    _warm_gpu()
    bad = [r["config"] for r in static if not r["verify"].startswith("verified")]
    if bad:
        print(f"not verified: {bad}", file=sys.stderr)
    pipeline = run_pipeline() if args.pipeline else []
    rows = (
        run_gpu(args.quick, args.rounds, args.gemm_shapes, args.gemm_configs)
        if "gemm" in families
        else []
    )
    ratios = [r["ratio"] for r in rows if r.get("ratio")]
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None
    alt = [r["rounds"]["ratio"] for r in rows if r.get("rounds")]
    alt_geo = math.exp(sum(map(math.log, alt)) / len(alt)) if alt else None
    attn = (
        run_attention(args.quick, args.rounds, args.attn_cases) if "attention" in families else []
    )
    a_ratios = [r["ratio"] for r in attn if r.get("ratio")]
    a_geo = math.exp(sum(map(math.log, a_ratios)) / len(a_ratios)) if a_ratios else None
    rows += attn
    moe = run_moe(args.quick, args.moe_cases) if "moe" in families else []
    rows += moe
    result = {
        "device": torch.cuda.get_device_name(0),
        "static": static,
        "rows": rows,
        "geomean_vs_cublas": geo,
        "geomean_vs_cublas_alternated": alt_geo,
        "attention_geomean_vs_sdpa": a_geo,
        "pipeline": pipeline,
        "target": TARGET,
        "seconds": time.time() - t0,
    }
    if out:  # a file, or a folder ($OUT) to write gluon_bench.json into
        path = Path(out) / "gluon_bench.json" if Path(out).is_dir() else Path(out)
        path.write_text(json.dumps(result, indent=2, default=str))
    print(f"\nGluon explicit-level kernels vs the libraries on {result['device']} (bf16, medians)")
    print(f"{'case':34} {'best config':34} {'ms':>8} {'TFLOP/s':>8} {'lib ms':>9} {'ratio':>6}")
    for r in rows:
        if r.get("ms"):
            print(
                f"{r['case']:34} {r['best']:34} {r['ms']:8.4f} {r['tflops']:8.1f} "
                f"{r['lib_ms'] or float('nan'):9.4f} {r['ratio'] or float('nan'):6.3f}"
            )
        else:
            print(
                f"{r['case']:34} {'FAILED':34} {'; '.join(str(w)[:120] for w in r.get('why', []))}"
            )
    for r in moe:
        share = (
            f", {r['bw_share']:.1%} of copy bandwidth"
            if "decode" in r["case"] and r.get("bw_share")
            else ""
        )
        print(
            f"{r['case']}: ratio vs {MOE_BASELINE} {r.get('ratio')} (prefill target >= 1.0){share}"
        )
    for r in rows:
        if r.get("rounds"):
            rr = r["rounds"]
            print(
                f"{r['case']}: alternated x{len(rr['ratios'])}: ours "
                f"{' '.join(f'{v:.4f}' for v in rr['ours_ms'])} ms, library "
                f"{' '.join(f'{v:.4f}' for v in rr['lib_ms'])} ms, median ratio {rr['ratio']:.3f}"
            )
    print(f"GEMM geomean vs cuBLAS: {geo if geo is None else round(geo, 3)} (target >= {TARGET})")
    if alt_geo is not None:
        print(f"GEMM geomean vs cuBLAS, alternated rounds: {alt_geo:.3f} (target >= {TARGET})")
    print(
        f"attention geomean vs the faster of SDPA cuDNN/flash: "
        f"{a_geo if a_geo is None else round(a_geo, 3)} (target >= 1.00 per case; o and lse checked)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
