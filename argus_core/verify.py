"""`python -m argus_core.verify PATH [--kernel NAME] [--policy BM=64,...] [--num-warps 4]
[--dsl tile] [--verifier smt] [--backend mi300x]`

Verifies one DSL file and prints JSON `{"status", "kernel", "counterexamples", "seconds",
"summary", "policy", "backend", "target"}`. Exit status: 0 verified, 1 violated, 2 unknown,
a malformed program (the message names the file and line) or an unknown plugin name.

The DSL front end, the verifier and the backend are plugins named as in `argus dsl=...
verifier=... backend=...`, with the same configs (`--timeout-ms` overrides the verifier's
`timeout_ms`); the backend's declared target (`backend.spec`: warp size, ...) is what the
counterexamples' warps and lanes are of. `backend=auto` resolves to the GPU present, else
its CPU fallback. Without `--policy`, the tiles are what the module declares through its
DSL front end (`default_policy`: the tile DSL's `DEFAULT_POLICY` dict), 64 for a constant
it leaves out; if it declares none, 64 for every constexpr and 8 for one named GROUP.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
from typing import Any

from argus_core.config import compose
from argus_core.errors import ArgusError, DSLError
from argus_core.plugin_manager import Registry, config_search_paths, default_plugin_manager
from argus_core.types import Policy

EXIT = {"verified": 0, "violated": 1, "unknown": 2, "skipped": 2}  # skipped: verifier=none


def parse_policy(text: str) -> dict[str, int]:
    """'BM=64,BN=64' -> {'BM': 64, 'BN': 64}; errors name the bad entry."""
    out: dict[str, int] = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        name, eq, value = item.partition("=")
        if not eq or not name.isidentifier() or not value.strip().lstrip("-").isdigit():
            raise ValueError(f"bad --policy entry {item!r}; expected NAME=INT, e.g. BM=64")
        out[name] = int(value)
    return out


def default_policy(ir: Any, declared: dict[str, int] | None) -> dict[str, int]:
    """Tiles for every constexpr of `ir`: the module's `declared` ones (None: it declares
    none), 64 for the rest, 8 for a GROUP when nothing is declared."""
    if declared is not None:
        return {c.name: int(declared.get(c.name, 64)) for c in ir.constexprs}
    return {c.name: (8 if c.name == "GROUP" else 64) for c in ir.constexprs}


def plugins(dsl: str, verifier: str, backend: str) -> tuple[Any, Any, Any, dict[str, Any]]:
    """(DSL front end, verifier, resolved backend, the verifier's config) for these names,
    composed and looked up as `argus dsl=... verifier=... backend=...` would; ConfigError
    (UnknownPluginError) names a bad name and the valid ones."""
    pm = default_plugin_manager()
    registry = Registry(pm)
    cfg = compose(
        [f"dsl={dsl}", f"verifier={verifier}", f"backend={backend}"], config_search_paths(pm)
    )
    chosen, _grid = registry.get("backend", cfg.backend.name).resolve(registry, cfg.backend)
    return (
        registry.get("dsl", cfg.dsl.name),
        registry.get("verifier", cfg.verifier.name),
        chosen,
        dict(cfg.verifier),
    )


def run(argv: list[str] | None = None) -> tuple[int, dict[str, Any]]:
    ap = argparse.ArgumentParser(
        prog="python -m argus_core.verify", description=__doc__.split("\n\n")[1]
    )
    ap.add_argument("path")
    ap.add_argument("--kernel", default=None, help="the kernel to verify (default: the only one)")
    ap.add_argument("--policy", default=None, help="tile constants, e.g. BM=64,BN=64,BK=32,GROUP=8")
    ap.add_argument("--num-warps", type=int, default=4)
    ap.add_argument("--timeout-ms", type=int, default=None, help="default: the verifier's config")
    ap.add_argument("--dsl", default="tile", help="the DSL front end plugin (default: tile)")
    ap.add_argument("--verifier", default="smt", help="the verifier plugin (default: smt)")
    ap.add_argument(
        "--backend", default="mi300x", help="the target's backend plugin (default: mi300x)"
    )
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    path = pathlib.Path(args.path)
    result: dict[str, Any] = {
        "status": "unknown",
        "kernel": args.kernel,
        "counterexamples": [],
        "seconds": 0.0,
    }
    try:
        dsl, verifier, backend, options = plugins(args.dsl, args.verifier, args.backend)
        result.update(backend=backend.name, target=backend.spec.name)
        if args.timeout_ms is not None:
            options["timeout_ms"] = args.timeout_ms
        source = path.read_text()
        kernels = dsl.kernels(source, str(path))
        name = args.kernel or (kernels[0] if len(kernels) == 1 else None)
        if name not in kernels:
            found = ", ".join(sorted(kernels)) or "(none)"
            raise DSLError(
                f"choose a kernel with --kernel; kernels found: {found}"
                if name is None
                else f"no @{dsl.kernel_decorator} named {name!r}; kernels found: {found}",
                str(path),
            )
        result["kernel"] = name
        ir = dsl.parse(source, name, str(path))
        if args.policy:
            tiles = parse_policy(args.policy)
        else:
            tiles = default_policy(ir, dsl.default_policy(source, str(path)))
        unknown = sorted(set(tiles) - {c.name for c in ir.constexprs})
        if unknown:
            raise ValueError(
                f"--policy names {unknown}, not constexprs of {name!r}: "
                f"{[c.name for c in ir.constexprs]}"
            )
        policy = Policy(tiles, {"num_warps": args.num_warps})
        report = verifier.verify(ir, policy, options, backend.spec)
        result.update(
            status=report.status,
            counterexamples=report.counterexamples,
            summary=report.summary,
            assertions=report.assertions,
            policy=tiles,
        )
    except (ArgusError, ValueError, OSError) as exc:
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
