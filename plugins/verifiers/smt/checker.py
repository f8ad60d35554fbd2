"""Findings, and the `Checker` that poses each assertion as a z3 query and records its
finding: proved, violated (with a counterexample), or unknown (never verified)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from argus_core.ir import IntLike, ProgramPoint
from argus_plugins.verifiers.smt.counterexample import Threads, counterexample
from argus_plugins.verifiers.smt.solver import Context, Query


@dataclass
class Finding:
    """One assertion at one program point."""

    assertion: str
    point: ProgramPoint
    status: str  # proved | violated | unknown
    cex: dict[str, Any] | None = None
    note: str = ""


class Checker:
    """Poses queries and records findings (assertions count, proved or not). `collect`
    False: queries are skipped (a loop's first pass, which only learns the body's effect)."""

    def __init__(self, ctx: Context, threads: Threads):
        self.ctx = ctx
        self.threads = threads
        self.findings: list[Finding] = []
        self.collect = True

    def require(
        self,
        assertion: str,
        point: ProgramPoint,
        shape: Sequence[int],
        violation: IntLike,
        lhs: Sequence[IntLike],
        rhs: Sequence[IntLike],
        message: str,
        query: Query | None = None,
        structural: bool = False,
        extra: dict[str, Any | Callable[[Query, Any], Any]] | None = None,
    ) -> Finding | None:
        """Prove `violation` unsatisfiable; a model becomes a counterexample. `structural`:
        the two sides are syntactically equal, so it holds without asking z3."""
        if not self.collect:
            return None
        if structural:
            f = Finding(assertion, point, "proved", note="syntactic")
            self.findings.append(f)
            return f
        q = query or Query(self.ctx, tuple(shape))
        out = q.check(violation)
        f = Finding(assertion, point, out.status, note=out.note)
        if out.status == "violated":
            f.cex = counterexample(
                out, assertion, point, shape, lhs, rhs, message, self.threads, extra
            )
        self.findings.append(f)
        return f

    def unknown(self, assertion: str, point: ProgramPoint, note: str) -> None:
        """Record an assertion the verifier cannot decide (a malformed ghost op, a shape of
        store it does not model), when findings are collected."""
        if self.collect:
            self.findings.append(Finding(assertion, point, "unknown", note=note))
