"""Sums of data: prefix sums, reductions and running totals as uninterpreted functions.

A sum over one index of an integer tile whose value is known (`counts`, `cumsum(mine)`,
`run`, `base`) becomes the read `F(params, X)` = the sum of the summand `w(params, b)` for
b in [lo, X): an uninterpreted z3 function named by the summand's structure, so the same
sum met twice (the count of expert ex in pass 1 and the running count of pass 2) is the
same function. Each query instantiates, at the arguments X it mentions (with lo, hi, and
X - 1 for 0/1 sums; one level of sums nested in summands), facts that hold for every such
sum:

* `F(lo) = 0`; `F(x + 1) = F(x) + w(x)` for two points one apart;
* if `w >= 0` (proved once per sum): `F >= 0` and `F(x) + w(x) <= F(y)` for x < y (also
  between two programs' reads, where their other arguments agree);
* if `w <= 1` too (0/1 marks): `F(x) <= x - lo`;
* if `w` is a multiple of a constant M (syntactically `... * M`): `F(x) % M == 0`.

No quantifier reaches z3. The facts are true but incomplete, so a model may be spurious:
a model that mentions a sum is **confirmed** by evaluating every sum concretely (a Python
loop over the model's shapes, with the model's data) before it is reported `violated`;
otherwise the finding is `unknown`.

The functions take the kernel's data state `st` (`data_values.DataState`, the layer above,
which owns the registry of sums `st.ps` and the values `st.vals` of integer tiles).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import z3

from argus_core.ir import Expr, IntLike, Sym, as_expr, elem_sym, land, lnot
from argus_core.ir.expr import BinOp, BoolOp, Call, Cmp, Const, Select, emax, emin
from argus_core.ir.tags import READS, DataRead, read
from argus_plugins.verifiers.smt.exprs import reads
from argus_plugins.verifiers.smt.solver import Query, _load_factor

BOUND = Sym("$b", "bound")
GLOBAL_KINDS = ("shape", "arg", "bound")
MAX_CONCRETE = 1 << 18  # summand evaluations allowed when confirming a model
SMALL = (2, 4, 8, 64)  # shape bounds of the tiny models a confirmation tries first
DEPTH = 1  # levels of sums nested in summands whose facts a query gets
DEEP = 3  # ... a coverage query (its selects reach the data through nested sums)


@dataclass
class PrefixSum:
    """F(params, X) = sum of `summand` (over BOUND and `$p<k>`) for BOUND in [lo, X)."""

    summand: Expr
    lo: IntLike
    hi: IntLike
    nonneg: bool = False
    unit: bool = False
    multiple: int | None = None

    def w(self, params, x) -> IntLike:
        m = {Sym(f"$p{k}", "bound"): p for k, p in enumerate(params)}
        m[BOUND] = x
        return self.summand.subs(m)


def _params(e: Expr) -> list[Expr]:
    """Per-program symbols of `e` in order of first appearance (data reads: their indices)."""
    out: list[Expr] = []

    def go(x):
        if isinstance(x, DataRead):
            for a in x.args:
                go(a)
            return
        if isinstance(x, Sym):
            if x.kind not in GLOBAL_KINDS and x not in out:
                out.append(x)
            return
        for c in x.children():
            go(c)

    go(e)
    return out


def prefix(st, summand: IntLike, bound: Sym, lo: IntLike, hi: IntLike, x: IntLike, shape):
    """The read F(params, x): the sum of `summand` over `bound` in [lo, x)."""
    body = as_expr(summand).subs({bound: BOUND})
    ps = _params(as_expr(body))
    canon = as_expr(body).subs({p: Sym(f"$p{k}", "bound") for k, p in enumerate(ps)})
    key = f"{canon!r} | {as_expr(lo)!r}..{as_expr(hi)!r}"
    reg = st.ps
    name = st.ps_names.get(key)
    if name is None:  # a short name: the summand is in the registry, not in every read
        name = st.ps_names[key] = f"Σ{len(reg)}"
        rec = reg[name] = PrefixSum(as_expr(canon), lo, hi)
        _properties(st, rec, summand, bound, lo, hi, shape)
    return read(name, *ps, x)


def _properties(st, rec: PrefixSum, summand, bound, lo, hi, shape) -> None:
    """Prove once per sum that its summand is >= 0, <= 1 (z3, at a fresh bounded index)."""
    ctx = st.ctx
    b = ctx.fresh("sum_b", lo, hi)
    w = as_expr(summand).subs({bound: b})
    rec.multiple = _multiple(w)
    rec.nonneg = _lemma(ctx, shape, as_expr(w) < 0)
    rec.unit = rec.nonneg and _lemma(ctx, shape, as_expr(w) > 1)


def _lemma(ctx, shape, violation: Expr) -> bool:
    """Is `violation` unsatisfiable? (A side proof: a model is not a finding, not confirmed.)"""
    q = Query(ctx, tuple(shape), lemma=True)
    return q.check(violation).status == "proved"


def _multiple(w: Expr) -> int | None:
    if isinstance(w, BinOp) and w.op == "*" and isinstance(w.b, int | Expr):
        b = w.b.value if isinstance(w.b, Const) else w.b
        return b if isinstance(b, int) and b > 1 else None
    if isinstance(w, Select) and as_expr(w.b) == as_expr(0):
        return _multiple(as_expr(w.a))
    return None


# ------------------------------------------------------------------ values of ops
def reduce_value(st, op, shape) -> IntLike | None:
    """`sum(x, axis)`: exact for a one-hot `where(i == X, w, 0)`, else a prefix sum (to X
    for `where(i < X, w, 0)`, to the whole axis otherwise)."""
    if op.fn != "sum":
        return None
    x = st.vals.get(op.x.id)
    if x is None:
        return None
    xshape = st.frame.values[op.x.id].shape
    ax, n = op.axis, xshape[op.axis]
    i = elem_sym(ax)
    shift = {elem_sym(d): elem_sym(d - 1) for d in range(ax + 1, len(xshape))}
    x = as_expr(x)
    if isinstance(x, Select) and isinstance(x.cond, Cmp) and as_expr(x.b) == as_expr(0):
        c, w = x.cond, x.a
        other = c.b if as_expr(c.a) == i else None
        if other is not None and i not in as_expr(other).symbols():
            if c.op == "==":
                inside = land(as_expr(other) >= 0, as_expr(other) < n)
                return Select(inside, as_expr(w.subs({i: other})), as_expr(0)).subs(shift)
            if c.op in ("<", "<="):
                upto = emin(emax(other + (c.op == "<="), 0), n)
                return prefix(st, w, i, 0, n, upto, xshape).subs(shift)
    return prefix(st, x, i, 0, n, n, xshape).subs(shift)


def scan_value(st, op, shape) -> IntLike | None:
    """`cumsum(x, axis)` (inclusive): element i is the prefix sum of x to i + 1."""
    if op.fn != "cumsum":
        return None
    x = st.vals.get(op.x.id)
    if x is None:
        return None
    i, n = elem_sym(op.axis), shape[op.axis]
    return prefix(st, x, i, 0, n, i + 1, shape)


def loop_entry(st, op) -> None:
    """Before a loop's first (learning) pass: each carried integer tile is a placeholder."""
    for c in op.carried:
        if c.init.dtype.startswith("f") or c.init.dtype == "bf16":
            continue
        shape = st.frame.values[c.init.id].shape
        elems = [elem_sym(d) for d in range(len(shape))]
        st.vals[c.arg.id] = read(f"^carry{c.arg.id}", Sym("program_id_0", "pid"), op.var, *elems)


