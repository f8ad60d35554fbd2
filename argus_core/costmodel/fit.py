"""Fit the cost model's calibration on recorded GPU measurements, and measure how well it
ranks candidates it was not fitted on.

    python -m argus_core.costmodel.fit                       # fit on benchmarks/results, write h200_fit.py
    python -m argus_core.costmodel.fit --check               # only report the held-out figures

The records are `benchmarks/gpu_bench.py` JSON files (every policy it timed on the H200,
with its compile report's registers, spills and shared memory where `--space` recorded
them), measured on or after `SINCE` (the kernels as they are now: the same policy timed on
2026-11-29 and on 2026-12-01 differs by up to 1.8x, since the kernels and their lowering
changed; two runs of 2026-12-01 agree within 0.6%, Spearman 0.98-1.0); a policy timed in
several runs counts once, at the geometric mean of its times; timed as CUDA-graph replays
(`graph_replay`), it counts in a case of its own (`GRAPH`: the level differs).

The model (`argus_core.costmodel.features`, v3) is fitted in two stages:

1. **within a case** (what a planner needs: the order of the policies of one problem): a
   ridge regression of log(ms) minus its case mean on the features minus their case means
   (standardized columns, penalty `RIDGE`), i.e. least squares on every within-case pair's
   difference;
2. **the level of a case** (the absolute time of a new shape): a ridge regression of what
   stage 1 leaves on features constant within a case (family, log FLOPs, log bytes,
   memory-bound), added to stage 1's weights, which then rank exactly as before.

Reported:

- **held-out rank correlation**: candidates split at random into 4 folds within each case;
  fitted on 3, the Spearman correlation of estimate and measurement over the 4th's
  candidates of each case (averaged over cases with >= 5 held-out candidates), all folds:
  how well it orders the policies of one problem, what a planner needs; and pooled over
  every held-out candidate of every case (easier: shapes differ by orders of magnitude);
- **leave-one-case-out**: fitted without a whole case, ranked on it (a new shape);
- **error**: the median |estimate/measured - 1| over held-out candidates.

Only numpy; no GPU. See docs/costmodel.md.
"""

from __future__ import annotations

import argparse
import json
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from argus_core.costmodel.features import VERSION, features
from argus_core.evaluate.costmodel import analytic_time
from argus_core.types import CompileReport, Policy

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
OUT = Path(__file__).resolve().parent / "h200_fit.py"
RIDGE = 10.0  # stage 1's penalty (chosen by held-out Spearman: docs/costmodel.md)
LEVEL_RIDGE = 0.01  # stage 2's (chosen by the held-out median error)
SINCE = "2026-12-01"  # records measured before this date timed other kernels
# the features constant within a case that stage 2 fits the level with (and their
# per-family and memory-bound copies)
LEVEL = ("bias", "log_flops", "log_bytes", "membound")
# gpu_bench's short policy keys and the compiler options they stand for
KEYS = {
    "w": "num_warps",
    "s": "num_stages",
    "tma": "tma",
    "ws": "warp_specialize",
    "persist": "persistent",
}
MOE_FIXED = {"BT": 32, "BE": 128, "BS": 256, "BH": 128}
# a case's policies timed as CUDA-graph replays (`gpu_bench`'s `graph_replay`) form a case
# of their own: without the launches between them their level differs (3.5% on MoE decode
# T16), and within a case only one way of timing is compared
GRAPH = " [graph replay]"


def base_case(case: str) -> str:
    """The case a record's case names, whichever way it was timed."""
    return case.split(GRAPH)[0]


@dataclass
class Record:
    """One measured candidate: where, what, how fast."""

    source: str
    family: str
    case: str
    shape: dict[str, int]
    policy: Policy
    report: CompileReport | None
    ms: float


