"""`verifier=smt`: abstract interpretation of the IR over tags, with one z3 query per assertion.

`SmtVerifier.verify(ir, policy, options, target)` proves every assertion the kernel states
or its ops imply, for all shapes up to `max_extent`, all programs, elements and iterations;
or returns counterexamples, whose threads are warps and lanes of `target` (its
`wave_size`). A query that times out (`timeout_ms`) makes the report `unknown`, never
`verified`. See docs/verifier.md.

Modules, each importing only those listed before it:
`exprs` (IR expression helpers), `domain` (abstract values), `solver` (z3 queries),
`counterexample`, `checker` (findings), `prefix_sums` and `data_values` (values of data),
`select_witnesses`, `interpreter` (dispatch through a rule table), `contraction_coverage`,
`store_coverage`, the transfer functions (`tile_ops`, `tag_ops`, `loop_ops`, `data_ops`),
`transfer` (the table), `softmax_bases` (a second pass), and this package.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from argus_core.ir import KernelIR
from argus_core.target import TargetSpec
from argus_core.types import Policy, VerifyReport
from argus_plugins.verifiers.smt import softmax_bases
from argus_plugins.verifiers.smt.checker import Checker, Finding
from argus_plugins.verifiers.smt.counterexample import Threads
from argus_plugins.verifiers.smt.data_values import DataState, uses_data
from argus_plugins.verifiers.smt.domain import Frame
from argus_plugins.verifiers.smt.interpreter import Interpreter
from argus_plugins.verifiers.smt.solver import Context
from argus_plugins.verifiers.smt.transfer import TRANSFER


def _options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Flatten a VerifierConfig dict ({"timeout_ms", "options": {...}}) into one mapping."""
    out = {k: v for k, v in dict(options or {}).items() if k != "options"}
    out.update(dict((options or {}).get("options") or {}))
    return out


def analyse(
    ir: KernelIR, policy: Policy, options: Mapping[str, Any] | None, target: TargetSpec
) -> tuple[list[Finding], Context]:
    """Every assertion's finding (proved, violated with a counterexample, or unknown), for
    the kernel run on `target` (its warp size names a counterexample's lanes)."""
    opts = _options(options or {})
    ctx = Context(ir, policy, opts)
    frame = Frame()
    data = DataState(ctx, frame) if uses_data(ir) else None
    ctx.data = data  # the solver's theory of data reads (None: no data ops)
    threads = Threads(int(policy.compiler.get("num_warps", 4)), int(target.wave_size))
    chk = Checker(ctx, threads)
    Interpreter(ctx, chk, TRANSFER, frame, data).run(ir.ops)
    softmax_bases.check(ctx, chk, ir)  # bases of an online softmax's exponentials
    return chk.findings, ctx


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
        t0 = time.perf_counter()
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


__all__ = ["SmtVerifier", "analyse"]
