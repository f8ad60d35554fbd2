"""Check and time Argus's GEMM, attention and MoE kernels against the libraries, on one GPU.

    python benchmarks/gpu_bench.py                 # every case (an H200: a few minutes)
    python benchmarks/gpu_bench.py --families gemm --quick
    python benchmarks/gpu_bench.py --dry-run       # no GPU: list the cases, trace, lower and
                                                   # cross-compile one policy per family
    python benchmarks/gpu_bench.py --space --profile --time-limit 500
                                                   # every policy of each case's derived space
                                                   # (planner_bench's ground truth), the best
                                                   # under Triton's proton profiler
    python benchmarks/gpu_bench.py --space --dry-run  # no GPU: each case's space size
    python benchmarks/gpu_bench.py --space --time-limit 265 --exclude 4096x4096x4096
                                                   # the spaces not yet recorded, cheapest
                                                   # first; the JSON is rewritten every 16
                                                   # policies (a killed run keeps them)
    python benchmarks/gpu_bench.py --space --cases D64 --repeat 3
                                                   # three rounds over the space, each
                                                   # policy's median kept (a close race)

For each case the DSL kernel is traced and lowered at a few policies, launched through
Triton's JIT, checked against the family's PyTorch reference at the timed shape (a wrong
kernel is never timed), and timed with `triton.testing.do_bench` medians, inputs rotated
past the L2, next to the library baselines timed the same way in the same process
(`argus_core.evaluate.timing`). The fastest correct policy is reported. A table is printed
last; every figure goes to the JSON file (`--out`, default `$OUT/gpu_bench.json` when $OUT
is set).

Runs without hydra, mlflow, litellm or z3 (the GPU image lacks some of them).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

GEMM_BIG = [
    dict(BM=128, BN=256, BK=64, GROUP=8, w=8, s=3),
    # Hopper lowering options (not measured yet): TMA descriptors, + persistent, + warp spec.
    dict(BM=128, BN=256, BK=64, GROUP=8, w=8, s=3, tma=1),
    dict(BM=128, BN=256, BK=64, GROUP=8, w=8, s=3, tma=1, persist=1),
    dict(BM=128, BN=128, BK=64, GROUP=8, w=4, s=4, tma=1, ws=1),
    dict(BM=128, BN=128, BK=64, GROUP=8, w=4, s=4),
    dict(BM=256, BN=128, BK=64, GROUP=8, w=8, s=3),
    dict(BM=128, BN=128, BK=64, GROUP=8, w=8, s=4),
]
# M <= 128: a weight stream. Small-M tiles, and split-K (SPLIT: K cut into ranges summed
# atomically into an fp32 workspace, then cast; the GEMM family's two-kernel program)
GEMM_SKINNY = {
    16: [
        dict(BM=16, BN=64, BK=128, GROUP=1, w=4, s=4),
        dict(BM=16, BN=32, BK=128, GROUP=1, w=4, s=4),
        dict(BM=16, BN=128, BK=128, GROUP=1, w=4, s=4),
        dict(BM=16, BN=64, BK=128, SPLIT=2, w=4, s=4),
        dict(BM=16, BN=64, BK=128, SPLIT=4, w=4, s=4),
        dict(BM=16, BN=128, BK=128, SPLIT=4, w=4, s=4),
        dict(BM=16, BN=128, BK=64, SPLIT=8, w=4, s=4),
    ],
    128: [
        dict(BM=128, BN=64, BK=64, GROUP=8, w=4, s=4),
        dict(BM=128, BN=128, BK=64, GROUP=8, w=8, s=3),
        dict(BM=64, BN=128, BK=64, GROUP=8, w=4, s=4),
        dict(BM=128, BN=128, BK=64, SPLIT=2, w=8, s=3),
        dict(BM=128, BN=64, BK=64, SPLIT=2, w=4, s=4),
        dict(BM=128, BN=64, BK=64, SPLIT=4, w=4, s=4),
        dict(BM=128, BN=128, BK=64, SPLIT=4, w=8, s=3),
        dict(BM=64, BN=64, BK=128, GROUP=8, w=4, s=4),
        dict(BM=64, BN=64, BK=64, SPLIT=2, w=4, s=4),
        dict(BM=128, BN=32, BK=128, GROUP=8, w=4, s=4),
        dict(BM=64, BN=128, BK=128, GROUP=8, w=4, s=3),
        dict(BM=64, BN=256, BK=64, GROUP=8, w=8, s=3),
        dict(BM=64, BN=64, BK=64, GROUP=8, w=4, s=5),
    ],
}
ATTN = [
    dict(BM=128, BN=128, w=8, s=3),
    dict(BM=128, BN=128, w=8, s=3, tma=1),  # every tile through TMA (Kᵀ: the K box, permuted)
    dict(BM=128, BN=64, w=8, s=3),
    dict(BM=128, BN=128, w=8, s=2),
    dict(BM=64, BN=64, w=4, s=3),
    dict(BM=128, BN=32, w=4, s=3),
    dict(BM=128, BN=32, w=4, s=4),
    dict(BM=128, BN=64, w=4, s=3),
    dict(BM=128, BN=128, w=8, s=4),
    dict(BM=128, BN=64, w=8, s=4),
    dict(BM=128, BN=32, w=8, s=3),
    dict(BM=64, BN=128, w=4, s=3),
]
# --sweep: every combination (the planner's job, done here by brute force)
ATTN_SWEEP = [
    dict(BM=bm, BN=bn, w=w, s=st)
    for bm in (64, 128)
    for bn in (32, 64, 128)
    for w in (4, 8)
    for st in (2, 3, 4)
]
MOE_FIXED = dict(BT=32, BE=128, BS=256, BH=128)
MOE_PREFILL = [
    dict(BM=64, BN=128, BK=64, w=4, s=3),
    dict(BM=128, BN=128, BK=64, w=8, s=3, tma=1),  # expert weights through TMA
    dict(BM=128, BN=128, BK=64, w=8, s=3),
    dict(BM=64, BN=64, BK=64, w=4, s=4),
    dict(BM=128, BN=128, BK=64, w=8, s=4),
]
MOE_DECODE = [
    dict(BM=16, BN=64, BK=128, w=4, s=4),
    dict(BM=16, BN=128, BK=64, w=4, s=3),
    dict(BM=16, BN=32, BK=128, w=2, s=4),
    # the best of the recorded spaces (2026-12-03): decode T16 and T64
    dict(BM=16, BN=64, BK=128, w=4, s=3),
    dict(BM=32, BN=128, BK=64, w=4, s=4),
    # one token: two experts, so the down-projection's N / BN programs are the grid's width
    dict(BM=16, BN=32, BK=128, w=4, s=4),
    # T64 (~16 slots an expert): wider N tiles re-read each block's gathered rows fewer times
    dict(BM=32, BN=256, BK=64, w=8, s=3),
    dict(BM=32, BN=256, BK=64, w=4, s=3),
    dict(BM=64, BN=128, BK=64, w=4, s=3),
]


@dataclass
class Case:
    family: str
    name: str
    shape: dict[str, int]
    policies: list[dict[str, int]]
    note: str = ""
    result: dict[str, Any] = field(default_factory=dict)


def cases() -> list[Case]:
    out: list[Case] = []
    for m, n, k in [
        (8192, 8192, 8192),
        (4096, 4096, 4096),
        (4096, 14336, 4096),
        (4096, 4096, 14336),
        (16384, 7168, 2048),
    ]:
        out.append(Case("gemm", f"{m}x{n}x{k}", dict(M=m, N=n, K=k), GEMM_BIG))
    for m in (16, 128):
        for n in (14336, 4096):
            out.append(Case("gemm", f"skinny {m}x{n}x4096", dict(M=m, N=n, K=4096), GEMM_SKINNY[m]))
    attn = dict(B=4, HQ=32, HKV=32, S=4096, SKV=4096, D=128, CAUSAL=1, VARLEN=0)
    out += [
        Case("attention", "B4 H32 S4k D128 causal", attn, ATTN),
        Case("attention", "B4 H32 S4k D128", {**attn, "CAUSAL": 0}, ATTN),
        Case(
            "attention", "B1 H32 S16k D128 causal", {**attn, "B": 1, "S": 16384, "SKV": 16384}, ATTN
        ),
        Case("attention", "GQA 32/8 S4k D128 causal", {**attn, "HKV": 8}, ATTN),
        Case("attention", "B4 H32 S4k D64", {**attn, "D": 64, "CAUSAL": 0}, ATTN),
    ]
    mixtral = dict(E=8, TOPK=2, H=4096, I=14336, RENORM=1)
    out += [
        Case("moe", "Mixtral prefill T4096", {**mixtral, "T": 4096}, MOE_PREFILL),
        Case(
            "moe",
            "DeepSeek E64 top6 T4096",
            dict(T=4096, E=64, TOPK=6, H=2048, I=1408, RENORM=0),
            MOE_PREFILL,
        ),
        Case("moe", "Mixtral decode T1", {**mixtral, "T": 1}, MOE_DECODE, "decode"),
        Case("moe", "Mixtral decode T16", {**mixtral, "T": 16}, MOE_DECODE, "decode"),
        Case("moe", "Mixtral decode T64", {**mixtral, "T": 64}, MOE_DECODE, "decode"),
        # a serving batch of 128: 32 slots per expert, so a 16- or 32-row block streams
        # most experts' weights two or three times, a 64-row one once
        Case("moe", "Mixtral decode T128", {**mixtral, "T": 128}, MOE_DECODE, "decode"),
    ]
    return out


# ------------------------------------------------------------------------------- kernels


def family_of(name: str) -> Any:
    from argus_plugins.kernels.attention.family import AttentionFamily
    from argus_plugins.kernels.gemm.family import GemmFamily
    from argus_plugins.kernels.moe.family import MoEFamily

    return {"gemm": GemmFamily, "attention": AttentionFamily, "moe": MoEFamily}[name]()


def backend_named(name: str) -> Any:
    """The registered backend `name` (h200: what this benchmark times; mi300x: static)."""
    from argus_core.plugin_manager import Registry, default_plugin_manager

    return Registry(default_plugin_manager()).get("backend", name)


def lower_all(
    family: Any, tiles: dict[str, int], options: dict[str, Any] | None = None, backend: Any = None
) -> list[Any]:
    """The family's kernels traced and lowered (bf16) by `backend` (default h200) for these
    tiles (policy constants) and the policy's options (the backend's lowering reads its own:
    Hopper's tma, warp_specialize, persistent)."""
    from argus_core.plugin_manager import Registry, default_plugin_manager
    from argus_core.types import Policy

    backend = backend or backend_named("h200")
    fe = Registry(default_plugin_manager()).get("dsl", "tile")
    out = []
    # GEMM: split-K policies run two kernels; MoE always its five
    for entry in family.entries_for(tiles):
        ir = fe.parse(family.source(), entry, str(family.source_path))
        names = {c.name for c in ir.constexprs}
        policy = Policy({k: v for k, v in tiles.items() if k in names}, dict(options or {}))
        out.append(backend.lower(ir, policy, {"dtype": "bf16"}))
    return out