def policy_of(family: str, shape: dict[str, int], p: dict[str, int]) -> Policy:
    """A gpu_bench policy dict ({BM, ..., w, s, tma, persist, ws}) as a Policy."""
    tiles = {k: int(v) for k, v in p.items() if k not in KEYS}
    if family == "attention":
        tiles["HEAD_D"] = int(shape["D"])
    if family == "moe":
        tiles = {**MOE_FIXED, **tiles}
    return Policy(tiles, {KEYS[k]: int(v) for k, v in p.items() if k in KEYS})


def load_records(paths: Iterable[Path], device: str = "H200", since: str = SINCE) -> list[Record]:
    """Every timed, correct candidate of the gpu_bench JSON files measured on `device` on or
    after `since` (a date, "" for all); a policy timed in several runs once, at the
    geometric mean of its times (the last run's compile report)."""
    found: dict[tuple, list[Record]] = {}
    for path in paths:
        data = json.loads(Path(path).read_text())
        if not isinstance(data, dict) or not isinstance(data.get("meta"), dict):
            continue  # not a gpu_bench run (another benchmark's results)
        if device not in str(data["meta"].get("device", "")):
            continue
        if since and str(data["meta"].get("date", ""))[:10] < since:
            continue
        for case in data.get("cases", []):
            shape = {k: int(v) for k, v in case["shape"].items()}
            for t in case.get("tried", []):
                if not t.get("ms") or t.get("same_as"):
                    continue
                fields = t.get("compile") or {}
                report = (
                    CompileReport(
                        target="cuda:90",
                        ok=True,
                        registers=fields.get("registers"),
                        spills=fields.get("spills"),
                        shared_bytes=fields.get("shared_bytes"),
                    )
                    if "registers" in fields
                    else None
                )
                replay = bool((t.get("graph_replay") or {}).get("kernel"))
                rec = Record(
                    Path(path).name,
                    case["family"],
                    f"{case['family']} {case['name']}" + (GRAPH if replay else ""),
                    shape,
                    policy_of(case["family"], shape, t["policy"]),
                    report,
                    float(t["ms"]),
                )
                found.setdefault((rec.case, _policy_id(rec.policy)), []).append(rec)
    out = []
    for recs in found.values():
        last = recs[-1]
        ms = math.exp(sum(math.log(r.ms) for r in recs) / len(recs))
        report = next((r.report for r in reversed(recs) if r.report is not None), None)
        source = ",".join(dict.fromkeys(r.source for r in recs))  # every run that timed it
        out.append(Record(source, last.family, last.case, last.shape, last.policy, report, ms))
    return out


def _policy_id(policy: Policy) -> str:
    """A policy's identity: its tiles and its options that are on (0 and absent alike)."""
    on = sorted((k, v) for k, v in policy.compiler.items() if v)
    return repr((sorted(policy.tiles.items()), on))


def design(records: Sequence[Record], spec: Any, families: dict[str, Any]) -> tuple[list, Any]:
    """(feature names, matrix) of the records."""
    rows = []
    for r in records:
        fam = families[r.family]
        a = analytic_time(spec, fam, r.shape, "bf16", r.policy, r.report).ms
        rows.append(features(spec, fam, r.shape, "bf16", r.policy, r.report, a))
    for row in rows:  # every record has every name (zero where a family lacks one)
        row.setdefault("bias", 1.0)
    names = sorted({k for row in rows for k in row})
    return names, np.array([[row.get(k, 0.0) for k in names] for row in rows])


def ridge(x: Any, y: Any, lam: float = RIDGE) -> Any:
    """Coefficients of min |x w - y|^2 + lam |w|^2 (the bias column not penalized)."""
    penalty = lam * np.eye(x.shape[1])
    return np.linalg.solve(x.T @ x + penalty, x.T @ y)


def level_columns(names: Sequence[str]) -> list[int]:
    """The columns stage 2 fits: features constant within a case (`LEVEL`), their family
    and memory-bound copies, and the family indicators."""
    out = []
    for i, n in enumerate(names):
        base = n.split("*")[-1]
        if n.startswith("family_") and "*" not in n:
            out.append(i)
        elif base in LEVEL and n.count("*") <= 1:
            out.append(i)
    return out


