"""`verifier=smt`: abstract interpretation of the IR over tags, with one z3 query per assertion.

`SmtVerifier.verify(ir, policy, options)` proves every assertion the kernel states or its
ops imply, for all shapes up to `max_extent`, all programs, elements and iterations; or
returns counterexamples. A query that times out (`timeout_ms`) makes the report
`unknown`, never `verified`. See docs/verifier.md.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from argus_core.ir import KernelIR
from argus_core.types import Policy, VerifyReport
from argus_plugins.verifiers.smt import softmax
from argus_plugins.verifiers.smt.interp import Checker, Finding, Interpreter
from argus_plugins.verifiers.smt.solver import Context

DEFAULT_WARP_SIZE = 64  # MI300X wavefronts; pass options={"warp_size": 32} for NVIDIA


def _options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Flatten a VerifierConfig dict ({"timeout_ms", "options": {...}}) into one mapping."""
    out = {k: v for k, v in dict(options or {}).items() if k != "options"}
    out.update(dict((options or {}).get("options") or {}))
    return out


def analyse(
    ir: KernelIR, policy: Policy, options: Mapping[str, Any] | None = None
) -> tuple[list[Finding], Context]:
    """Every assertion's finding (proved, violated with a counterexample, or unknown)."""
    opts = _options(options or {})
    ctx = Context(ir, policy, opts)
    threads = (
        int(policy.compiler.get("num_warps", 4)),
        int(opts.get("warp_size", policy.compiler.get("warp_size", DEFAULT_WARP_SIZE))),
    )
    chk = Checker(ctx, threads)
    Interpreter(ctx, chk).run(ir.ops)
    softmax.check(ctx, chk, ir)  # bases of an online softmax's exponentials
    return chk.findings, ctx


class SmtVerifier:
    """`verifier=smt`."""

    name = "smt"

    def verify(
        self, ir: KernelIR, policy: Policy, options: Mapping[str, Any] | None = None
    ) -> VerifyReport:
        t0 = time.perf_counter()
        try:
            findings, _ctx = analyse(ir, policy, options)
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