def loop_summands(st, op) -> None:
    """After the learning pass: a carried tile that starts at 0 and grows by a summand T
    (free of itself) is the running sum of T over the loop variable."""
    start, stop, step = st.ctx.loops[op.var.name]
    for c in op.carried:
        ph = st.vals.get(c.arg.id)
        y = st.vals.get(c.yielded.id)
        if not isinstance(ph, DataRead) or not ph.tensor.startswith("^carry"):
            continue
        init = st.vals.get(c.init.id)
        t = _increment(y, ph)
        if init is None or as_expr(init) != as_expr(0) or t is None or step != 1:
            st.vals.pop(c.arg.id, None)  # not a running sum: opaque
            continue
        shape = st.frame.values[c.init.id].shape
        st.vals[c.arg.id] = prefix(st, t, op.var, start, stop, op.var, shape)
        st.running[c.result.id] = prefix(st, t, op.var, start, stop, emax(stop, start), shape)


def _increment(y, ph: DataRead) -> Expr | None:
    if not isinstance(y, BinOp) or y.op != "+":
        return None
    for a, b in ((y.a, y.b), (y.b, y.a)):
        if a == ph and ph not in as_expr(b).symbols():
            return as_expr(b)
    return None


# --------------------------------------------------------------------------- facts
def facts(st, rs: list[DataRead]) -> list[Expr]:
    """The facts of every prefix sum read in `rs`, at the points they mention (two reads
    with other arguments, e.g. of two programs, are related where those arguments agree)."""
    reg = st.ps
    points: dict[str, list[tuple[tuple, Expr]]] = {}
    sels: list[tuple[str, tuple, Expr]] = []  # select reads (sum, params, t) to define
    summands: dict[tuple[str, int], IntLike] = {}  # (sum, point) -> its summand there
    todo = [r for r in rs if _base(r.tensor) in reg]
    deep = any(r.tensor.endswith(".sel") for r in todo)
    depth = DEEP if deep else DEPTH
    for level in range(depth + 1):
        added: list[tuple[PrefixSum, tuple, Expr]] = []

        def point(name, params, v, added=added):
            pts = points.setdefault(name, [])
            if (params, as_expr(v)) not in pts:
                pts.append((params, as_expr(v)))
                added.append((name, len(pts) - 1))

        for r in todo:
            name = _base(r.tensor)
            rec = reg[name]
            params, x = tuple(r.args[:-1]), as_expr(r.args[-1])
            if r.tensor.endswith(".sel"):  # F and w at the selected b, F at hi
                if (name, params, x) not in sels:
                    sels.append((name, params, x))
                point(name, params, r)
                point(name, params, rec.hi)
                continue
            if r.tensor != name:
                continue  # a summand read: defined at its own sum's points
            # the sum's ends, and for 0/1 marks the element before (a mark counts >= 1)
            for v in (as_expr(rec.lo), as_expr(rec.hi), x, *([x - 1] if rec.unit else [])):
                point(name, params, v)
            whole = all(y.kind == "shape" for y in x.symbols())  # a total, not a prefix
            if (
                deep
                and whole
                and rec.nonneg
                and 0 < level < depth
                and (name, params, as_expr(0)) not in sels
            ):
                # a positive sum has a b with w(b) > 0: its select of 0 (what b is, e.g.
                # a slot routed to an expert, reaches the contracts)
                sels.append((name, params, as_expr(0)))
                point(name, params, read(f"{name}.sel", *params, 0))
        if level == depth:
            break
        # sums inside the summands the facts will state (a padded count's count)
        for name, i in added:  # each point's summand, made once (stated below too)
            p, v = points[name][i]
            summands[name, i] = reg[name].w(p, v)
        todo = [r for r in reads([summands[a] for a in added]) if r.tensor in reg]
    out: list[Expr] = []
    for name, params, t in sels:
        rec = reg[name]
        sel = read(f"{name}.sel", *params, t)
        fs, top = read(name, *params, sel), read(name, *params, rec.hi)
        inside = land(as_expr(t) >= 0, as_expr(t) < top)
        out.append(
            lnot(inside)
            | land(
                as_expr(rec.lo) <= sel,
                as_expr(sel) < rec.hi,
                as_expr(fs) <= t,
                as_expr(t) < as_expr(fs) + _w(name, params, sel),
            )
        )
    for name, pts in points.items():
        rec = reg[name]
        lo, hi = as_expr(rec.lo), as_expr(rec.hi)
        for i, (params, x) in enumerate(pts):
            fx, box = read(name, *params, x), land(lo <= x, x <= hi)
            w = summands.get((name, i))
            w = rec.w(params, x) if w is None else w
            # the summand at x once, as its own term: the pair facts below only name it
            out.append(lnot(land(box, x < hi)) | as_expr(_w(name, params, x)).eq(w))
            if x == lo:
                out.append(as_expr(fx).eq(0))
            if rec.nonneg:
                out.append(lnot(box) | (as_expr(fx) >= 0))
            if rec.unit:
                out.append(lnot(box) | (as_expr(fx) <= x - lo))
            if rec.multiple:
                out.append(lnot(box) | (as_expr(fx) % rec.multiple).eq(0))
        # each point's F, w, bounds and neighbours, made once: the pairs below share them
        # (the same terms as made per pair, so z3 gets the same formulas)
        reads_at = [read(name, *p, x) for p, x in pts]
        ws_at = [_w(name, p, x) for p, x in pts]
        ends = [x == lo or x == hi for _p, x in pts]
        at_lo = [x == lo for _p, x in pts]
        above_lo = [lo <= x for _p, x in pts]
        below_hi = [x <= hi for _p, x in pts]
        before = [as_expr(x - 1) for _p, x in pts]
        after = [as_expr(x + 1) for _p, x in pts]
        for ia, ib in itertools.permutations(range(len(pts)), 2):
            if ends[ia] or at_lo[ib]:
                continue  # F(lo) = 0, nothing lies past hi
            (pa, x), (pb, y) = pts[ia], pts[ib]
            one = pa == pb  # one program's sums (the same other arguments)
            if one and y == before[ia]:
                continue  # stated from the other side
            if deep and not one:
                continue  # a coverage query relates one program's sums (witnesses), not two
            fx, fy, wx = reads_at[ia], reads_at[ib], ws_at[ia]
            same = [] if one else [as_expr(a).eq(b) for a, b in zip(pa, pb) if a != b]
            pair = land(*same, above_lo[ia], x < y, below_hi[ib])
            if one and y == after[ia]:
                out.append(lnot(pair) | as_expr(fy).eq(as_expr(fx) + wx))
                continue
            if rec.nonneg:
                out.append(lnot(pair) | (as_expr(fx) + wx <= fy))
    return out


