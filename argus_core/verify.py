"""`python -m argus_core.verify PATH [--kernel NAME] [--policy BM=64,...] [--num-warps 4]`

Verifies one DSL file with the `smt` verifier and prints JSON
`{"status", "kernel", "counterexamples", "seconds", "summary", "policy"}`.
Exit status: 0 verified, 1 violated, 2 unknown or a malformed program (the message names
the file and line).

Without `--policy`, the tiles are the module's `DEFAULT_POLICY` dict if it defines one,
else 64 for every constexpr and 8 for one named GROUP.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
from typing import Any

from argus_core.errors import DSLError

EXIT = {"verified": 0, "violated": 1, "unknown": 2}


def parse_policy(text: str) -> dict[str, int]:
    """'BM=64,BN=64' -> {'BM': 64, 'BN': 64}; errors name the bad entry."""
    out: dict[str, int] = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        name, eq, value = item.partition("=")
        if not eq or not name.isidentifier() or not value.strip().lstrip("-").isdigit():
            raise ValueError(f"bad --policy entry {item!r}; expected NAME=INT, e.g. BM=64")
        out[name] = int(value)
    return out


def default_policy(ir: Any, ns: dict[str, Any]) -> dict[str, int]:
    declared = ns.get("DEFAULT_POLICY")
    if isinstance(declared, dict):
        return {c.name: int(declared[c.name]) for c in ir.constexprs if c.name in declared} | {
            c.name: 64 for c in ir.constexprs if c.name not in declared
        }
    return {c.name: (8 if c.name == "GROUP" else 64) for c in ir.constexprs}


def run(argv: list[str] | None = None) -> tuple[int, dict[str, Any]]:
    ap = argparse.ArgumentParser(
        prog="python -m argus_core.verify", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("path")
    ap.add_argument(
        "--kernel", default=None, help="the @al.kernel to verify (default: the only one)"
    )
    ap.add_argument("--policy", default=None, help="tile constants, e.g. BM=64,BN=64,BK=32,GROUP=8")
    ap.add_argument("--num-warps", type=int, default=4)
    ap.add_argument("--timeout-ms", type=int, default=10000)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    from argus_core.types import Policy
    from argus_plugins.dsl.tile import lang
    from argus_plugins.dsl.tile.frontend import load_module, trace_kernel
    from argus_plugins.verifiers.smt import SmtVerifier

    path = pathlib.Path(args.path)
    result: dict[str, Any] = {
        "status": "unknown",
        "kernel": args.kernel,
        "counterexamples": [],
        "seconds": 0.0,
    }
    try:
        source = path.read_text()
        ns = load_module(source, str(path))
        kernels = {k: v for k, v in ns.items() if isinstance(v, lang.KernelDef)}
        name = args.kernel or (next(iter(kernels)) if len(kernels) == 1 else None)
        if name not in kernels:
            raise DSLError(
                f"choose a kernel with --kernel; kernels found: {', '.join(sorted(kernels)) or '(none)'}"
                if name is None
                else f"no @al.kernel named {name!r}; kernels found: "
                f"{', '.join(sorted(kernels)) or '(none)'}",
                str(path),
            )
        result["kernel"] = name
        ir = trace_kernel(kernels[name], ns, str(path), source)
        tiles = parse_policy(args.policy) if args.policy else default_policy(ir, ns)
        unknown = sorted(set(tiles) - {c.name for c in ir.constexprs})
        if unknown:
            raise ValueError(
                f"--policy names {unknown}, not constexprs of {name!r}: "
                f"{[c.name for c in ir.constexprs]}"
            )
        policy = Policy(tiles, {"num_warps": args.num_warps})
        report = SmtVerifier().verify(ir, policy, {"timeout_ms": args.timeout_ms})
        result.update(
            status=report.status,
            counterexamples=report.counterexamples,
            summary=report.summary,
            assertions=report.assertions,
            policy=tiles,
        )
    except (DSLError, ValueError, OSError) as exc:
        result.update(status="unknown", error=str(exc))
        print(f"error: {exc}", file=sys.stderr)
    result["seconds"] = round(time.perf_counter() - t0, 4)
    return EXIT[result["status"]], result


def main(argv: list[str] | None = None) -> int:
    code, result = run(argv)
    print(json.dumps(result, indent=2, default=str))
    return code


if __name__ == "__main__":
    sys.exit(main())