def fit_weights(names: Sequence[str], x: Any, y: Any, case_of: Any, lam: float = RIDGE) -> Any:
    """The two-stage fit (module docstring): within-case weights, plus the level weights on
    the case-constant columns. `case_of[i]` names record i's case."""
    case_of = np.asarray(case_of)
    xc, yc = x.astype(float).copy(), y.astype(float).copy()
    for c in np.unique(case_of):
        m = case_of == c
        xc[m] -= x[m].mean(axis=0)
        yc[m] -= y[m].mean()
    sd = xc.std(axis=0)
    sd[sd < 1e-12] = 1.0
    w = np.linalg.solve((xc / sd).T @ (xc / sd) + lam * np.eye(x.shape[1]), (xc / sd).T @ yc) / sd
    # stage 2: the level from the case-constant columns, and one scale of stage 1's
    # prediction (ridge shrinks its spread; a positive scale keeps its order)
    lvl = level_columns(names)
    z = np.column_stack([x[:, lvl], x @ w])
    zs = z.std(axis=0)
    zs[zs < 1e-12] = 1.0
    zs[[lvl.index(i) for i in lvl if names[i] == "bias"]] = 1.0
    pen = LEVEL_RIDGE * np.eye(z.shape[1])
    pen[[lvl.index(i) for i in lvl if names[i] == "bias"], :] = 0.0  # the bias is free
    v = np.linalg.solve((z / zs).T @ (z / zs) + pen, (z / zs).T @ y) / zs
    scale = max(float(v[-1]), 1e-3)
    w = w * scale
    w[lvl] += v[:-1]
    return w


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation (average ranks for ties)."""

    def ranks(v: Sequence[float]) -> Any:
        v = np.asarray(v, dtype=float)
        order = v.argsort(kind="stable")
        r = np.empty(len(v))
        r[order] = np.arange(len(v))
        for val in np.unique(v):  # ties share their mean rank
            idx = v == val
            r[idx] = r[idx].mean()
        return r

    ra, rb = ranks(a), ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return 0.0
    return float(np.corrcoef(ra, rb)[0, 1])


def _by_case(records: Sequence[Record]) -> dict[str, list[int]]:
    cases: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        cases.setdefault(r.case, []).append(i)
    return cases


def evaluate(
    records: Sequence[Record], spec: Any, families: dict[str, Any], folds: int = 4, seed: int = 0
) -> dict[str, Any]:
    """Held-out figures (module docstring): per-case Spearman on random folds and leave-one-
    case-out, the median relative error, and the analytic model's Spearman for comparison."""
    names, x = design(records, spec, families)
    y = np.log([r.ms for r in records])
    cases = _by_case(records)
    rng = random.Random(seed)
    fold_of = np.zeros(len(records), dtype=int)
    for idx in cases.values():
        idx = list(idx)
        rng.shuffle(idx)
        for j, i in enumerate(idx):
            fold_of[i] = j % folds
    case_of = np.array([r.case for r in records])
    pred = np.zeros(len(records))
    for f in range(folds):
        train, test = fold_of != f, fold_of == f
        pred[test] = x[test] @ fit_weights(names, x[train], y[train], case_of[train])
    analytic = x[:, names.index("log_analytic")]
    per_case, per_case_analytic = {}, {}
    for case, idx in cases.items():
        for f in range(folds):
            held = [i for i in idx if fold_of[i] == f]
            if len(held) >= 5:
                per_case.setdefault(case, []).append(spearman(pred[held], y[held]))
                per_case_analytic.setdefault(case, []).append(spearman(analytic[held], y[held]))
    loco, loco_err = {}, []
    for case, idx in cases.items():
        if len(idx) < 5:
            continue
        # without the case however it was timed (its graph replays too)
        train = np.array([base_case(r.case) != base_case(case) for r in records])
        w = fit_weights(names, x[train], y[train], case_of[train])
        loco[case] = spearman(x[idx] @ w, y[idx])
        loco_err += list(np.abs(np.exp(x[idx] @ w - y[idx]) - 1))
    err = np.abs(np.exp(pred - y) - 1)
    pooled = spearman(pred, y)  # every held-out candidate of every case together
    mean = lambda d: float(np.mean([np.mean(v) if isinstance(v, list) else v for v in d.values()]))  # noqa: E731
    return {
        "records": len(records),
        "cases": len(cases),
        "spearman_heldout": mean(per_case),
        "spearman_heldout_pooled": pooled,
        "spearman_heldout_per_case": {k: float(np.mean(v)) for k, v in per_case.items()},
        "spearman_analytic": mean(per_case_analytic),
        "spearman_leave_case_out": mean(loco) if loco else None,
        "spearman_leave_case_out_per_case": loco,
        "median_error": float(np.median(err)),
        "median_error_leave_case_out": float(np.median(loco_err)) if loco_err else None,
    }