def convert(st, q, facts: list[Expr]) -> list[Any]:
    """`facts` as z3 terms for query `q`, each converted once per kernel: the terms only
    name symbols, so a cached term is the same in every query whose symbols mean the same
    (no witness overrides); the query still makes each symbol's bounds."""
    if q.overrides or q.fixed:
        return [q.zb(e) for e in facts]
    out = []
    for e in facts:
        hit = st.z3cache.get(e)
        if hit is None:  # converting it makes its symbols' variables in q
            hit = st.z3cache[e] = [q.zb(e), None]
        else:  # the symbols it needs, found once (on its first reuse)
            if hit[1] is None:
                hit[1] = _names(e)
            for n in hit[1]:
                q.env[n]  # noqa: B018 - makes the symbol's variable and its bounds in q
        out.append(hit[0])
    return out


def convert_cached(st, q, facts: list[Expr], converted: list) -> list[Any]:
    """`convert` of a list of facts that several queries share: its terms and the symbols
    they name are kept in `converted` (empty until the first query without overrides
    fills it), so a later query only makes those symbols' variables, in the order
    `convert` would have made them."""
    if q.overrides or q.fixed:
        return [q.zb(e) for e in facts]
    if converted:
        terms, names = converted
        if names is None:  # found on the first reuse (most lists have none)
            names = converted[1] = _names_all(facts)
        for n in names:
            q.env[n]  # noqa: B018 - makes the symbol's variable and its bounds in q
        return list(terms)
    converted[:] = [convert(st, q, facts), None]
    return list(converted[0])


