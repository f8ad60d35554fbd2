"""z3 encoding: one query per assertion, over bounded integer variables.

`Context` holds what is fixed for one (kernel, policy): tile constants (concrete), the
`Let` chain of program-id arithmetic, loop ranges, and the launch grid. A `Query` turns IR
expressions into z3 terms lazily: a symbol becomes a bounded variable the first time it is
used (program id in [0, grid), loop variable in its range, element index in its tile,
shape in [1, max_extent]), and a `Let`-bound symbol becomes its definition. A suffix on a
symbol's name (`pid_m'`) names another copy of the program (another program id, other
elements, other iterations) so one query can relate two programs, for example to prove
that no two of them write the same output element.

Kernels that index memory by data add a theory (`DataTheory`, implemented by
`data_values.DataState`): data reads become uninterpreted functions, constrained by the
kernel's contracts and by prefix-sum facts instantiated per query.
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import z3
from z3 import z3core

from argus_core.ir import Expr, IntLike, KernelIR, Let, Loop, Sym, as_expr
from argus_core.ir.expr import BinOp, Cmp, Const
from argus_core.ir.tags import Requires
from argus_core.types import Policy
from argus_plugins.verifiers.smt.exprs import PROGRAM_ID, rename, rewrite, split_suffix
from argus_plugins.verifiers.smt.z3terms import Converter


class DataTheory(Protocol):
    """What queries need from the values of data (`data_values.DataState`, for kernels that
    index memory by data): declared here, below its implementation, so the solver calls it
    without importing it."""

    def resolve(self, e: Expr) -> IntLike:
        """`e` with elements of index tiles (`TileElem`) replaced by their values."""

    def term(self, q: Query, name: str) -> Any:
        """The z3 term of the data read named `name` in query `q`."""

    def instances(self, q: Query, roots: list[Any]) -> tuple[list[Any], list[str]]:
        """Contract and prefix-sum facts for the reads in `roots` (z3 terms), and the ops
        of the opaque values the query depends on; sets `q.data_reads` and `q.sums`."""

    def confirm(self, q: Query, model: Any, violation: IntLike, solver: Any) -> Any | None:
        """A model of `violation` in which every prefix sum has its true value, or None."""

    def model_values(self, q: Query, model: Any) -> dict[str, int]:
        """The data reads of a violated query with their values in `model`."""


def factors(e: IntLike) -> list[IntLike]:
    """The factors of a product tree (`a * b * c` -> [a, b, c])."""
    if isinstance(e, BinOp) and e.op == "*":
        return factors(e.a) + factors(e.b)
    return [e]


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
        # values of data, for kernels that index memory by data: set once, after this
        # Context is built (the data state is built from it) and before interpretation
        self.data: DataTheory | None = None
        self.timeout_ms = int(options.get("timeout_ms", 10000))
        self.max_extent = int(options.get("max_extent", 2**20))
        self.small_extent = int(options.get("small_extent", 256))
        self.probe_ms = int(options.get("probe_ms", 300))
        # solver calls to minimize one counterexample (0: report z3's first model); a
        # count, not a time, so the reported counterexample does not depend on load
        self.minimize_checks = int(options.get("minimize_checks", 96))
        missing = [c.name for c in ir.constexprs if c.name not in policy.tiles]
        if missing:
            raise ValueError(
                f"policy tiles {sorted(policy.tiles)} do not bind constexprs {missing} of kernel {ir.name!r}"
            )
        self.subst: dict[Sym, IntLike] = {c: int(policy.tiles[c.name]) for c in ir.constexprs}
        # the verifier takes every tensor as contiguous row-major (what make_inputs creates)
        for t in ir.tensors:
            self.subst.update(zip(t.strides, contiguous_strides(t.dims)))
        # kernel scalar arguments are the same in every program: a kind that is not renamed
        self.scalar_args = {sym.name: dt for sym, dt in ir.scalars}
        self.subst.update({sym: Sym(sym.name, "arg") for sym, _dt in ir.scalars})
        self.shapes = {s.name: s for s in ir.shape_syms}
        self.quotients: dict[Expr, Sym] = {}  # X // Y -> G where a precondition says Y | X
        self.derived: dict[str, IntLike] = {}  # X -> G * Y, to report X in counterexamples
        pres = [op.pred for op in ir.walk() if isinstance(op, Requires)]
        self._divisibility(pres)
        self.lets: dict[str, IntLike] = {}
        self.loops: dict[str, tuple[IntLike, IntLike, IntLike]] = {}
        self._collect(ir.ops)
        self.assumptions = [self.norm(p) for p in pres]
        total: IntLike = 1
        for g in ir.grid:
            total = total * self.norm(g)
        self.grid_total = total
        self.bounds: dict[str, tuple[IntLike, IntLike]] = {}  # verifier-made scalars: [lo, hi)
        self.components = (
            {}
            if any(op.kind == "atomic_add" for op in ir.walk())
            else program_components(self.lets, total)
        )
        self.seconds = 0.0
        self.queries = 0

    def norm(self, e: IntLike) -> IntLike:
        """`e` with tile constants, (contiguous) strides and precondition quotients
        substituted."""
        if not isinstance(e, Expr):
            return e
        if self.data is not None:  # elements of index tiles -> their values
            e = self.data.resolve(e)
        if self.quotients:
            e = rewrite(e, lambda x: self.quotients.get(x, x))
        return e.subs(self.subst) if isinstance(e, Expr) else e

    def _divisibility(self, pres: list[Expr]) -> None:
        """`(X % Y).eq(0)` between shapes: introduce G with X = G * Y, so `X // Y` is the
        symbol G and `h // (X // Y)` stays a division by one symbol (GQA's group size)."""
        for p in pres:
            if not (isinstance(p, Cmp) and p.op == "==" and as_expr(p.b) == as_expr(0)):
                continue
            m = p.a
            if not (isinstance(m, BinOp) and m.op == "%"):
                continue
            x, y = m.a, m.b
            if isinstance(x, Sym) and isinstance(y, Const) and y.value > 1:
                # a declared domain's `multiple_of` (argus_core.domain): X = G * c keeps
                # every query linear (cdiv(X, c), X // c become G)
                if x.name not in self.shapes or x in self.subst:
                    continue
                g = Sym(f"{x.name}_per_{y.value}", "shape")
                self.shapes[g.name] = g
                self.quotients[BinOp("//", x, y)] = g
                self.subst[x] = g * y.value
                self.derived[x.name] = g * y.value
                continue
            if not (isinstance(x, Sym) and isinstance(y, Sym)):
                continue
            if x.name not in self.shapes or y.name not in self.shapes:
                continue
            g = Sym(f"{x.name}_per_{y.name}", "shape")
            self.shapes[g.name] = g
            self.quotients[BinOp("//", x, y)] = g
            self.subst[x] = g * y
            self.derived[x.name] = g * y

    def program_vector(self) -> list[Sym]:
        """The symbols that name a program: its grid coordinates when the grid is a
        row-major product (independent bounded variables), else the flat program id."""
        if self.components:
            return [Sym(n, "pid") for n in self.components]
        return [Sym(PROGRAM_ID, "pid")]

    def program_id_value(self, values: Mapping[str, int]) -> int:
        """The flat program id of grid coordinates `values` (missing: 0; shapes missing
        from `values` are 1, as counterexamples assume)."""
        env = {n: 1 for n in self.shapes} | dict(values)
        pid = 0
        for name, ext in self.components.items():
            e = ext if isinstance(ext, int) else ext.evaluate(env)
            pid = pid * e + values.get(name, 0)
        return pid

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


def _load_factor() -> float:
    """How many times slower than alone a solver call runs now: the load average per core,
    between 1 and 8 (1 where the OS does not tell)."""
    try:
        per_core = os.getloadavg()[0] / (os.cpu_count() or 1)
    except (OSError, AttributeError):
        return 1.0
    return min(8.0, max(1.0, per_core))


def _radix(e: IntLike, root: str) -> tuple[list[IntLike], IntLike | None] | None:
    """`root // d1 // d2 ... % m` -> ([d1, d2, ...], m) (m None without the modulo)."""
    mod = None
    if isinstance(e, BinOp) and e.op == "%":
        e, mod = e.a, e.b
    divs: list[IntLike] = []
    while isinstance(e, BinOp) and e.op == "//":
        divs.insert(0, e.b)
        e = e.a
    if isinstance(e, Sym) and e.name == root:
        return divs, mod
    return None


def program_components(lets: Mapping[str, IntLike], total: IntLike) -> dict[str, IntLike]:
    """Grid coordinates of a row-major `program_ids` ({name: extent}, slowest first), when
    the Let chain is exactly the mixed-radix decomposition of the flat id: then the
    coordinates are independent bounded variables (linear queries) instead of nested
    `//`/`%` of the flat id by symbolic extents (nonlinear). {} when it is not."""
    roots = [n for n, e in lets.items() if isinstance(e, Sym) and e.name == PROGRAM_ID]
    if len(roots) != 1:
        return {}
    comps = []
    for name, e in lets.items():
        r = _radix(e, roots[0])
        if r is not None and name != roots[0]:
            comps.append((len(r[0]), name, r))
    comps.sort()
    if len(comps) < 2:
        return {}
    moduli: list[IntLike] = []
    for n, (depth, _name, (divs, mod)) in enumerate(comps):
        last = n == len(comps) - 1
        if depth != n or divs != moduli or (mod is None) != last:
            return {}
        if not last:
            moduli.append(mod)
    rest = factors(total)
    for m in moduli:
        for f in factors(m):
            if f not in rest:
                return {}
            rest.remove(f)
    top: IntLike = 1
    for f in rest:
        top = top * f
    out = {comps[-1][1]: top}
    for (_d, name, _r), m in zip(reversed(comps[:-1]), reversed(moduli)):
        out[name] = m
    return out


def _assert(s: Any, terms: list[Any]) -> None:
    """`s.add(*terms)` for Bool terms, without the wrapper's cast of each (a tenth of the
    time of a query with hundreds of facts): the same assertions, in the same order."""
    ref, solver = s.ctx.ref(), s.solver
    for t in terms:
        z3core.Z3_solver_assert(ref, solver, t.as_ast())


@dataclass
class Outcome:
    status: str  # "proved" | "violated" | "unknown"
    model: Any = None
    query: Query | None = None
    note: str = ""
    minimized: bool = False  # the model is locally minimal (see Query.minimize)


class _Env(dict):
    """name -> z3 term, built on first use (see Query._make). It refers to its query
    weakly: a query and its terms are freed as soon as the query is dropped, not at the
    next cyclic garbage collection, whose timing would otherwise decide which z3 term ids
    later queries reuse, and so which of several models z3 returns."""

    def __init__(self, query: Query):
        super().__init__()
        self.q = weakref.proxy(query)

    def __contains__(self, name: object) -> bool:
        return True

    def __missing__(self, name: str):
        t = self.q._make(name)
        self[name] = t
        return t


@dataclass
class Query:
    """One assertion's z3 problem. `shape` bounds the element symbols `_i<d>` (all copies);
    `overrides` define per-copy symbols as expressions over others (a witness program);
    `lemma`: a side proof (a model is not a finding, so it is not confirmed)."""

    ctx: Context
    shape: tuple[int, ...] = ()
    overrides: dict[str, IntLike] = field(default_factory=dict)
    fixed: dict[str, int] = field(default_factory=dict)  # concrete values (confirmations)
    lemma: bool = False

    def __post_init__(self):
        self.env = _Env(self)
        self._env_view = weakref.proxy(self.env)
        self.domain: list[Any] = []
        self.vars: dict[str, Any] = {}
        self.data_reads: list[Any] = []  # the data reads of the violation (DataTheory)
        self.sums = False  # the facts mention prefix sums: a model must be confirmed
        # one query converts each shared subexpression once (z3terms.py)
        self._conv = Converter(self._env_view)

    def z(self, e: IntLike | bool):
        # the converter outlives nothing but this query: it gets a weak view of the
        # terms, so they are still freed with this query (see _Env)
        return self._conv(as_expr(e))

    def zb(self, e: IntLike | bool):
        return self._conv.as_bool(as_expr(e))

    def zi(self, e: IntLike | bool):
        """`e` as an Int term (a predicate as 1 or 0, as z3's wrapper coerces it)."""
        return self._conv.as_int(as_expr(e))

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
        if name.startswith("@"):  # a data read: an uninterpreted function (data_values.py)
            if self.ctx.data is None:
                raise KeyError(
                    f"data read {name!r} in kernel {self.ctx.ir.name!r}, which has no data ops"
                )
            return self.ctx.data.term(self, name)
        base, suffix = split_suffix(name)
        ctx = self.ctx
        if base in ctx.components or (base == PROGRAM_ID and ctx.components):
            ov = self.overrides.get(PROGRAM_ID + suffix)
            if ov is None or name in self.fixed:
                if base == PROGRAM_ID:  # the flat id of independent grid coordinates
                    flat: IntLike = 0
                    for comp, ext in ctx.components.items():
                        flat = flat * ext + Sym(comp + suffix, "pid")
                    return self.z(flat)
                return self._var(name, 0, ctx.components[base], suffix)
            if isinstance(ov, Sym) and split_suffix(ov.name)[0] == PROGRAM_ID:
                return self.env[base + split_suffix(ov.name)[1]]  # the same program
        if base in ctx.lets:
            return self.z(rename(ctx.lets[base], suffix))
        if base == PROGRAM_ID:
            return self._var(name, 0, ctx.grid_total, suffix)
        if base in ctx.scalar_args:  # i32 kernel argument: preconditions bound it
            return self._var(name, -(2**31), 2**31, "")
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
        pres = [self.zb(p) for p in ctx.assumptions]
        contracts, opaque = [], []
        if ctx.data is not None and not isinstance(violation, z3.ExprRef):
            contracts, opaque = ctx.data.instances(self, [violation, *ctx.assumptions])
        small = [self.vars[n] <= ctx.small_extent for n in ctx.shapes if n in self.vars]
        facts = [*self.domain, *pres, *contracts]
        if small and ctx.probe_ms and self._proved_at_once(facts, formula):
            r, s = z3.unsat, None
        else:
            r, s, model = self._probe_then_full(facts, formula, small)
        out = Outcome("unknown", query=self, note=s.reason_unknown() if r == z3.unknown else "")
        if r == z3.unsat:
            out.status = "proved"
        elif r == z3.sat and opaque:  # the model may rest on a value not modelled
            out.note = "the counterexample depends on values not modelled: " + "; ".join(opaque)
        elif r == z3.sat and self.sums and not self.lemma and ctx.data is not None:
            model = ctx.data.confirm(self, model, violation, s)  # sums' facts are partial
            if model is None:
                out.note = "a model of the prefix-sum facts that their true values refute"
            else:
                out.status, out.model = "violated", model
        elif r == z3.sat:
            out.status, out.model = "violated", model
            if not self.lemma and ctx.minimize_checks:
                out.model, out.minimized = self.minimize(s, model)
        ctx.seconds += time.perf_counter() - t0
        ctx.queries += 1
        return out

    def _probe_then_full(self, facts: list[Any], formula: Any, small: list[Any]) -> tuple:
        """(result, solver, model): the probe in the small box, then the full bounds."""
        ctx = self.ctx
        r, model = z3.unknown, None
        s = z3.Solver()
        _assert(s, facts)
        _assert(s, [formula])
        if small and ctx.probe_ms:
            # probe small shapes first: a model there is a model (a readable one), and
            # nonlinear program-id arithmetic is found much faster in a small box
            s.push()
            s.set("timeout", int(ctx.probe_ms * _load_factor()))  # slower when loaded
            s.add(*small)
            if s.check() == z3.sat:
                r = z3.sat
                model = s.model()
            s.pop()
        if r == z3.unknown:
            s.set("timeout", ctx.timeout_ms)
            r = s.check()
            model = s.model() if r == z3.sat else None
        return r, s, model

    def _proved_at_once(self, facts: list[Any], formula: Any) -> bool:
        """Is the query unsat on its full bounds within `probe_ms`? Most queries are
        proofs, and z3 proves them there faster than in the probe's box, which can only
        find models (moe_align: 0.24 s instead of 0.35 s of z3). A solver of its own:
        anything but unsat leaves the probe and the full check to run on a fresh solver
        as they always did, so a counterexample is the one they find."""
        s = z3.Solver()
        s.set("timeout", self.ctx.probe_ms)
        _assert(s, facts)
        _assert(s, [formula])
        s.push()  # z3's incremental core, as the probe and the full check use
        return s.check() == z3.unsat

    def _order(self) -> list[str]:
        """The variables a counterexample is minimized over, most telling first: shapes,
        then program ids, iterations, elements, and the rest (copies of other programs,
        contracted indices)."""
        ctx = self.ctx

        def rank(name: str) -> int:
            base, suffix = split_suffix(name)
            if base in ctx.shapes:
                return 0
            if base in ctx.scalar_args:
                return 6  # signed kernel arguments: not minimized
            group = (
                1
                if base == PROGRAM_ID or base in ctx.components
                else 2
                if base in ctx.loops
                else 3
                if base.startswith("_i")
                else 4
            )
            return group if not suffix else 5

        names = sorted(self.vars, key=lambda n: (rank(n), n))
        return [n for n in names if rank(n) < 6]

    def minimize(self, s: Any, model: Any) -> tuple[Any, bool]:
        """A locally minimal model of the solver's assertions: each variable in turn (see
        `_order`) lowered by binary search to the least value that still violates, with
        the ones before it held at theirs; in at most `ctx.minimize_checks` solver calls
        of `max(ctx.probe_ms, 1000)` ms each (False when they ran out or one timed out: the
        model is then smaller, not minimal)."""
        ctx = self.ctx
        budget = ctx.minimize_checks
        done = True
        s.push()
        # a step's query is the violation plus one bound: as hard as the first, so it gets
        # the time the probe had, at least a second (a loaded machine must not decide)
        # (scaled by the machine's load: on 2 cores shared by 12 processes a step that takes
        # 0.2 s alone takes seconds, and a timed-out step leaves the model unminimized)
        s.set("timeout", int(max(ctx.probe_ms, 1000) * _load_factor()))
        for name in self._order():
            v = self.vars[name]
            cur = model.eval(v, model_completion=True).as_long()
            lo = 1 if split_suffix(name)[0] in ctx.shapes else 0
            while lo < cur:
                if budget <= 0:
                    done = False
                    break
                budget -= 1
                mid = (lo + cur) // 2
                s.push()
                s.add(v <= mid)
                r = s.check()
                if r == z3.sat:
                    model = s.model()
                    cur = model.eval(v, model_completion=True).as_long()
                else:
                    lo = mid + 1
                    if r == z3.unknown:
                        done = False
                s.pop()
            s.add(v == cur)
            if not done:
                break
        s.pop()
        return model, done

    def value(self, model, e: IntLike | Any) -> int:
        t = e if isinstance(e, z3.ExprRef) else self.z(e)
        return model.eval(t, model_completion=True).as_long()

    def values(self, model, es) -> list[int]:
        return [self.value(model, e) for e in es]
