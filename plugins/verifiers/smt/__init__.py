"""`verifier=smt`: abstract interpretation of the IR over tags, with one z3 query per assertion.

`SmtVerifier.verify(ir, policy, options, target)` proves every assertion the kernel states
or its ops imply, for all shapes up to `max_extent`, all programs, elements and iterations;
or returns counterexamples, whose threads are warps and lanes of `target` (its
`wave_size`). A query that times out (`timeout_ms`) makes the report `unknown`, never
`verified`. See docs/verifier.md.

Modules, each importing only those listed before it:
`exprs` (IR expression helpers), `domain` (abstract values), `z3terms` (expressions as z3
terms), `solver` (z3 queries),
`cause` (the ranked backward slice of a failing assertion), `counterexample`, `checker`
(findings), `prefix_sums` and `data_values` (values of data),
`select_witnesses`, `interpreter` (dispatch through a rule table), `contraction_coverage`,
`store_coverage`, the transfer functions (`tile_ops`, `tag_ops`, `loop_ops`, `data_ops`),
`transfer` (the table), `softmax_bases` (a second pass), and this package.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import hashlib
import re
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any

import z3

from argus_core.errors import ConfigError
from argus_core.ir import KernelIR
from argus_core.ir.explicit import ExplicitKernel
from argus_core.target import TargetSpec
from argus_core.types import Policy, VerifyReport
from argus_plugins.verifiers.smt import softmax_bases
from argus_plugins.verifiers.smt.checker import Checker, Finding
from argus_plugins.verifiers.smt.counterexample import Threads
from argus_plugins.verifiers.smt.data_values import DataState, uses_data
from argus_plugins.verifiers.smt.domain import Frame
from argus_plugins.verifiers.smt.interpreter import Interpreter
from argus_plugins.verifiers.smt.solver import Context
from argus_plugins.verifiers.smt.transfer import EXPLICIT_LEVEL, TRANSFER

# the keys of a VerifierConfig dict (conf/verifier/smt.yaml) and of its `options`
CONFIG_KEYS = ("name", "timeout_ms", "fail_on_unknown", "options")
OPTION_KEYS = (
    "timeout_ms",  # per query (also a top-level key; `options` wins)
    "max_extent",  # shapes proved for every extent in [1, max_extent]
    "small_extent",  # the probe's box: shapes <= small_extent first
    "probe_ms",  # time of the probe in the small box
    "minimize_checks",  # solver calls to minimize one counterexample (0: none)
    "cache",  # the in-process proof cache
    "synthesize",  # read by the pipeline (synthesized invariants, issue #19)
)


def check_options(options: Mapping[str, Any] | None) -> None:
    """ConfigError naming a key the verifier does not read, and the valid ones (a typo
    such as `minimise_checks` would otherwise be ignored silently)."""
    options = dict(options or {})
    # an option may also be given at the top level (`{"timeout_ms": 1, "probe_ms": 0}`)
    valid = CONFIG_KEYS + tuple(k for k in OPTION_KEYS if k not in CONFIG_KEYS)
    bad = [k for k in options if k not in valid]
    if bad:
        raise ConfigError(
            f"unknown verifier key {bad[0]!r} for verifier=smt; valid keys: {', '.join(valid)}"
        )
    nested = options.get("options") or {}
    if not isinstance(nested, Mapping):
        raise ConfigError(f"verifier.options must be a mapping, got {nested!r}")
    bad = [k for k in nested if k not in OPTION_KEYS]
    if bad:
        raise ConfigError(
            f"unknown key 'verifier.options.{bad[0]}' for verifier=smt; valid keys: "
            f"{', '.join(OPTION_KEYS)}"
        )


def _options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Flatten a VerifierConfig dict ({"timeout_ms", "options": {...}}) into one mapping,
    after checking its keys (`check_options`)."""
    check_options(options)
    out = {k: v for k, v in dict(options or {}).items() if k != "options"}
    out.update(dict((options or {}).get("options") or {}))
    return out


# proofs by (IR, tile constants, options): a verdict does not depend on num_warps,
# num_stages or the target's warp size (they only name a counterexample's thread), so
# changing them never re-verifies; a violated report is kept per (num_warps, wave_size)
_PROOFS: OrderedDict[tuple, dict[Any, VerifyReport]] = OrderedDict()
_PROOFS_MAX = 512
_TILE_ID = re.compile(r"%\d+")


def ir_key(ir: KernelIR) -> str | None:
    """A content hash of the traced kernel: its source and entry (tracing is deterministic)
    and its ops; the same source traced twice hashes the same (tile numbers, which count
    across traces, are renumbered in order of appearance). None for an IR built without
    source, whose ops' text does not show every tile's type: it is not cached."""
    if not ir.source:
        return None
    text = repr(
        (ir.name, ir.file, ir.source, ir.tensors, ir.shape_syms, ir.constexprs, ir.ops)
        + (ir.grid, ir.scalars)
    )
    ids: dict[str, str] = {}
    text = _TILE_ID.sub(lambda m: ids.setdefault(m.group(0), f"%t{len(ids)}"), text)
    return hashlib.sha256(text.encode()).hexdigest()