# policy keys that are not tile constants: warps, stages, and the Hopper lowering options
POLICY_KEYS = {"w": "num_warps", "s": "num_stages", "tma": "tma", "ws": "warp_specialize"}
POLICY_KEYS["persist"] = "persistent"


def split(case: Case, p: dict[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """(tiles, options): the case's tile constants, and num_warps/num_stages plus any
    lowering option (tma, warp_specialize, persistent) of the policy."""
    tiles = {k: v for k, v in p.items() if k not in POLICY_KEYS}
    if case.family == "attention":
        tiles["HEAD_D"] = case.shape["D"]
    if case.family == "moe":
        tiles = {**MOE_FIXED, **tiles}
    return tiles, {POLICY_KEYS[k]: v for k, v in p.items() if k in POLICY_KEYS}


def runner(family: Any, kernels: list[Any], tiles: dict[str, int], compiler: dict[str, int]) -> Any:
    """run_on(inputs): launch the kernel (or the family's program of kernels)."""
    from argus_core.evaluate.launch import launch_args, load_kernel
    from argus_core.types import Policy

    fns = {k.name: (k, load_kernel(k)) for k in kernels}
    # what Triton's launch takes: the options the lowering read are in the source already
    launch_opts = backend_named("h200").compiler_options(Policy(tiles, compiler))

    def launch(name: str, tensors: dict[str, Any]) -> None:
        lowered, fn = fns[name]
        args, grid = launch_args(lowered, tensors, tiles)
        fn[grid](*args, **launch_opts)

    def run_on(inputs: dict[str, Any]) -> None:
        if len(kernels) > 1:
            family.program(launch, inputs, tiles)
        else:
            launch(kernels[0].name, inputs)

    return run_on


def run_case(case: Case, l2_bytes: int, rep_ms: float) -> dict[str, Any]:
    """Every policy of the case, checked and timed; the baselines are timed once (with the
    first policy that ran correctly) and shared by the rest."""
    import torch

    from argus_core.evaluate.timing import measure

    family = family_of(case.family)
    tried: list[dict[str, Any]] = []
    base: dict[str, float] = {}
    for p in case.policies:
        tiles, compiler = split(case, p)
        entry: dict[str, Any] = {"policy": p}
        try:
            kernels = lower_all(family, tiles, compiler)
            run_on = runner(family, kernels, tiles, compiler)
            entry.update(
                measure(
                    family,
                    run_on,
                    case.shape,
                    "bf16",
                    0,
                    l2_bytes,
                    warmup_ms=10,
                    rep_ms=rep_ms,
                    with_baselines=not base,  # the baselines do not depend on our policy
                )
            )
            base = base or dict(entry.get("baselines") or {})
            entry["baselines"] = base
        except Exception as exc:  # one policy's failure (compile, launch, OOM) is recorded
            entry["error"] = f"{type(exc).__name__}: {exc}"[:500]
            entry["trace"] = traceback.format_exc(limit=-3)[-1500:]
        torch.cuda.empty_cache()
        tried.append(entry)
    ok = [t for t in tried if t.get("ms")]
    best = min(ok, key=lambda t: t["ms"]) if ok else None
    if best is not None:
        best["baselines"] = base
    return {"tried": tried, "best": best}


# ------------------------------------------------------------------ the derived space
# --space: every policy of each case's derived space (argus_core.planning.space), compiled in
# parallel processes (each launches it once at the case's shape, so Triton's disk cache holds
# it), then timed one by one in this process: the exhaustive ground truth of
# benchmarks/planner_bench.py and the calibrated cost model's measurements.
SPACE_KEYS = {"num_warps": "w", "num_stages": "s", "tma": "tma", "warp_specialize": "ws"}
SPACE_KEYS["persistent"] = "persist"


def space_policies(case: Case, backend_name: str = "h200") -> list[dict[str, int]]:
    """The case's derived space in this file's policy form (tiles, w, s, tma, persist, ws)."""
    import yaml

    from argus_core.planning.space import derive

    kernel = yaml.safe_load((ROOT / "conf" / "kernel" / f"{case.family}.yaml").read_text())
    grid = yaml.safe_load((ROOT / "conf" / "backend" / f"{backend_name}.yaml").read_text())
    tiles = dict(kernel["tiles"])
    if case.family == "attention":  # the head dimension the case runs (split() sets it)
        tiles["HEAD_D"] = [int(case.shape["D"])]
    space = derive(
        family_of(case.family),
        backend_named(backend_name),
        case.shape,
        tiles,
        grid["policy_grid"],
    )
    out = []
    for p in space.points():
        tiles = dict(p.tiles)
        if case.family == "attention":
            tiles.pop("HEAD_D", None)  # split() sets it to the case's D
        out.append({**tiles, **{SPACE_KEYS[k]: v for k, v in p.compiler.items()}})
    return out


def _warm(job: tuple[str, dict[str, int], dict[str, int]]) -> dict[str, Any]:
    """In a worker process: lower, load and launch one policy once at the case's shape (so
    the disk cache holds its compiled kernels); the compiled kernels' registers, spills and
    shared memory, and a digest of what runs (policies the lowering treats alike share it)."""
    import hashlib

    import torch

    from argus_core.evaluate.launch import launch_args, load_kernel
    from argus_core.types import Policy

    family_name, shape, p = job
    case = Case(family_name, "", shape, [p])
    tiles, compiler = split(case, p)
    try:
        family = family_of(family_name)
        kernels = lower_all(family, tiles, compiler)
        opts = backend_named("h200").compiler_options(Policy(tiles, compiler))
        digest = hashlib.sha256(
            repr(
                ([k.source for k in kernels], sorted(opts.items()), sorted(tiles.items()))
            ).encode()
        ).hexdigest()[:16]
        fns = {k.name: (k, load_kernel(k)) for k in kernels}
        compiled: list[Any] = []

        def launch(name: str, tensors: dict[str, Any]) -> None:
            lowered, fn = fns[name]
            args, grid = launch_args(lowered, tensors, tiles)
            compiled.append(fn[grid](*args, **opts))

        inputs = _worker_inputs(family, family_name, shape)
        if len(kernels) > 1:
            family.program(launch, inputs, tiles)
        else:
            launch(kernels[0].name, inputs)
        torch.cuda.synchronize()
        fields = compiled_fields(compiled)
        return {"ok": True, "digest": digest, "compile": fields}
    except Exception as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]}


