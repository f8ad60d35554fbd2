"""Several policies of one KernelBench task's template kernel, side by side.

    python benchmarks/kb_policy_probe.py --path <KernelBench>/KernelBench --task level1/1 \
        --backend h200 --fp32-dot tf32x3 \
        --policy "BM=128 BN=128 BK=32 GROUP=8 num_warps=8 num_stages=3" --policy ...

Without a GPU (`--compile-only`, or a GPU backend on a machine without one) each policy is
lowered and cross-compiled only: registers, spills and shared memory per policy, no time.
On the GPU each runs the pipeline's whole evaluation (verify, compile, the check against
the PyTorch reference and timing beside eager and torch.compile). A table is printed last.
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

    from argus_core.config import compose
    from argus_core.pipeline import Stages, _entries, _policy_for, _tensor_dtypes
    from argus_core.plugin_manager import Registry, default_plugin_manager
    from argus_core.types import Candidate, Policy

    overrides = ["+kernel=kernelbench", f"kernel.path={args.path}", f"kernel.task={args.task}",
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
            dtypes = _tensor_dtypes(family, cfg.kernel.dtype, irs)
            comps = [backend.compile(k, dtypes, pol) for k, pol in zip(lowered, pols)]
            comp = comps[-1]
            row["failure"] = "" if comp.ok else (comp.error or "")[:120]
        if comp is not None:
            row.update(regs=comp.registers, spills=comp.spills, smem=comp.shared_bytes)
        row["s"] = round(time.perf_counter() - t0, 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        Path(args.out).write_text(
            json.dumps({"task": args.task, "gpu": gpu, "rows": rows}, indent=1)
        )
    print(f"\n{args.task} on {backend.name} ({'measured' if gpu else 'compiled only, no time'}), "
          f"fp32_dot={cfg.kernel.get('fp32_dot')}, {os.uname().nodename}")  # fmt: skip
    print(tabulate(rows, headers="keys"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