def _names(e: Expr) -> tuple[str, ...]:
    out: list[str] = []
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, Sym) and not isinstance(x, DataRead) and x.name not in out:
            out.append(x.name)
        stack.extend(x.children())
    return tuple(out)


def _names_all(es: list[Expr]) -> tuple[str, ...]:
    """The names `_names` gives each of `es`, in turn, each once: the order in which
    `convert` makes their variables when every one is a reuse (a subexpression shared by
    two of them is walked once)."""
    out: dict[str, None] = {}
    seen: set[int] = set()
    for e in es:
        stack = [e]
        while stack:
            x = stack.pop()
            if id(x) in seen:
                continue
            seen.add(id(x))
            if isinstance(x, Sym) and not isinstance(x, DataRead):
                out.setdefault(x.name)
            stack.extend(x.children())
    return tuple(out)


def _base(tensor: str) -> str:
    """The sum a select or summand read belongs to (`Σ2.sel` -> `Σ2`)."""
    return tensor.rsplit(".", 1)[0] if tensor.endswith((".sel", ".w")) else tensor


def _w(name: str, params, x) -> DataRead:
    """The summand of sum `name` at x, as a term (defined by a fact where x is in range)."""
    return read(f"{name}.w", *params, x)


# ------------------------------------------------------------------- confirmation
def uses_sums(st, rs) -> bool:
    reg = st.ps
    return any(_base(r.tensor) in reg for r in rs)


