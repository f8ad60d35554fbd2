"""How close each planner gets to the best policy of the space, at equal budget.

    python benchmarks/planner_bench.py --dry-run        # CPU: the cost model is the oracle (ESTIMATE)
    python benchmarks/planner_bench.py                  # replays the recorded H200 space measurements
    python benchmarks/planner_bench.py --measured FILE  # ... of another `gpu_bench.py --space` run
    python benchmarks/planner_bench.py --planners icrl --budget 12  # one planner, another budget

For every gpu_bench case (`benchmarks/gpu_bench.py`), each planner proposes at most
`--budget` candidates (default 8) in the case's derived policy space
(`argus_core.planning.space`), one at a time, each seeing the results before it:

- `icrl`: `planner=icrl` (UCB1 over KB techniques and moves, learn=false, the cost model
  picking its start and its actions; `icrl-nomodel`: the same without the cost model);
- `random`: a seeded sample of the space's policies;
- `grid`: policies evenly spaced along the space's fixed order;
- `pattern`: `planner=search options.mode=pattern` (Helion-style pattern search).

The oracle answers each proposal with a time: the **recorded measurements** of the whole
space on the H200 (`gpu_bench.py --space`; a proposal the recording lacks counts as a
failed candidate, "unmeasured"), or with `--dry-run` the **cost model** (labelled
ESTIMATE: a CI check that the planners run, not a result). With measurements, the cost
model icrl uses is refitted without the case being planned (it never saw its timings).
Reported per case and planner: the best time found, the exhaustive best of the space, the
gap between them, and (measured) the ratio to the library baseline timed in the same run.
A table is printed last; `--out` writes the JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
DEFAULT_MEASURED = sorted((ROOT / "benchmarks" / "results").glob("*-h200-space*.json"))
PLANNERS = ("icrl", "icrl-nomodel", "random", "grid", "pattern")
SHORT = {"num_warps": "w", "num_stages": "s", "tma": "tma", "warp_specialize": "ws"}
SHORT["persistent"] = "persist"
DEFAULTS = {"w": 4, "s": 3, "tma": 0, "persist": 0, "ws": 0}  # Hopper's, for keys
# tile constants gpu_bench fixes per family (not part of a policy's identity here)
FIXED = {"HEAD_D", "BT", "BE", "BS", "BH"}


def key_of(p: dict[str, Any]) -> tuple:
    """A policy's identity across forms (gpu_bench's short dict or a Policy's names): every
    name but the fixed ones, options at Hopper's defaults when absent. A policy with a name
    the recording never varies (maxnreg, an explicit level) has a key no record has."""
    short = {SHORT.get(k, k): v for k, v in p.items() if k not in FIXED}
    full = {**DEFAULTS, **short}
    return tuple(sorted((k, str(v)) for k, v in full.items()))


def policy_key(policy: Any) -> tuple:
    return key_of({**policy.tiles, **policy.compiler})


class Oracle:
    """Times for policies of one case: recorded measurements or cost-model estimates."""

    def __init__(
        self,
        label: str,
        ms: Callable[[Any], float | None],
        best: float,
        known: Callable[[Any], bool] | None = None,
        points: int = 0,
    ):
        self.label, self.ms, self.best = label, ms, best
        self.known = known  # a recording: the policies it holds (failed ones too)
        self.why: Callable[[Any], str] | None = None  # a recording: what failed, as recorded
        self.points = points  # how many of the space's policies it answers for
        self.calls = 0

    def __call__(self, policy: Any) -> float | None:
        self.calls += 1
        return self.ms(policy)


def space_ctx(case: Any, backend: str = "h200") -> dict[str, Any]:
    """A planner's ctx for a gpu_bench case, from the real configs and plugins."""
    import gpu_bench as gb
    import yaml

    kernel = yaml.safe_load((ROOT / "conf" / "kernel" / f"{case.family}.yaml").read_text())
    grid = yaml.safe_load((ROOT / "conf" / "backend" / f"{backend}.yaml").read_text())
    tiles = dict(kernel["tiles"])
    if case.family == "attention":
        tiles["HEAD_D"] = [int(case.shape["D"])]
    return {
        "family": gb.family_of(case.family),
        "backend": gb.backend_named(backend),
        "kernel_cfg": {"shape": dict(case.shape), "tiles": tiles, "dtype": "bf16"},
        "backend_cfg": {"name": backend, "policy_grid": grid["policy_grid"]},
        "seed": 0,
        "budget": 8,
    }