def fit(records: Sequence[Record], spec: Any, families: dict[str, Any]) -> dict[str, Any]:
    """The calibration fitted on every record, with its held-out figures."""
    names, x = design(records, spec, families)
    w = fit_weights(names, x, np.log([r.ms for r in records]), [r.case for r in records])
    stats = evaluate(records, spec, families)
    return {
        "features": VERSION,
        "coef": {n: float(v) for n, v in zip(names, w) if v != 0.0},
        "families": sorted({r.family for r in records}),
        "records": len(records),
        "sources": sorted({s for r in records for s in r.source.split(",")}),
        "spearman": stats["spearman_heldout"],
        "spearman_pooled": stats["spearman_heldout_pooled"],
        "spearman_leave_case_out": stats["spearman_leave_case_out"],
        "spearman_analytic": stats["spearman_analytic"],
        "spearman_per_case": stats["spearman_heldout_per_case"],
        "error_pct": 100 * stats["median_error"],
        "error_pct_new_shape": 100 * (stats["median_error_leave_case_out"] or float("nan")),
    }


def registry_objects(backend: str = "h200") -> tuple[Any, dict[str, Any]]:
    """The backend's spec and the GEMM, attention and MoE families, from the plugins."""
    from argus_core.plugin_manager import Registry, default_plugin_manager

    reg = Registry(default_plugin_manager())
    fams = {n: reg.get("kernel", n) for n in ("gemm", "attention", "moe")}
    return reg.get("backend", backend).spec, fams


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", type=Path, help="gpu_bench JSON (default: all H200 ones)")
    ap.add_argument("--check", action="store_true", help="report the held-out figures only")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    paths = args.paths or sorted(RESULTS.glob("*h200*.json"))
    spec, fams = registry_objects()
    records = load_records(paths)
    if not records:
        print("no H200 measurements in " + ", ".join(map(str, paths)))
        return 1
    stats = evaluate(records, spec, fams)
    for k, v in stats.items():
        if isinstance(v, dict):
            for case, s in v.items():
                print(f"  {k} {case}: {s:.3f}")
        else:
            print(f"{k}: {v:.3f}" if isinstance(v, float) else f"{k}: {v}")
    if args.check:
        return 0
    cal = fit(records, spec, fams)
    args.out.write_text(
        '"""Written by `python -m argus_core.costmodel.fit` from recorded H200 measurements\n'
        '(docs/costmodel.md); do not edit by hand."""\n\n'
        "# fmt: off\n"
        f"CALIBRATION: dict = {json.dumps(cal, indent=4)}\n".replace("null", "None")
        + "# fmt: on\n"
    )
    print(f"wrote {args.out} ({cal['records']} records)")
    return 0 if math.isfinite(cal["spearman"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