def confirm(q, model, violation: IntLike, solver=None) -> Any | None:
    """A model of `violation` in which every prefix sum has its true value (computed from
    the model's shapes, program, iterations and data), or None when the model was only a
    model of the incomplete facts (or too large to evaluate). With the query's `solver`,
    a model with tiny shapes is tried first (cheap to evaluate, easy to read). The tiny
    searches get the probe's budget first; when neither they nor the given model confirm,
    they run again with a share of the full check's budget before the query is left
    unknown (on a machine slower than its load average says, a probe's budget can run out
    where a counterexample is there to find: CI, 2026-12-06)."""
    budgets = [q.ctx.probe_ms]
    if solver is not None and q.ctx.timeout_ms // len(SMALL) > q.ctx.probe_ms:
        budgets.append(q.ctx.timeout_ms // len(SMALL))
    for n, ms in enumerate(budgets):
        found = _tiny(q, violation, solver, ms) if solver is not None else None
        if found is None and n == 0:
            found = _concrete(q, model, violation, ms)
        if found is not None:
            return found
    return None


def _tiny(q, violation: IntLike, solver, ms: int) -> Any | None:
    """A confirmed model of `violation` with every shape at most one of SMALL (and scalar
    arguments within it), each size searched for `ms` ms (scaled by the load)."""
    for size in SMALL:
        small = [v <= size for n, v in q.vars.items() if n in q.ctx.shapes]
        small += [
            z3.And(v >= -size, v <= size) for n, v in q.vars.items() if n in q.ctx.scalar_args
        ]
        solver.push()
        solver.set("timeout", int(ms * _load_factor()))  # slower when loaded
        solver.add(*small)
        tiny = solver.model() if solver.check() == z3.sat else None
        solver.pop()
        found = None if tiny is None else _concrete(q, tiny, violation, ms)
        if found is not None:
            return found
    return None


class Evaluator:
    """Concrete values of IR expressions in a model: shapes, program and iterations from
    the model, data from its function tables, and every prefix sum, summand and select
    computed from their definitions (not from the model's guesses)."""

    def __init__(self, q, model):
        self.q, self.model = q, model
        self.st = q.ctx.data
        self.memo: dict[str, int] = {}
        self.syms: dict[str, int] = {}
        self.tables: dict[Any, tuple] = {}
        self.budget = MAX_CONCRETE

    def num(self, t) -> int:
        return self.model.eval(t, model_completion=True).as_long()

    def table(self, f):
        """The model's interpretation of data function `f` as a Python dict (+ default)."""
        if f not in self.tables:
            model = self.model
            interp = model[f] if f in model.decls() else None
            entries, default = {}, 0
            if isinstance(interp, z3.FuncInterp):
                for n in range(interp.num_entries()):
                    e = interp.entry(n)
                    args = tuple(
                        e.arg_value(k).as_long() if z3.is_int_value(e.arg_value(k)) else None
                        for k in range(e.num_args())
                    )
                    if z3.is_int_value(e.value()) and None not in args:
                        entries[args] = e.value().as_long()
                default = interp.else_value()
                default = default.as_long() if z3.is_int_value(default) else None
            self.tables[f] = (entries, default)
        return self.tables[f]

    def data(self, r: DataRead, args: list[int]) -> int:
        key = f"{r.tensor}{args}"
        if key not in self.memo:
            reg, base = self.st.ps, r.tensor.rsplit(".", 1)[0]
            if r.tensor in reg:
                self.memo[key] = self.total(reg[r.tensor], args)
            elif r.tensor.endswith(".w") and base in reg:
                self.memo[key] = self.summand(reg[base], args[:-1], args[-1])
            elif r.tensor.endswith(".sel") and base in reg:
                self.memo[key] = self.select(reg[base], args)
            else:
                f = self.st.fns.get((r.tensor, len(args)))
                entries, default = self.table(f) if f is not None else ({}, 0)
                v = entries.get(tuple(args), default)
                if v is None:
                    v = self.num(f(*[z3.IntVal(a) for a in args]))
                self.memo[key] = v
        return self.memo[key]

    def _spend(self, n: int) -> None:
        self.budget -= max(0, n)
        if self.budget < 0:
            raise _TooBig

    def summand(self, rec: PrefixSum, params, b: int) -> int:
        env = {f"$p{k}": a for k, a in enumerate(params)}
        env["$b"] = b
        return self.value(rec.summand, env)

    def total(self, rec: PrefixSum, args: list[int]) -> int:
        lo, x = self.value(rec.lo), args[-1]
        self._spend(x - lo)
        return sum(self.summand(rec, args[:-1], b) for b in range(lo, x))

    def select(self, rec: PrefixSum, args: list[int]) -> int:
        """The b in [lo, hi) with F(b) <= t < F(b) + w(b) (lo when there is none)."""
        lo, hi, t = self.value(rec.lo), self.value(rec.hi), args[-1]
        self._spend(hi - lo)
        acc = 0
        for b in range(lo, hi):
            w = self.summand(rec, args[:-1], b)
            if acc <= t < acc + w:
                return b
            acc += w
        return lo

    def value(self, e: IntLike, env: dict[str, int] | None = None) -> int:
        env = env or {}
        if isinstance(e, bool | int):
            return int(e)
        if isinstance(e, DataRead):
            return self.data(e, [self.value(a, env) for a in e.args])
        if isinstance(e, Sym):
            if e.name in env:
                return env[e.name]
            if e.name not in self.syms:
                self.syms[e.name] = self.num(self.q.env[e.name])
            return self.syms[e.name]
        return _node(e, lambda x: self.value(x, env))


def _concrete(q, model, violation: IntLike, ms: int) -> Any | None:
    ev = Evaluator(q, model)
    try:
        holds = ev.value(violation)
    except (_TooBig, z3.Z3Exception, ZeroDivisionError):
        return None
    if not holds:
        return None
    # a model that agrees: the same point and data, every sum fixed to its true value
    s = z3.Solver()  # every variable pinned: a consistency check, given a second or more
    s.set("timeout", int(max(ms, 1000) * _load_factor()))
    s.add(q.zb(violation))
    for v in list(q.vars.values()):
        s.add(v == ev.num(v))
    for key, r in list(READS.items()):
        if dict.__contains__(q.env, key):
            try:
                s.add(q.env[key] == ev.data(r, [ev.value(a) for a in r.args]))
            except (_TooBig, z3.Z3Exception):
                return None
    return s.model() if s.check() == z3.sat else None


def _node(e: Expr, ev) -> int:
    """One IR node's concrete value, its operands evaluated by `ev` (floor `//` and `%`,
    as z3 for the positive divisors the IR has)."""
    if isinstance(e, Const):
        return e.value
    if isinstance(e, BinOp):
        a, b = ev(e.a), ev(e.b)
        ops = {"+": a + b, "-": a - b, "*": a * b}
        return ops[e.op] if e.op in ops else (a // b if e.op == "//" else a % b)
    if isinstance(e, Call):
        args = [ev(a) for a in e.args]
        if e.fn == "min":
            return min(args)
        if e.fn == "max":
            return max(args)
        return -(-args[0] // args[1])
    if isinstance(e, Cmp):
        a, b = ev(e.a), ev(e.b)
        return int(
            {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[e.op]
        )
    if isinstance(e, BoolOp):
        if e.op == "not":
            return int(not ev(e.args[0]))
        vals = (bool(ev(a)) for a in e.args)
        return int(all(vals) if e.op == "and" else any(vals))
    if isinstance(e, Select):
        return ev(e.a) if ev(e.cond) else ev(e.b)
    raise TypeError(f"cannot evaluate {e!r}")


class _TooBig(Exception):
    pass


__all__ = [
    "Evaluator",
    "PrefixSum",
    "confirm",
    "facts",
    "loop_entry",
    "loop_summands",
    "prefix",
    "reduce_value",
    "scan_value",
    "uses_sums",
]