def run_planner(name: str, ctx: dict[str, Any], oracle: Oracle, budget: int, seed: int) -> dict:
    """Propose, time with the oracle, observe; at most `budget` candidates."""
    from omegaconf import OmegaConf

    from argus_core.planning.actions import ActionSpace
    from argus_core.types import CandidateResult, TimingReport
    from argus_plugins.planners.icrl import IcrlPlanner
    from argus_plugins.planners.search import SearchPlanner

    ctx = {**ctx, "seed": seed, "budget": budget}
    if name.startswith("icrl"):
        opts = {"learn": False, "model": name == "icrl"}
        session = IcrlPlanner().create(OmegaConf.create({"name": "icrl", "options": opts}), ctx)
    elif name == "pattern":
        cfg = OmegaConf.create({"name": "search", "options": {"mode": "pattern"}})
        session = SearchPlanner().create(cfg, ctx)
    else:
        session = _SampleSession(ActionSpace.from_ctx(ctx), name, seed, budget, ctx["family"])
    found: list[dict[str, Any]] = []
    for _ in range(budget):
        cands = session.propose(1)
        if not cands:
            break
        cand = cands[0]
        ms = oracle(cand.policy)
        res = CandidateResult(candidate=cand, index=len(found))
        if ms is None or not math.isfinite(ms):
            why = oracle.why(cand.policy) if oracle.why else ""
            res.failure = f"compile: {why}" if why else "timing: unmeasured or failed"
        else:
            res.timing = TimingReport(ms=ms, estimated=oracle.label == "ESTIMATE")
            res.reward = 1.0
        session.observe(res)
        found.append({"policy": cand.policy.to_dict(), "ms": ms, "note": cand.note})
    ok = [f["ms"] for f in found if f["ms"] is not None and math.isfinite(f["ms"])]
    best = min(ok) if ok else None
    return {
        "planner": name,
        "tried": len(found),
        "failed": len(found) - len(ok),
        "best_ms": best,
        "gap": (best / oracle.best - 1) if best else None,
        "found_at": (1 + [f["ms"] for f in found].index(best)) if best else None,
        "candidates": found,
    }


