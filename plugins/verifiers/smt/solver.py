"""z3 encoding: one query per assertion, over bounded integer variables.

`Context` holds what is fixed for one (kernel, policy): tile constants (concrete), the
`Let` chain of program-id arithmetic, loop ranges, and the launch grid. A `Query` turns IR
expressions into z3 terms lazily: a symbol becomes a bounded variable the first time it is
used (program id in [0, grid), loop variable in its range, element index in its tile,
shape in [1, max_extent]), and a `Let`-bound symbol becomes its definition. A suffix on a
symbol's name (`pid_m'`) names another copy of the program (another program id, other
elements, other iterations) so one query can relate two programs, for example to prove
that no two of them write the same output element.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import z3

from argus_core.ir import Expr, IntLike, KernelIR, Let, Loop, Sym, as_expr, to_z3
from argus_core.types import Policy

PER_PROGRAM_KINDS = ("pid", "loop", "elem", "scalar")
PROGRAM_ID = "program_id_0"


def split_suffix(name: str) -> tuple[str, str]:
    """('pid_m', "'") for "pid_m'"; suffixes start with ', # or %."""
    for i, ch in enumerate(name):
        if ch in "'#%":
            return name[:i], name[i:]
    return name, ""


def rename(e: IntLike, suffix: str) -> IntLike:
    """`e` in another copy of the program: per-program symbols get `suffix`."""
    if not suffix or not isinstance(e, Expr):
        return e
    return e.map(lambda s: Sym(s.name + suffix, s.kind) if s.kind in PER_PROGRAM_KINDS else s)


def contiguous_strides(dims: tuple[IntLike, ...]) -> tuple[IntLike, ...]:
    out: list[IntLike] = []
    acc: IntLike = 1
    for d in reversed(dims):
        out.append(acc)
        acc = acc * d
    return tuple(reversed(out))


class Context:
    """Per-(kernel, policy) facts shared by every query."""

    def __init__(self, ir: KernelIR, policy: Policy, options: Mapping[str, Any]):
        self.ir = ir
        self.policy = policy
        self.timeout_ms = int(options.get("timeout_ms", 10000))
        self.max_extent = int(options.get("max_extent", 2**20))
        self.small_extent = int(options.get("small_extent", 256))
        self.probe_ms = int(options.get("probe_ms", 300))
        missing = [c.name for c in ir.constexprs if c.name not in policy.tiles]
        if missing:
            raise ValueError(
                f"policy tiles {sorted(policy.tiles)} do not bind constexprs {missing} of kernel {ir.name!r}"
            )
        self.subst: dict[Sym, IntLike] = {c: int(policy.tiles[c.name]) for c in ir.constexprs}
        # the verifier takes every tensor as contiguous row-major (what make_inputs creates)
        for t in ir.tensors:
            self.subst.update(zip(t.strides, contiguous_strides(t.dims)))
        self.lets: dict[str, IntLike] = {}
        self.loops: dict[str, tuple[IntLike, IntLike, IntLike]] = {}
        self._collect(ir.ops)
        total: IntLike = 1
        for g in ir.grid:
            total = total * self.norm(g)
        self.grid_total = total
        self.shapes = {s.name: s for s in ir.shape_syms}
        self.bounds: dict[str, tuple[IntLike, IntLike]] = {}  # verifier-made scalars: [lo, hi)
        self.seconds = 0.0
        self.queries = 0

    def norm(self, e: IntLike) -> IntLike:
        """`e` with tile constants and (contiguous) strides substituted."""
        return e.subs(self.subst) if isinstance(e, Expr) else e

    def _collect(self, ops) -> None:
        for op in ops:
            if isinstance(op, Let):
                self.lets[op.sym.name] = self.norm(op.expr)
            elif isinstance(op, Loop):
                self.loops[op.var.name] = (
                    self.norm(op.start),
                    self.norm(op.stop),
                    self.norm(op.step),
                )
                self._collect(op.body)

    def fresh(self, base: str, lo: IntLike, hi: IntLike) -> Sym:
        """A new bounded scalar symbol (contracted index, missing coordinate, ...)."""
        name, n = f"_{base}", 0
        while name in self.bounds:
            n += 1
            name = f"_{base}{n}"
        self.bounds[name] = (lo, hi)
        return Sym(name, "scalar")