_WORKER_INPUTS: dict[str, Any] = {}


def _worker_inputs(family: Any, family_name: str, shape: dict[str, int]) -> dict[str, Any]:
    """In a worker: the case's inputs, made once per case (the last case's only), since a
    worker warms many policies of one case in a row (MoE's weights take seconds to draw)."""
    key = f"{family_name} {sorted(shape.items())}"
    if key not in _WORKER_INPUTS:
        import torch

        _WORKER_INPUTS.clear()
        torch.cuda.empty_cache()
        _WORKER_INPUTS[key] = family.make_inputs(shape, "bf16", 0, "cuda")
    return _WORKER_INPUTS[key]


def compiled_fields(compiled: list[Any]) -> dict[str, Any]:
    """Registers (max), spills (sum) and shared memory (max) of the compiled kernels a
    policy launched (Triton's CompiledKernel); {} when the launches returned none."""
    try:
        return {
            "registers": max(int(k.n_regs) for k in compiled),
            "spills": sum(int(k.n_spills) for k in compiled),
            "shared_bytes": max(int(k.metadata.shared) for k in compiled),
        }
    except Exception as exc:  # a Triton whose launch returns no CompiledKernel
        return {"fields_error": f"{type(exc).__name__}: {exc}"[:200]}


# what one policy of a space costs to time, relative to a GEMM's (attention's kernels take
# milliseconds; MoE runs five kernels and compiles them all): --space times the cheapest
# cases first, so a time limit leaves out the dearest ones
SPACE_COST = {"gemm": 1.0, "attention": 1.2, "moe": 1.5}