class _SampleSession:
    """random: a seeded sample of the space; grid: evenly spaced along its order."""

    def __init__(self, space: Any, mode: str, seed: int, budget: int, family: Any):
        from argus_core.planning.actions import make_candidate

        self.make, self.family = make_candidate, family
        points = [p for p in space.policy_space.points() if space.valid(p)]
        if mode == "random":
            self.queue = random.Random(seed).sample(points, min(budget, len(points)))
        else:
            stride = max(1, len(points) // budget)
            self.queue = points[::stride][:budget]
        self.count = 0

    def propose(self, n: int) -> list[Any]:
        out = []
        while self.queue and len(out) < n:
            self.count += 1
            out.append(self.make(self.family, self.count, self.queue.pop(0), None))
        return out

    def observe(self, result: Any) -> None:
        pass


def estimate_oracle(ctx: dict[str, Any]) -> Oracle:
    """The cost model over the case's derived space (ESTIMATE)."""
    from argus_core.planning.actions import ActionSpace

    fam, backend, shape = ctx["family"], ctx["backend"], ctx["kernel_cfg"]["shape"]
    space = ActionSpace.from_ctx(ctx)

    def ms(policy: Any) -> float | None:
        t = backend.estimate(fam, dict(shape), "bf16", policy, None).ms
        return t if math.isfinite(t) else None

    times = [ms(p) for p in space.policy_space.points() if space.valid(p)]
    return Oracle("ESTIMATE", ms, min(t for t in times if t is not None))


def measured_oracle(case_json: dict[str, Any]) -> Oracle:
    """The recorded times of one case's space (twins share their time)."""
    table = {key_of(t["policy"]): t["ms"] for t in case_json["tried"] if t.get("ms")}
    held = {key_of(t["policy"]) for t in case_json["tried"] if _recorded(t)}
    errors = {
        key_of(t["policy"]): str(t.get("error") or (t.get("check") or {}).get("why") or "")
        for t in case_json["tried"]
        if not t.get("ms")
    }
    best = min(table.values())
    oracle = Oracle(
        "MEASURED",
        lambda policy: table.get(policy_key(policy)),
        best,
        lambda policy: policy_key(policy) in held,
        len(held),
    )
    oracle.why = lambda policy: errors.get(policy_key(policy), "")[:300]
    return oracle


def load_measured(paths: list[Path], every: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """({case name: its recording}, {file: its run's meta}): per case the recording with
    the most timed policies (on a tie the later file). With `every`, {case name: every
    recording of it, in file order}, for `fullest` to choose from once the case's space is
    known."""
    measured: dict[str, Any] = {}
    found: dict[str, list[Any]] = {}
    metas: dict[str, Any] = {}
    for path in paths:
        data = json.loads(Path(path).read_text())
        metas[Path(path).name] = data.get("meta")
        for c in data["cases"]:
            if not any(t.get("ms") for t in c["tried"]):
                continue
            found.setdefault(c["name"], []).append(c)
            old = measured.get(c["name"])
            if old is None or _timed(c) >= _timed(old):
                measured[c["name"]] = c
    return (found if every else measured), metas


def _recorded(tried: dict[str, Any]) -> bool:
    """A recorded policy: timed, or failed to compile/run (a planner may propose it and pay
    for it); not one a time limit left untimed."""
    return bool(tried.get("ms")) or not str(tried.get("error", "")).startswith("not timed")


def _timed(case: dict[str, Any]) -> int:
    return sum(1 for t in case["tried"] if t.get("ms"))


def fullest(recordings: list[dict[str, Any]], points: list[Any]) -> dict[str, Any]:
    """The recording that reached the most of the case's current space (`points`), timed
    or failed (a time limit's leftovers are not reached), then the most timed, then the
    later file: a later run may cover a grown space (BM 64 joined the decode spaces on
    2026-12-04) or more of it, and an old run of a larger, older space counts only
    for the points the space still has."""
    keys = {policy_key(p) for p in points}

    def reached(case: dict[str, Any]) -> int:
        return sum(1 for t in case["tried"] if _recorded(t) and key_of(t["policy"]) in keys)

    order = {id(c): i for i, c in enumerate(recordings)}
    return max(recordings, key=lambda c: (reached(c), _timed(c), order[id(c)]))


def refit_without(case_name: str) -> Callable[[], None]:
    """Refit the cost model's H200 calibration without `case_name`'s measurements; returns
    the function that restores the committed one."""
    from argus_core.costmodel import fit
    from argus_core.evaluate import costmodel

    spec, fams = fit.registry_objects()
    records = [
        r
        for r in fit.load_records(sorted(fit.RESULTS.glob("*h200*.json")))
        if fit.base_case(r.case) != case_name
    ]
    names, x = fit.design(records, spec, fams)
    import numpy as np

    w = fit.fit_weights(names, x, np.log([r.ms for r in records]), [r.case for r in records])
    saved = costmodel.CALIBRATIONS.get("h200")
    cal = dict(saved or {}, coef=dict(zip(names, map(float, w))), features=fit.VERSION)
    cal.setdefault("families", ["gemm", "attention", "moe"])
    cal.setdefault("error_pct", float("nan"))
    cal.setdefault("spearman", float("nan"))
    costmodel.CALIBRATIONS["h200"] = cal

    def restore() -> None:
        if saved is None:
            costmodel.CALIBRATIONS.pop("h200", None)
        else:
            costmodel.CALIBRATIONS["h200"] = saved

    return restore


def table(
    rows: list[dict[str, Any]], budget: int, planners: tuple[str, ...] | list[str] = PLANNERS
) -> str:
    head = ("case", "oracle", "recorded/space", "exhaustive ms", "library/exh.", *planners)
    lines = [head]
    for r in rows:
        cells = []
        for p in planners:
            res = r["planners"][p]
            cells.append(
                f"{res['best_ms']:.4g} ({100 * res['gap']:+.1f}%)" if res["best_ms"] else "none"
            )
        base = r.get("baselines") or {}
        lib = f"{min(base.values()) / r['exhaustive_ms']:.2f}x" if base else "-"
        lines.append(
            (r["case"], r["oracle"], str(r["space"]), f"{r['exhaustive_ms']:.4g}", lib, *cells)
        )
    widths = [max(len(str(x[i])) for x in lines) for i in range(len(head))]
    out = ["  ".join(str(v).ljust(w) for v, w in zip(x, widths)) for x in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    summary = []
    for p in planners:
        gaps = [r["planners"][p]["gap"] for r in rows if r["planners"][p]["gap"] is not None]
        within = sum(g <= 0.02 for g in gaps)
        mean = sum(gaps) / len(gaps) if gaps else float("nan")
        summary.append(f"{p}: within 2% on {within}/{len(rows)}, mean gap {100 * mean:.1f}%")
    out.append(
        f"budget {budget} candidates per planner; best found (gap to the exhaustive best); "
        "library/exh.: the fastest library time over the exhaustive best (>1: ours faster)"
    )
    out.append("; ".join(summary))
    if any(r["oracle"] == "ESTIMATE" for r in rows):
        out.append("ESTIMATE: the cost model is the oracle (no GPU): a check that it runs")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="CPU: the cost model is the oracle")
    ap.add_argument(
        "--measured",
        type=Path,
        nargs="+",
        default=DEFAULT_MEASURED,
        help="gpu_bench --space JSON files (default: benchmarks/results/*-h200-space*.json)",
    )
    ap.add_argument("--budget", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cases", default="", help="comma-separated substrings of case names")
    ap.add_argument(
        "--planners",
        default=",".join(PLANNERS),
        help=f"comma-separated, of {', '.join(PLANNERS)} (default: all)",
    )
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "planner_bench.json"))
    args = ap.parse_args(argv)
    if args.budget < 1:
        ap.error(f"--budget={args.budget}: must be >= 1")
    planners = [p for p in args.planners.split(",") if p]
    unknown = sorted(set(planners) - set(PLANNERS))
    if unknown or not planners:
        ap.error(f"--planners={args.planners}: choose among {', '.join(PLANNERS)}")
    import gpu_bench as gb

    selected = [
        c for c in gb.cases() if not args.cases or any(s in c.name for s in args.cases.split(","))
    ]
    measured: dict[str, Any] = {}  # per case: the recording replayed (`fullest`)
    recordings: dict[str, list[Any]] = {}
    meta: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "budget": args.budget}
    if not args.dry_run:
        recordings, meta["measured_from"] = load_measured(args.measured, every=True)
        selected = [c for c in selected if c.name in recordings]
        if not selected:
            names = ", ".join(map(str, args.measured)) or "(no file)"
            print(f"no measured case in {names}; use --dry-run", file=sys.stderr)
            return 2
    rows = []
    for case in selected:
        ctx = space_ctx(case)
        restore = None
        from argus_core.planning.actions import ActionSpace

        points = list(ActionSpace.from_ctx(ctx).policy_space.points())
        size = len(points)
        if case.name in recordings:
            measured[case.name] = fullest(recordings[case.name], points)
        if case.name in measured:
            oracle = measured_oracle(measured[case.name])
            oracle.points = sum(1 for p in points if oracle.known(p))
            restore = refit_without(f"{case.family} {case.name}")
            # every planner moves within the recorded points (a partial recording: the
            # "exhaustive" best is over them)
            ctx["policy_filter"] = oracle.known
        else:
            oracle = estimate_oracle(ctx)
            oracle.points = size
            keys = {p.key() for p in points}
            ctx["policy_filter"] = lambda policy, keys=keys: policy.key() in keys  # the space
        row: dict[str, Any] = {
            "case": f"{case.family} {case.name}",
            "oracle": oracle.label,
            "space": f"{oracle.points}/{size}",
            "exhaustive_ms": oracle.best,
            "planners": {},
        }
        if case.name in measured:
            row["baselines"] = measured[case.name].get("baselines")
        try:
            for p in planners:
                row["planners"][p] = run_planner(p, ctx, oracle, args.budget, args.seed)
        finally:
            if restore is not None:
                restore()
        rows.append(row)
        print(f"{row['case']}: done ({oracle.label})", flush=True)
    Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1, default=str))
    print()
    print(table(rows, args.budget, planners))
    return 0


if __name__ == "__main__":
    sys.exit(main())
