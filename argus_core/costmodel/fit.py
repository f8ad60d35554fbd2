"""Fit the cost model's calibration on recorded GPU measurements, and measure how well it
ranks candidates it was not fitted on.

    python -m argus_core.costmodel.fit                       # fit on benchmarks/results, write h200_fit.py
    python -m argus_core.costmodel.fit --check               # only report the held-out figures

The records are `benchmarks/gpu_bench.py` JSON files (every policy it timed on the H200,
with its compile report's registers, spills and shared memory where `--space` recorded
them). The model is a ridge regression of log(measured ms) on `costmodel.features` (the
analytic model's log time, waves, occupancy, spills, tiles, options, family). Reported:

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

from argus_core.evaluate.costmodel import analytic_time, features
from argus_core.types import CompileReport, Policy

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
OUT = Path(__file__).resolve().parent / "h200_fit.py"
RIDGE = 3.0  # the ridge penalty (chosen by held-out Spearman: docs/costmodel.md)
# gpu_bench's short policy keys and the compiler options they stand for
KEYS = {
    "w": "num_warps",
    "s": "num_stages",
    "tma": "tma",
    "ws": "warp_specialize",
    "persist": "persistent",
}
MOE_FIXED = {"BT": 32, "BE": 128, "BS": 256, "BH": 128}


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


def load_records(paths: Iterable[Path], device: str = "H200") -> list[Record]:
    """Every timed, correct candidate of the gpu_bench JSON files measured on `device`."""
    out = []
    for path in paths:
        data = json.loads(Path(path).read_text())
        if not isinstance(data, dict) or not isinstance(data.get("meta"), dict):
            continue  # not a gpu_bench run (another benchmark's results)
        if device not in str(data["meta"].get("device", "")):
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
                out.append(
                    Record(
                        Path(path).name,
                        case["family"],
                        f"{case['family']} {case['name']}",
                        shape,
                        policy_of(case["family"], shape, t["policy"]),
                        report,
                        float(t["ms"]),
                    )
                )
    return out


def design(records: Sequence[Record], spec: Any, families: dict[str, Any]) -> tuple[list, Any]:
    """(feature names, matrix) of the records."""
    rows = []
    for r in records:
        fam = families[r.family]
        a = analytic_time(spec, fam, r.shape, "bf16", r.policy, r.report).ms
        rows.append(features(spec, fam, r.shape, "bf16", r.policy, r.report, a))
    names = sorted({k for row in rows for k in row})
    return names, np.array([[row.get(k, 0.0) for k in names] for row in rows])


def ridge(x: Any, y: Any, lam: float = RIDGE) -> Any:
    """Coefficients of min |x w - y|^2 + lam |w|^2 (the bias column not penalized)."""
    penalty = lam * np.eye(x.shape[1])
    return np.linalg.solve(x.T @ x + penalty, x.T @ y)


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
    pred = np.zeros(len(records))
    for f in range(folds):
        train, test = fold_of != f, fold_of == f
        pred[test] = x[test] @ ridge(x[train], y[train])
    analytic = x[:, names.index("log_analytic")]
    per_case, per_case_analytic = {}, {}
    for case, idx in cases.items():
        for f in range(folds):
            held = [i for i in idx if fold_of[i] == f]
            if len(held) >= 5:
                per_case.setdefault(case, []).append(spearman(pred[held], y[held]))
                per_case_analytic.setdefault(case, []).append(spearman(analytic[held], y[held]))
    loco = {}
    for case, idx in cases.items():
        if len(idx) < 5:
            continue
        train = np.ones(len(records), dtype=bool)
        train[idx] = False
        w = ridge(x[train], y[train])
        loco[case] = spearman(x[idx] @ w, y[idx])
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
    }


def fit(records: Sequence[Record], spec: Any, families: dict[str, Any]) -> dict[str, Any]:
    """The calibration fitted on every record, with its held-out figures."""
    names, x = design(records, spec, families)
    w = ridge(x, np.log([r.ms for r in records]))
    stats = evaluate(records, spec, families)
    return {
        "coef": {n: float(v) for n, v in zip(names, w)},
        "families": sorted({r.family for r in records}),
        "records": len(records),
        "sources": sorted({r.source for r in records}),
        "spearman": stats["spearman_heldout"],
        "spearman_pooled": stats["spearman_heldout_pooled"],
        "spearman_leave_case_out": stats["spearman_leave_case_out"],
        "spearman_analytic": stats["spearman_analytic"],
        "error_pct": 100 * stats["median_error"],
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
