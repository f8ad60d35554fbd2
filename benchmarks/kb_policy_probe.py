"""Several policies of KernelBench tasks' template kernels, side by side.

    python benchmarks/kb_policy_probe.py --path <KernelBench>/KernelBench --task level1/1 \
        --backend h200 --fp32-dot tf32x3 \
        --policy "BM=128 BN=128 BK=32 GROUP=8 num_warps=8 num_stages=3" --policy ...

Without a GPU (`--compile-only`, or a GPU backend on a machine without one) each policy is
lowered and cross-compiled only: registers, spills and shared memory per policy, no time.
On the GPU each runs the pipeline's whole evaluation (verify, compile, the check against
the PyTorch reference and timing beside eager and torch.compile). A table is printed last.
`--task` takes a comma list, and a bare level (`level1`) for each of its tasks: without
`--policy`, each task's first policy (the one a budget-1 run takes), a census of what the
run would compile:

    python benchmarks/kb_policy_probe.py --path <KernelBench>/KernelBench --task level1,level2 \
        --backend h200 --compile-only --out spills.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def parse_policy(text: str, tile_names: set[str]) -> dict[str, dict[str, int]]:
    """`"BM=128 BN=64 num_warps=8"` -> {"tiles": {...}, "compiler": {...}}: names the
    template declares are tiles, the rest compiler options."""
    tiles, compiler = {}, {}
    for part in text.replace(",", " ").split():
        name, sep, value = part.partition("=")
        if not sep or not value.lstrip("-").isdigit():
            raise SystemExit(f"--policy {text!r}: {part!r} is not NAME=INT")
        (tiles if name in tile_names else compiler)[name] = int(value)
    return {"tiles": tiles, "compiler": compiler}


def probe(args: argparse.Namespace, task: str) -> list[dict]:
    """One row per policy of `task` (the family's first policy where none is given)."""
    from argus_core.config import compose
    from argus_core.pipeline import Stages, _entries, _policy_for, _tensor_dtypes
    from argus_core.plugin_manager import Registry, default_plugin_manager
    from argus_core.types import Candidate, Policy

    overrides = ["+kernel=kernelbench", f"kernel.path={args.path}", f"kernel.task={task}",
                 f"backend={args.backend}", "tracking=none", "planner=baseline",
                 f"evaluate.timeout_s={args.timeout}"]  # fmt: skip
    if args.fp32_dot:
        overrides.append(f"kernel.fp32_dot={args.fp32_dot}")
    cfg = compose(overrides)
    stages = Stages.from_config(cfg, Registry(default_plugin_manager()))
    family, backend = stages.family, stages.backend
    tile_names = set(cfg.kernel.tiles)
    gpu = backend.name != "interpret" and backend.device_available() and not args.compile_only
    texts = args.policy or [
        " ".join(f"{k}={v[0]}" for k, v in cfg.kernel.tiles.items())
        + " "
        + " ".join(f"{k}={v[0]}" for k, v in stages.backend_cfg.policy_grid.items())
    ]
    rows = []
    for i, text in enumerate(texts):
        p = parse_policy(text, tile_names)
        policy = Policy(p["tiles"], p["compiler"])
        cand = Candidate(id=f"p{i:02d}", kernel=family.name, source=family.source(),
                         entry=family.entry, policy=policy)  # fmt: skip
        t0 = time.perf_counter()
        row: dict = {"policy": policy.key()}
        if gpu:
            res, _ = stages.evaluate(cand, i, None)
            comp = res.compile
            row.update(
                correct=bool(res.correctness and res.correctness.ok),
                ms=res.timing.ms if res.timing else None,
                baselines=dict(res.timing.baselines or {}) if res.timing else {},
                failure=(res.failure or "")[:120],
            )
        else:
            entries = _entries(family, cand)
            irs = [stages.dsl.parse(cand.source, e, "<probe>") for e in entries]
            pols = [_policy_for(ir, policy) for ir in irs]
            lowered = [
                backend.lower(ir, pol, stages._lowering_facts()) for ir, pol in zip(irs, pols)
            ]
            for k, entry in zip(lowered, entries):  # strides as the family binds them
                k.unit_stride = dict(family.unit_strides(entry))
            dtypes = _tensor_dtypes(family, cfg.kernel.dtype, irs)
            comps = [backend.compile(k, dtypes, pol) for k, pol in zip(lowered, pols)]
            bad = next((c for c in comps if not c.ok), None)
            row["failure"] = "" if bad is None else (bad.error or "")[:120]
            # a program's kernels: the most any of them uses, per kernel after "/"
            row.update({key: max((getattr(c, attr) or 0) for c in comps)
                        for key, attr in (("regs", "registers"), ("spills", "spills"),
                                          ("smem", "shared_bytes"))})  # fmt: skip
            if len(comps) > 1:
                row["per_kernel"] = " / ".join(f"{c.registers}r {c.spills}s" for c in comps)
            comp = None
        if comp is not None:
            row.update(regs=comp.registers, spills=comp.spills, smem=comp.shared_bytes)
        row["s"] = round(time.perf_counter() - t0, 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def _tasks(path: str, spec: str) -> list[str]:
    """`level1/1,level2/3` as given; a bare level (`level1`) is every task of it."""
    from argus_plugins.kernels.kernelbench import tasks as kb_tasks

    known = kb_tasks.discover(path)
    out: list[str] = []
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        if "/" in part:
            out.append(part)
        else:
            level = sorted((k for k in known if k.split("/")[0] == part),
                           key=lambda k: int(k.split("/")[1]))  # fmt: skip
            out += level
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--path", required=True, help="directory with level1/, level2/")
    ap.add_argument("--task", required=True)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--fp32-dot", default=None)
    ap.add_argument("--policy", action="append", default=[], help="NAME=INT ... (repeat)")
    ap.add_argument("--compile-only", action="store_true")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per check")
    ap.add_argument("--out", default=None, help="JSON rows")
    args = ap.parse_args()

    from tabulate import tabulate

    tasks = _tasks(args.path, args.task)
    rows = []
    for task in tasks:
        try:
            got = probe(args, task)
        except Exception as exc:  # a task that does not bind or lower is its row
            got = [{"policy": "-", "failure": f"{type(exc).__name__}: {exc}"[:120]}]
        rows += [{"task": task, **r} for r in got]
    gpu = any("ms" in r for r in rows)
    if args.out:
        Path(args.out).write_text(
            json.dumps({"tasks": args.task, "gpu": gpu, "rows": rows}, indent=1)
        )
    print(f"\n{args.task} on {args.backend} ({'measured' if gpu else 'compiled only, no time'}), "
          f"fp32_dot={args.fp32_dot or 'the task config'}, {os.uname().nodename}")  # fmt: skip
    print(tabulate(rows, headers="keys"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