def space_order(selected: list[Case]) -> list[Case]:
    return sorted(selected, key=lambda c: len(c.policies) * SPACE_COST.get(c.family, 1.0))


def run_spaces(
    selected: list[Case],
    l2_bytes: int,
    deadline: float,
    workers: int,
    on_progress: Any = None,
    profile: bool = False,
    repeat: int = 1,
) -> None:
    """Every policy of every case's space: compiled in `workers` processes (one pool for the
    whole run, every case's jobs queued at once, so compiling runs ahead of timing), timed
    here in order as each compile finishes (policies whose lowered kernels and launch
    options are identical are timed once). Each case's inputs and references are built once
    and reused by all its policies (`timing.prepare`). Stops at `deadline` (time.time()):
    what was not compiled or timed is recorded as such. `on_progress()` is called every few
    policies and after each case (the caller rewrites its JSON: a killed run keeps what it
    timed). Results land in each case's `result`. `repeat` > 1: after the first pass, every
    timed policy of the case is timed again in `repeat - 1` more rounds over the whole space
    (round-robin, so a drift of the GPU's clock over the case touches every policy alike);
    its `ms` is the median of the rounds, each round's figure kept in `ms_rounds`."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    import torch

    from argus_core.evaluate.timing import measure, prepare

    pool = ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn"))
    futures = {
        id(c): [pool.submit(_warm, (c.family, c.shape, p)) for p in c.policies] for c in selected
    }
    try:
        for case in selected:
            t0 = time.perf_counter()
            if time.time() > deadline:
                case.result = {"tried": [], "best": None, "skipped": "--time-limit reached"}
                continue
            case.result = _time_space(
                case, futures[id(case)], l2_bytes, deadline, on_progress, measure, prepare, repeat
            )
            if profile and case.result.get("best") and time.time() < deadline - 10:
                case.result["profile"] = profile_best(case, l2_bytes)
            torch.cuda.empty_cache()
            best = case.result.get("best")
            got = f"{best['ms']:.4f} ms" if best else "no time"
            n = sum(1 for t in case.result["tried"] if t.get("ms"))
            print(
                f"space {case.family} {case.name}: {n}/{len(case.policies)} timed, best {got} "
                f"({time.perf_counter() - t0:.0f}s)",
                flush=True,
            )
            if on_progress:
                on_progress()
    finally:
        for fs in futures.values():
            for f in fs:
                f.cancel()
        procs = list(getattr(pool, "_processes", {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in procs:  # a worker still compiling when the limit came
            if proc.is_alive():
                proc.terminate()


def _time_space(
    case: Case,
    futures: list[Any],
    l2_bytes: int,
    deadline: float,
    on_progress: Any,
    measure: Any,
    prepare: Any,
    repeat: int = 1,
) -> dict[str, Any]:
    from concurrent.futures import TimeoutError as FutureTimeout

    import torch

    family = family_of(case.family)
    tried: list[dict[str, Any]] = []
    timed: dict[str, dict[str, Any]] = {}
    runs: list[tuple[dict[str, Any], Any]] = []  # (entry, run_on): the later rounds'
    prepared = None

    def time_one(run_on, **kw):  # one policy's timing (the inputs prepared once per case)
        return measure(
            family, run_on, case.shape, "bf16", 0, l2_bytes, warmup_ms=5, rep_ms=20,
            prepared=prepared, **kw,
        )  # fmt: skip

    result: dict[str, Any] = {"tried": tried, "best": None, "space_size": len(case.policies)}
    case.result = result
    for i, (p, fut) in enumerate(zip(case.policies, futures)):
        entry: dict[str, Any] = {"policy": p}
        left = deadline - time.time()
        try:
            w = fut.result(timeout=max(0.0, left))
        except FutureTimeout:
            entry["error"] = "not timed: not compiled before --time-limit"
            tried.append(entry)
            continue
        except Exception as exc:  # the worker died (a crash in the driver)
            w = {"ok": False, "error": f"worker: {type(exc).__name__}: {exc}"[:500]}
        entry.update({k: v for k, v in w.items() if k != "ok"})
        if not w["ok"]:
            tried.append(entry)
            continue
        if w["digest"] in timed:
            twin = timed[w["digest"]]
            entry.update({k: twin.get(k) for k in ("ms", "tflops", "gbps", "check")})
            entry["same_as"] = twin["policy"]
            tried.append(entry)
            continue
        if time.time() > deadline:
            entry["error"] = "not timed: --time-limit reached"
            tried.append(entry)
            continue
        tiles, compiler = split(case, p)
        try:
            if prepared is None:
                prepared = prepare(family, case.shape, "bf16", 0, l2_bytes)
            kernels = lower_all(family, tiles, compiler)
            run_on = runner(family, kernels, tiles, compiler)
            entry.update(time_one(run_on))
            result["baselines"] = dict(entry.pop("baselines", None) or {})
            timed[w["digest"]] = entry
            if entry.get("ms"):
                runs.append((entry, run_on))
        except Exception as exc:
            entry["error"] = f"{type(exc).__name__}: {exc}"[:500]
        tried.append(entry)
        if on_progress and i % 16 == 15:
            _finish(result)
            on_progress()
    for r in range(1, repeat):
        if time.time() > deadline:
            result["rounds_cut"] = f"--time-limit reached before round {r + 1} of {repeat}"
            break
        for entry, run_on in runs:
            again = time_one(run_on, with_baselines=False)
            entry.setdefault("ms_rounds", [entry["ms"]]).append(again.get("ms"))
    for entry, _ in runs:
        _median_of_rounds(entry)
    for entry in tried:  # twins take their timed policy's figures again
        if entry.get("same_as") is not None:
            twin = next((e for e, _ in runs if e["policy"] == entry["same_as"]), None)
            if twin is not None:
                entry.update({k: twin.get(k) for k in ("ms", "tflops", "gbps", "ms_rounds")})
    runs.clear()
    if prepared is not None:
        result["input_builds"] = prepared.builds
    prepared = None  # the inputs freed (time_one is not called after this)
    torch.cuda.empty_cache()
    _finish(result)
    return result


def _median_of_rounds(entry: dict[str, Any]) -> None:
    """`ms` becomes the median of `ms_rounds` (a round whose check failed counts the policy
    as failed: `ms` None, the round's index in `failed_round`); rates scale with it."""
    rounds = entry.get("ms_rounds")
    if not rounds or len(rounds) < 2:
        return
    if any(m is None for m in rounds):
        entry["failed_round"] = next(i for i, m in enumerate(rounds) if m is None)
        entry["ms"] = None
        return
    first, med = rounds[0], statistics.median(rounds)
    entry["ms"] = med
    for k in ("tflops", "gbps"):
        if entry.get(k):
            entry[k] = entry[k] * first / med


def _finish(result: dict[str, Any]) -> None:
    ok = [t for t in result["tried"] if t.get("ms")]
    best = dict(min(ok, key=lambda t: t["ms"])) if ok else None
    if best is not None:
        best["baselines"] = dict(result.get("baselines") or {})
    result["best"] = best


# -------------------------------------------------------------------------------- output


def ceilings() -> dict[str, float]:
    """Measured on this GPU now: a large bf16 matmul (TFLOP/s) and a device copy (TB/s)."""
    import torch
    import triton.testing as tt

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    ms = tt.do_bench(lambda: a @ b, return_mode="median")
    x = torch.empty(1 << 30, device="cuda", dtype=torch.uint8)
    y = torch.empty_like(x)
    cms = tt.do_bench(lambda: y.copy_(x), return_mode="median")
    return {"matmul_tflops": 2 * 8192**3 / ms / 1e9, "copy_tbps": 2 * x.numel() / cms / 1e9}


def table(results: list[Case], ceil: dict[str, float]) -> str:
    rows = [
        ("family", "case", "policy", "ours ms", "TFLOP/s", "GB/s", "baseline", "base ms", "ratio")
    ]
    for c in results:
        best = c.result.get("best")
        if not best:
            err = next(
                (
                    t.get("error") or t.get("check", {}).get("why")
                    for t in c.result.get("tried", [])
                ),
                "",
            )
            rows.append((c.family, c.name, "-", "FAILED", "", "", (err or "")[:40], "", ""))
            continue
        base = best.get("baselines") or {}
        bname, bms = min(base.items(), key=lambda kv: kv[1]) if base else ("-", float("nan"))
        ratio = bms / best["ms"] if base else float("nan")
        pol = " ".join(f"{k}{v}" for k, v in best["policy"].items())
        rows.append(
            (
                c.family,
                c.name,
                pol,
                f"{best['ms']:.4f}",
                f"{best['tflops']:.0f}",
                f"{best['gbps']:.0f}",
                bname,
                f"{bms:.4f}",
                f"{ratio:.2f}x",
            )
        )
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(str(v).ljust(w) for v, w in zip(r, widths)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append(
        f"ceilings measured now: bf16 matmul {ceil.get('matmul_tflops', 0):.0f} TFLOP/s, "
        f"copy {ceil.get('copy_tbps', 0):.2f} TB/s; ratio = fastest baseline time / ours (>1: ours faster)"
    )
    return "\n".join(lines)


def geomean(vals: list[float]) -> float | None:
    vals = [v for v in vals if v and v > 0 and not math.isnan(v)]
    return math.exp(sum(map(math.log, vals)) / len(vals)) if vals else None


def dry_run(selected: list[Case]) -> int:
    """No GPU: list the cases; trace and lower every kernel at every policy, cross-compile the
    first policy of each family for sm_90."""
    from argus_core.types import Policy

    backend = backend_named("h200")
    compiled: set[str] = set()
    for c in selected:
        family = family_of(c.family)
        for p in c.policies:
            tiles, compiler = split(c, p)
            kernels = lower_all(family, tiles, compiler)
            backend.validate_policy(Policy(tiles, compiler))
            hopper_only = any(k in p for k in ("tma", "ws", "persist"))
            if c.family not in compiled or (hopper_only and (c.family, str(p)) not in compiled):
                dtypes = {
                    **{t: "bf16" for k in kernels for t in _tensors(k)},
                    **family.tensor_dtypes("bf16"),
                }
                for k in kernels:
                    rep = backend.compile(
                        k,
                        dtypes,
                        Policy({n: tiles[n] for n in k.constexprs if n in tiles}, compiler),
                    )
                    if not rep.ok:
                        print(f"compile FAILED {c.family} {k.name}: {rep.error[-500:]}")
                        return 1
                    print(
                        f"compiled {c.family}/{k.name} for sm_90: {rep.registers} regs, "
                        f"{rep.spills} spills, {rep.shared_bytes} B shared, {rep.mma_count} MMA"
                    )
                compiled.add(c.family)
                compiled.add((c.family, str(p)))  # each Hopper-option policy compiled once
        print(f"ok  {c.family:9s} {c.name:28s} {len(c.policies)} policies traced and lowered")
    print(f"dry run: {len(selected)} cases checked; run without --dry-run on a GPU to time them")
    return 0


def mi300x_static(selected: list[Case]) -> int:
    """No GPU needed: each case's policies cross-compiled for gfx942 (MI300X). The H200
    policies are tried in order (attention: the whole sweep), each at its own stages, then 2,
    then 1; the first that fits the MI300X (LDS <= 64 KiB on the compiled kernel) without
    spills is reported (else the first that fits). Static: nothing here runs."""
    from argus_core.types import Policy

    backend = backend_named("mi300x")
    rows = [
        (
            "family",
            "case",
            "policy (gfx942)",
            "VGPRs",
            "spills",
            "LDS",
            "occ",
            "MFMA",
            "buffer loads",
        )
    ]
    for c in selected:
        family = family_of(c.family)
        found = fallback = None
        policies = ATTN_SWEEP if c.family == "attention" else c.policies
        for p in policies:
            for stages in dict.fromkeys((p["s"], 2, 1)):
                tiles, compiler = split(c, {**p, "s": min(stages, 4)})
                compiler = {**compiler, "num_stages": min(stages, 4)}
                try:
                    backend.validate_policy(Policy(tiles, compiler))
                except Exception:
                    continue
                kernels = lower_all(family, tiles, backend=backend)
                dtypes = {
                    **{t: "bf16" for k in kernels for t in _tensors(k)},
                    **family.tensor_dtypes("bf16"),
                }
                reps = [
                    backend.compile(
                        k,
                        dtypes,
                        Policy({n: tiles[n] for n in k.constexprs if n in tiles}, compiler),
                    )
                    for k in kernels
                ]
                fits = all(r.ok and (r.shared_bytes or 0) <= 64 * 1024 for r in reps)
                if fits and not any(r.spills for r in reps):
                    found = (tiles, compiler, reps)
                    break
                if fits and fallback is None:
                    fallback = (tiles, compiler, reps)  # fits, but spills: only if nothing else
            if found:
                break
        found = found or fallback
        if not found:
            rows.append((c.family, c.name, "none fits", "", "", "", "", "", ""))
            continue
        tiles, compiler, reps = found
        pol = (
            " ".join(f"{k}{v}" for k, v in tiles.items())
            + f" w{compiler['num_warps']} s{compiler['num_stages']}"
        )
        rows.append(
            (
                c.family,
                c.name,
                pol,
                str(max(r.registers or 0 for r in reps)),
                str(sum(r.spills or 0 for r in reps)),
                str(max(r.shared_bytes or 0 for r in reps)),
                str(min(r.occupancy or 0 for r in reps)),
                str(sum(r.mma_count or 0 for r in reps)),
                str(sum(r.buffer_loads or 0 for r in reps)),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for i, r in enumerate(rows):
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    print(
        "static: gfx942 cross-compiles (AMDGCN report), not measurements; multi-kernel "
        "programs: peak VGPRs/LDS, lowest occupancy, summed spills/MFMA/buffer loads"
    )
    return 0


def _tensors(lowered: Any) -> list[str]:
    return [p.name for p in lowered.params if p.kind == "ptr"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--mi300x-static", action="store_true", help="gfx942 static report, no GPU")
    ap.add_argument("--families", default="gemm,attention,moe")
    ap.add_argument("--cases", default="", help="comma-separated substrings of case names")
    ap.add_argument(
        "--exclude", default="", help="comma-separated substrings of case names to leave out"
    )
    ap.add_argument("--quick", action="store_true", help="first policy only, shorter timing")
    ap.add_argument("--sweep", action="store_true", help="attention: all 36 policies of ATTN_SWEEP")
    ap.add_argument(
        "--space",
        action="store_true",
        help="every policy of each case's derived space (argus_core.planning.space), compiled "
        "in parallel, timed one by one: planner_bench's ground truth",
    )
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument(
        "--time-limit", type=float, default=0, help="--space: stop timing after this many s"
    )
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="--space: rounds of timing over each case's whole space; a policy's ms is the "
        "median of its rounds",
    )
    ap.add_argument(
        "--profile",
        action="store_true",
        help="after timing: each case's best policy under Triton's proton profiler, "
        "its roofline point (argus_core.evaluate.profile)",
    )
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "gpu_bench.json"))
    ap.add_argument(
        "--merge",
        nargs="+",
        metavar="JSON",
        help="no GPU: the table and targets of earlier runs' JSON files, each case's fastest "
        "correct policy over all of them (each ratio against its own run's baselines)",
    )
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error(f"--repeat {args.repeat}: the number of timing rounds is 1 or more")
    if args.merge:
        return merge(args.merge)
    fams = args.families.split(",")
    selected = [
        c
        for c in cases()
        if c.family in fams
        and (not args.cases or any(s in c.name for s in args.cases.split(",")))
        and not (args.exclude and any(s in c.name for s in args.exclude.split(",")))
    ]
    if args.sweep:
        for c in selected:
            if c.family == "attention":
                c.policies = ATTN_SWEEP
    if args.space:
        for c in selected:
            c.policies = space_policies(c)
    if args.quick:
        for c in selected:
            c.policies = c.policies[:1]
    if args.dry_run and args.space:
        for c in selected:
            print(f"space {c.family:9s} {c.name:28s} {len(c.policies)} policies")
        return 0
    if args.dry_run:
        return dry_run(selected)
    if args.mi300x_static:
        return mi300x_static(selected)
    import torch

    if not torch.cuda.is_available():
        print("no CUDA GPU; use --dry-run", file=sys.stderr)
        return 2
    props = torch.cuda.get_device_properties(0)
    l2 = int(getattr(props, "L2_cache_size", 50 << 20))
    # the device machine gets the working tree without .git: pass ARGUS_COMMIT from here
    commit = (
        os.environ.get("ARGUS_COMMIT")
        or subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
        ).stdout.strip()
        or "unknown"
    )
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "device": props.name,
        "sms": props.multi_processor_count,
        "l2_bytes": l2,
        "torch": torch.__version__,
        "commit": commit,
        "host": platform.node(),
    }
    import triton

    meta["triton"] = triton.__version__
    ceil = ceilings()
    meta["ceilings"] = ceil
    print(json.dumps(meta), flush=True)
    deadline = time.time() + (args.time_limit or 1e9)

    def write() -> None:
        Path(args.out).write_text(
            json.dumps(
                {
                    "meta": meta,
                    "cases": [
                        {"family": x.family, "name": x.name, "shape": x.shape, **x.result}
                        for x in selected
                        if x.result
                    ],
                },
                indent=1,
                default=str,
            )
        )

    if args.space:
        selected = space_order(selected)
        print("space order: " + ", ".join(f"{c.name} ({len(c.policies)})" for c in selected))
        run_spaces(selected, l2, deadline, args.workers, write, args.profile, args.repeat)
    for c in selected if not args.space else []:
        t0 = time.perf_counter()
        c.result = run_case(c, l2, rep_ms=40 if args.quick else 100)
        if args.profile and c.result.get("best"):
            c.result["profile"] = profile_best(c, l2)
        best = c.result.get("best")
        got = f"{best['ms']:.4f} ms" if best else "FAILED"
        print(f"{c.family} {c.name}: {got} ({time.perf_counter() - t0:.0f}s)", flush=True)
        write()
    write()
    summary = {}
    for fam in fams:
        ratios = []
        for c in selected:
            b = c.result.get("best")
            if c.family == fam and b and b.get("baselines") and c.note != "decode":
                ratios.append(min(b["baselines"].values()) / b["ms"])
        summary[fam] = geomean(ratios)
    print()
    print(table(selected, ceil))
    print(
        "geomean ratio vs fastest baseline: "
        + ", ".join(f"{k} {v:.2f}x" if v else f"{k} -" for k, v in summary.items())
    )
    for line in target_lines(selected, ceil):
        print(line)
    return 0