@dataclass
class Outcome:
    status: str  # "proved" | "violated" | "unknown"
    model: Any = None
    query: Query | None = None
    note: str = ""


class _Env(dict):
    """name -> z3 term, built on first use (see Query.term)."""

    def __init__(self, query: Query):
        super().__init__()
        self.q = query

    def __contains__(self, name: object) -> bool:
        return True

    def __missing__(self, name: str):
        t = self.q._make(name)
        self[name] = t
        return t


@dataclass
class Query:
    """One assertion's z3 problem. `shape` bounds the element symbols `_i<d>` (all copies);
    `overrides` define per-copy symbols as expressions over others (a witness program)."""

    ctx: Context
    shape: tuple[int, ...] = ()
    overrides: dict[str, IntLike] = field(default_factory=dict)
    fixed: dict[str, int] = field(default_factory=dict)  # concrete values (confirmations)

    def __post_init__(self):
        self.env = _Env(self)
        self.domain: list[Any] = []
        self.vars: dict[str, Any] = {}

    def z(self, e: IntLike | bool):
        return to_z3(as_expr(e), self.env)

    def zb(self, e: IntLike | bool):
        t = self.z(e)
        return t if z3.is_bool(t) else t != 0

    def _var(self, name: str, lo: IntLike | None, hi: IntLike | None, suffix: str):
        if name in self.fixed:
            return z3.IntVal(self.fixed[name])
        v = z3.Int(name)
        self.vars[name] = v
        if lo is not None:
            self.domain.append(v >= self.z(rename(lo, suffix)))
        if hi is not None:
            self.domain.append(v < self.z(rename(hi, suffix)))
        return v

    def _make(self, name: str):
        if name in self.overrides:
            return self.z(self.overrides[name])
        base, suffix = split_suffix(name)
        ctx = self.ctx
        if base in ctx.lets:
            return self.z(rename(ctx.lets[base], suffix))
        if base == PROGRAM_ID:
            return self._var(name, 0, ctx.grid_total, suffix)
        if base in ctx.shapes:
            return self._var(name, 1, ctx.max_extent + 1, "")
        if base in ctx.loops:
            start, stop, step = ctx.loops[base]
            v = self._var(name, start, stop, suffix)
            if step != 1 and name not in self.fixed:
                self.domain.append((v - self.z(rename(start, suffix))) % self.z(step) == 0)
            return v
        if base.startswith("_i") and base[2:].isdigit():
            d = int(base[2:])
            if d >= len(self.shape):
                raise KeyError(
                    f"element index {base} used in a query over a rank-{len(self.shape)} tile"
                )
            return self._var(name, 0, self.shape[d], suffix)
        if base in ctx.bounds:
            lo, hi = ctx.bounds[base]
            return self._var(name, lo, hi, suffix)
        raise KeyError(f"the verifier has no meaning for symbol {name!r}")

    def check(self, violation: IntLike | Any) -> Outcome:
        """Is `violation` satisfiable within the bounds? sat -> a (small) model."""
        ctx = self.ctx
        formula = violation if isinstance(violation, z3.ExprRef) else self.zb(violation)
        t0 = time.perf_counter()
        s = z3.Solver()
        s.add(*self.domain)
        s.add(formula)
        r = z3.unknown
        small = [self.vars[n] <= ctx.small_extent for n in ctx.shapes if n in self.vars]
        if small and ctx.probe_ms:
            # probe small shapes first: a model there is a model (a readable one), and
            # nonlinear program-id arithmetic is found much faster in a small box
            s.push()
            s.set("timeout", ctx.probe_ms)
            s.add(*small)
            if s.check() == z3.sat:
                r = z3.sat
                model = s.model()
            s.pop()
        if r != z3.sat:
            s.set("timeout", ctx.timeout_ms)
            r = s.check()
            model = s.model() if r == z3.sat else None
        out = Outcome("unknown", query=self, note=s.reason_unknown() if r == z3.unknown else "")
        if r == z3.unsat:
            out.status = "proved"
        elif r == z3.sat:
            out.status, out.model = "violated", model
        ctx.seconds += time.perf_counter() - t0
        ctx.queries += 1
        return out

    def value(self, model, e: IntLike | Any) -> int:
        t = e if isinstance(e, z3.ExprRef) else self.z(e)
        return model.eval(t, model_completion=True).as_long()

    def values(self, model, es) -> list[int]:
        return [self.value(model, e) for e in es]
