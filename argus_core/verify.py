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
    ap.add_argument(
        "--synthesize",
        action="store_true",
        help="also prove the invariants synthesized from the family's reference "
        "(docs/invariants.md); the status is then theirs too",
    )
    ap.add_argument(
        "--explain",
        action="store_true",
        help="print the strength report: which parts of the data flow are pinned by "
        "hand-written, implied or synthesized assertions (implies --synthesize)",
    )
    ap.add_argument(
        "--family",
        default=None,
        help="the kernel family whose reference spec to synthesize from (default: the "
        "first registered family with a spec for the kernel)",
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
        if args.synthesize or args.explain:
            result.update(_synthesized(args, ir, name, policy, verifier, options, backend))
    except (ArgusError, ValueError, OSError) as exc:
        result.update(status="unknown", error=str(exc))
        print(f"error: {exc}", file=sys.stderr)
    result["seconds"] = round(time.perf_counter() - t0, 4)
    return EXIT[result["status"]], result


def _synthesized(args, ir, name, policy, verifier, options, backend) -> dict[str, Any]:
    """Synthesize the family's reference spec onto the kernel with its hand-written tags
    deleted, prove it, and (with --explain) print the strength report to stderr."""
    from argus_core.spec import synthesis

    registry = Registry(default_plugin_manager())
    fams = [args.family] if args.family else registry.names("kernel")
    modes: list = []
    for fam in fams:
        modes = registry.get("kernel", fam).reference_specs(name)
        if modes:
            break
    out: dict[str, Any] = {}
    syn = None
    if modes:
        t = time.perf_counter()
        rep = synthesis.check_modes(verifier, ir, policy, modes, backend.spec, options)
        values, spec = synthesis.kernel_modes(ir, modes)[0]
        syn = synthesis.synthesize(synthesis.with_scalars(ir, values) if values else ir, spec)
        out["synthesized"] = {
            "status": rep.status,
            "assertions": rep.synthesized,
            "pinned": rep.pinned,
            "counterexamples": rep.counterexamples,
            "synth_seconds": round(rep.synth_seconds, 4),
            "seconds": round(time.perf_counter() - t, 4),
        }
        if rep.status == "violated":
            out.update(status="violated", summary=rep.summary)
    elif args.family:
        raise ValueError(f"family {args.family!r} has no reference spec for kernel {name!r}")
    if args.explain:
        strength = synthesis.strength_report(ir, syn)
        out["explain"] = strength
        print(synthesis.strength_text(strength), file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    code, result = run(argv)
    print(json.dumps(result, indent=2, default=str))
    return code


if __name__ == "__main__":
    sys.exit(main())