def profile_best(case: Case, l2_bytes: int) -> dict[str, Any]:
    """The case's best policy run under proton (argus_core.evaluate.profile.proton_profile):
    the GPU time proton attributes to each kernel, and the roofline point of the total."""
    from argus_core.evaluate.profile import proton_profile, roofline_point

    family = family_of(case.family)
    best = case.result["best"]
    tiles, compiler = split(case, best["policy"])
    try:
        kernels = lower_all(family, tiles, compiler)
        run_on = runner(family, kernels, tiles, compiler)
        inputs = family.make_inputs(case.shape, "bf16", 0, "cuda")
        prof = proton_profile(lambda: run_on(inputs), f"{case.family}-{case.name}", repeats=20)
        spec = backend_named("h200").spec
        ms = prof["ms"] or best["ms"]
        point = roofline_point(family.flops(case.shape), family.bytes(case.shape, "bf16"), ms, spec)
        return {**prof, "roofline": point}
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:500]}


def _own_ratio(case_result: dict[str, Any]) -> float:
    """A recorded case's best ratio against the baselines timed in its own run."""
    best = case_result["best"]
    return min(best["baselines"].values()) / best["ms"]


def merge(paths: list[str]) -> int:
    """Print the table and target lines of the best result per case over `paths`."""
    runs = [json.loads(Path(p).read_text()) for p in paths]
    selected = []
    for c in cases():
        found = [
            x for r in runs for x in r.get("cases", []) if x["name"] == c.name and x.get("best")
        ]
        if found:
            best = max(found, key=_own_ratio)
            c.result = {"best": best["best"], "tried": best["tried"]}
            selected.append(c)
    ceil = runs[0]["meta"]["ceilings"]
    commits = sorted({r["meta"].get("commit", "?") for r in runs})
    print(f"merged {len(paths)} runs (commits {', '.join(commits)})")
    print(table(selected, ceil))
    for line in target_lines(selected, ceil):
        print(line)
    return 0