def proof_key(ir: KernelIR, policy: Policy, opts: Mapping[str, Any]) -> tuple | None:
    """What a verdict depends on: the IR, the tile constants, the verifier's options and the
    solver's version (None: not cached)."""
    code = ir_key(ir)
    if code is None:
        return None
    tiles = tuple(sorted((k, int(v)) for k, v in policy.tiles.items()))
    options = tuple(sorted((k, repr(v)) for k, v in opts.items() if k != "cache"))
    return (code, tiles, options, z3.get_version_string())


def clear_proof_cache() -> None:
    _PROOFS.clear()


def analyse(
    ir: KernelIR, policy: Policy, options: Mapping[str, Any] | None, target: TargetSpec
) -> tuple[list[Finding], Context]:
    """Every assertion's finding (proved, violated with a counterexample, or unknown), for
    the kernel run on `target` (its warp size names a counterexample's lanes)."""
    opts = _options(options or {})
    with _no_cyclic_gc():
        ctx = Context(ir, policy, opts)
        frame = Frame()
        data = DataState(ctx, frame) if uses_data(ir) else None
        ctx.data = data  # the solver's theory of data reads (None: no data ops)
        threads = Threads(int(policy.compiler.get("num_warps", 4)), int(target.wave_size))
        chk = Checker(ctx, threads)
        Interpreter(ctx, chk, TRANSFER, frame, data).run(ir.ops)
        softmax_bases.check(ctx, chk, ir)  # bases of an online softmax's exponentials
    return chk.findings, ctx


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """Python's cyclic garbage collector off during one analysis: the analysis allocates
    millions of short-lived expression nodes, so the collector ran ~200 times per
    `moe_align` verification, scanning the whole heap at each full pass (8-15% of its
    time, more in a process that imported torch). Nothing is left to it: no cycle holds a
    z3 term (docs/verifier.md, "Queries and bounds"), so the verdicts and models are the
    same; what cycles there are are collected once the collector is back on."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class SmtVerifier:
    """`verifier=smt`."""

    name = "smt"

    def verify(
        self,
        ir: KernelIR,
        policy: Policy,
        options: Mapping[str, Any] | None,
        target: TargetSpec,
    ) -> VerifyReport:
        if isinstance(ir, ExplicitKernel):  # thread-level invariants (explicit_ops.py)
            check_options(options)
            return EXPLICIT_LEVEL(ir, {k: v for k, v in policy.tiles.items() if k in ir.consts})
        t0 = time.perf_counter()
        opts = _options(options or {})  # a bad key fails here, before any proof
        use_cache = bool(opts.get("cache", True))
        threads = (int(policy.compiler.get("num_warps", 4)), int(target.wave_size))
        key = proof_key(ir, policy, opts) if use_cache else None
        hit = _PROOFS.get(key) if key is not None else None
        if hit is not None:
            cached = hit.get(None) or hit.get(threads)
            if cached is not None:
                _PROOFS.move_to_end(key)
                out = copy.deepcopy(cached)
                out.seconds = time.perf_counter() - t0
                return out
        report = self._verify(ir, policy, options, target, t0)
        if key is not None and report.status != "unknown":  # a timeout may not recur
            # a report with counterexamples names threads: keep it per thread layout
            slot = threads if report.counterexamples else None
            _PROOFS.setdefault(key, {})[slot] = copy.deepcopy(report)
            _PROOFS.move_to_end(key)
            while len(_PROOFS) > _PROOFS_MAX:
                _PROOFS.popitem(last=False)
        return report

    def _verify(
        self,
        ir: KernelIR,
        policy: Policy,
        options: Mapping[str, Any] | None,
        target: TargetSpec,
        t0: float,
    ) -> VerifyReport:
        try:
            findings, _ctx = analyse(ir, policy, options, target)
        except (ValueError, KeyError) as exc:
            return VerifyReport(
                "unknown",
                seconds=time.perf_counter() - t0,
                summary=f"unknown: the verifier cannot model kernel {ir.name!r}: {exc}",
            )
        cexs: list[dict[str, Any]] = []
        seen = set()
        for f in findings:
            if f.cex is not None and (f.assertion, f.point.line) not in seen:
                seen.add((f.assertion, f.point.line))
                cexs.append(f.cex)
        unknown = [f for f in findings if f.status == "unknown"]
        status = "violated" if cexs else ("unknown" if unknown else "verified")
        if cexs:
            more = f" (and {len(cexs) - 1} more)" if len(cexs) > 1 else ""
            summary = cexs[0]["text"] + more
        elif unknown:
            u = unknown[0]
            summary = f"unknown: {u.assertion} at {u.point}: {u.note or 'solver gave up'}"
        else:
            summary = f"verified: {len(findings)} assertions proved"
        return VerifyReport(status, cexs, len(findings), time.perf_counter() - t0, summary)


__all__ = [
    "CONFIG_KEYS",
    "OPTION_KEYS",
    "SmtVerifier",
    "analyse",
    "check_options",
    "clear_proof_cache",
    "ir_key",
    "proof_key",
]
