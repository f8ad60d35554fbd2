"""Does an exported op run as fast as the run measured it? (issue #18)

For each case: a real `argus` run on the GPU (planner=search, tracking=none), `argus export`
of its best candidate, `pip install` of the package into a private folder, then in this
process, on the same rotated input sets and with the same timing method as the run's
worker (`argus_core.evaluate.timing.bench`: do_bench medians, CUDA-graph replay under 1 ms):
the run's lowered kernel launched the way Argus launches it, and the exported
`torch.ops.<pkg>.<kernel>` (domain check, output allocation and dispatch included). Prints
a table last: the run's recorded figure, both same-process figures and the ratios.

    bash benchmarks/on_device.sh python3 benchmarks/export_bench.py          # H200, ~4 min
    python benchmarks/export_bench.py --dry-run   # CPU: runs, exports, installs, checks

`--dry-run` uses the interpreter backend at small shapes and checks the op's outputs against
the family's reference (no timing: CPU figures would be meaningless).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CASES = {
    "gemm": {"M": 4096, "N": 4096, "K": 4096},
    "attention": {
        "B": 4,
        "HQ": 32,
        "HKV": 8,
        "S": 4096,
        "SKV": 4096,
        "D": 128,
        "CAUSAL": 1,
        "VARLEN": 0,
    },
}
DRY = {
    "gemm": {"M": 96, "N": 80, "K": 64},
    "attention": {"B": 1, "HQ": 4, "HKV": 2, "S": 40, "SKV": 48, "D": 64, "CAUSAL": 1, "VARLEN": 0},
}


def _flow(d: dict[str, int]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in d.items()) + "}"


def run_and_export(
    kernel: str, shape: dict[str, int], work: Path, backend: str, budget: int
) -> tuple[Path, Path]:
    """(run directory, installed site folder) of one case."""
    cwd = work / kernel
    cwd.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    cmd = [sys.executable, "-m", "argus_core.cli", f"+kernel={kernel}", f"backend={backend}",
           "planner=search", f"budget={budget}", "tracking=none", "progress=off", "seed=0",
           f"kernel.shape={_flow(shape)}"]  # fmt: skip
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    print(
        f"[{kernel}] argus run: exit {done.returncode} in {time.perf_counter() - t0:.0f} s",
        flush=True,
    )
    print(done.stdout[-2500:], flush=True)
    if done.returncode != 0:
        raise RuntimeError(f"argus run failed: {done.stderr[-2000:]}")
    (run,) = sorted((cwd / ".argus" / "runs").iterdir())
    pkg = cwd / "pkg"
    done = subprocess.run(
        [sys.executable, "-m", "argus_core.cli", "export", str(run), "--out", str(pkg), "--force"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"argus export failed: {done.stderr[-2000:]}")
    site = cwd / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(site), str(pkg)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if done.returncode != 0:  # (no setuptools there, say): import it from where it was written
        print(
            f"[{kernel}] pip install failed, importing from {pkg}: {done.stderr[-600:]}", flush=True
        )
        return run, pkg
    return run, site


def best_record(run: Path) -> dict[str, Any]:
    from argus_core.export import load_run

    return load_run(run).record


def measure_case(
    kernel: str, shape: dict[str, int], run: Path, site: Path, dry: bool
) -> dict[str, Any]:
    import importlib

    import torch

    from argus_core.evaluate.launch import launch_args, load_kernel
    from argus_core.evaluate.outputs import compare
    from argus_core.evaluate.timing import bench
    from argus_core.plugin_manager import Registry, make_plugin_manager
    from argus_core.types import LoweredKernel

    sys.path.insert(0, str(site))
    name = f"argus_{kernel}"
    pkg = importlib.import_module(name)
    op_meta = pkg.MANIFEST["ops"][kernel]
    op = getattr(torch.ops, name).__getattr__(kernel)
    rec = best_record(run)
    family = Registry(make_plugin_manager()).get("kernel", kernel)
    dtype = "bf16"
    device = "cpu" if dry else "cuda"
    ins = [i["name"] for i in op_meta["inputs"]] + [s["name"] for s in op_meta["scalars"]]
    outs = [o["name"] for o in op_meta["outputs"]]

    def call_op(s: dict[str, Any]) -> Any:
        return op(*[s[n] for n in ins])

    first = family.make_inputs(shape, dtype, 1, device)
    got = call_op(first)
    got = (got,) if len(outs) == 1 else got
    expected = family.reference(first)
    atol, rtol = family.tolerance(dtype)
    checks = [compare(g, expected[n], atol, rtol) for g, n in zip(got, outs)]
    ok = all(c[0] for c in checks)
    row: dict[str, Any] = {
        "kernel": kernel,
        "shape": shape,
        "candidate": rec["candidate"]["id"],
        "policy": rec["candidate"]["policy"],
        "correct": ok,
        "why": "; ".join(c[3] for c in checks if not c[0]),
        "run_ms": (rec.get("timing") or {}).get("ms"),
        "run_estimated": bool((rec.get("timing") or {}).get("estimated", True)),
    }
    if dry or not ok:
        return row
    nbytes = sum(int(v.numel() * v.element_size()) for v in first.values() if hasattr(v, "numel"))
    n = max(1, min(8, math.ceil(3 * (60 << 20) / max(1, nbytes))))
    sets = [first] + [family.make_inputs(shape, dtype, 1 + i, device) for i in range(1, n)]
    lowered = LoweredKernel.from_dict(rec["lowered"])
    fn = load_kernel(lowered)
    # the launch options as the backend gives them to Triton (those its lowering read dropped)
    compiler = dict(op_meta["buckets"][0]["compiler"])

    def run_path(s: dict[str, Any]) -> None:
        args, grid = launch_args(lowered, s, dict(rec["candidate"]["policy"]["tiles"]))
        fn[grid](*args, **compiler)

    for label, f in (("argus_ms", run_path), ("export_ms", call_op)):
        cyc = iter(sets * 100000)
        row[label] = bench(lambda f=f, cyc=cyc: f(next(cyc)), 25, 100)
    row["export_vs_run"] = row["export_ms"] / row["run_ms"] if row["run_ms"] else None
    row["export_vs_argus"] = row["export_ms"] / row["argus_ms"]
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--dry-run", action="store_true", help="CPU: interpreter, small shapes, no timing"
    )
    ap.add_argument("--budget", type=int, default=3)
    ap.add_argument("--cases", default="gemm,attention")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    if args.dry_run:
        os.environ.pop("TRITON_INTERPRET", None)
    cases = DRY if args.dry_run else CASES
    backend = "interpret" if args.dry_run else "auto"
    work = Path(tempfile.mkdtemp(prefix="argus-export-bench-"))
    prepared = {}
    for kernel in args.cases.split(","):
        try:
            prepared[kernel] = run_and_export(kernel, cases[kernel], work, backend, args.budget)
        except Exception as exc:  # one case failing does not stop the others
            print(f"[{kernel}] FAILED: {exc}", flush=True)
    rows = []
    if args.dry_run:  # the op runs in the interpreter: a child process with TRITON_INTERPRET
        for kernel, (run, site) in prepared.items():
            call = (str(ROOT), kernel, cases[kernel], str(run), str(site))
            code = (
                "import json, sys; from pathlib import Path; sys.path.insert(0, {!r}); "
                "from benchmarks.export_bench import measure_case; "
                "print('ROW ' + json.dumps(measure_case({!r}, {!r}, Path({!r}), Path({!r}), "
                "True), default=str))"
            ).format(*call)
            env = {**os.environ, "TRITON_INTERPRET": "1"}
            done = subprocess.run(
                [sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=ROOT
            )
            line = next((x for x in done.stdout.splitlines() if x.startswith("ROW ")), None)
            rows.append(
                json.loads(line[4:])
                if line
                else {"kernel": kernel, "correct": False, "why": done.stderr[-800:]}
            )
    else:
        for kernel, (run, site) in prepared.items():
            try:
                rows.append(measure_case(kernel, cases[kernel], run, site, False))
            except Exception as exc:
                rows.append(
                    {"kernel": kernel, "correct": False, "why": f"{type(exc).__name__}: {exc}"}
                )
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "export_bench.json").write_text(json.dumps(rows, indent=2, default=str))

    def fmt(x: Any, spec: str = ".4f") -> str:
        return "—" if x is None else format(x, spec)

    table = [
        [r["kernel"], r.get("candidate", "—"), "yes" if r.get("correct") else f"NO {r.get('why', '')[:60]}",
         fmt(r.get("run_ms")) + (" (est.)" if r.get("run_estimated") else ""),
         fmt(r.get("argus_ms")), fmt(r.get("export_ms")), fmt(r.get("export_vs_run"), ".3f"),
         fmt(r.get("export_vs_argus"), ".3f")]
        for r in rows
    ]  # fmt: skip
    headers = ["kernel", "cand", "correct", "run ms (recorded)", "argus launch ms",
               "exported op ms", "op/run", "op/argus"]  # fmt: skip
    try:
        from tabulate import tabulate
    except ImportError:  # the GPU image may lack it: plain columns
        print("\n".join("  ".join(str(c) for c in row) for row in [headers, *table]))
    else:
        print(tabulate(table, headers=headers))
    return (
        0 if all(r.get("correct") for r in rows) and len(rows) == len(args.cases.split(",")) else 1
    )


if __name__ == "__main__":
    sys.exit(main())