# the targets: geomean ratio to the fastest library per family (prefill for MoE),
# the per-expert loop for MoE prefill, and the share of copy bandwidth for MoE decode (issue
# 15 raised it from 60% to 85% at T1..T64: the level, tile or explicit, is the planner's
# choice per case, and this file times the tile level)
TARGETS = {"gemm": 0.95, "attention": 0.80, "moe": 1.0}
MOE_LOOP_TARGET, DECODE_BW_TARGET = 3.0, 0.85


def target_lines(selected: list[Case], ceil: dict[str, float]) -> list[str]:
    """One line per target: the figure, the target, met or missed by how much."""

    def verdict(name: str, got: float | None, want: float, unit: str = "x") -> str:
        if got is None:
            return f"target {name}: no figure"
        fmt = (lambda v: f"{v:.0%}") if unit == "%" else (lambda v: f"{v:.2f}x")
        state = "met" if got >= want else f"MISSED by {fmt(want - got)}"
        return f"target {name}: {fmt(got)} (>= {fmt(want)}): {state}"

    out = []
    for fam, want in TARGETS.items():
        best = [c.result.get("best") for c in selected if c.family == fam and c.note != "decode"]
        ratios = [min(b["baselines"].values()) / b["ms"] for b in best if b and b.get("baselines")]
        if ratios:
            label = "moe prefill vs fastest" if fam == "moe" else f"{fam} vs fastest library"
            out.append(verdict(label, geomean(ratios), want))
        if fam == "moe" and best:
            loops = [
                b["baselines"][k] / b["ms"]
                for b in best
                if b
                for k in b.get("baselines", {})
                if "loop" in k
            ]
            if loops:
                out.append(
                    verdict("moe prefill vs per-expert loop", geomean(loops), MOE_LOOP_TARGET)
                )
    copy = ceil.get("copy_tbps")
    for c in selected:
        b = c.result.get("best")
        if c.note == "decode" and b and copy:
            share = b["gbps"] / (copy * 1e3)
            out.append(verdict(f"moe {c.name} copy-bandwidth share", share, DECODE_BW_TARGET, "%"))
    return out


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
