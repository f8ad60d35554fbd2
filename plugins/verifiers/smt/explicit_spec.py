"""Synthesized data-flow invariants of explicit-level kernels (issue #19), with z3.

The implied invariants of `explicit_ops` relate a kernel to itself: both MMA operands hold
the same reduction index, the stored tile sits at A's rows and B's columns. A kernel whose
producer and consumers agree with each other but not with the reference passes them: a
GQA kernel reading key/value head `h % HKV` for query head `h` (every block of it
consistent), an expert's weights read at `e * K` rows, a V block read for the scores. The
family's reference spec, bound to the kernel (`argus_core.spec.explicit.ExplicitSpec`),
pins what each element depends on; this module proves it:

for every stored tile (a TMA store or buffer store of an accumulator, the lse rows of a
score accumulator), every element `(R + u, C + v)` of it, every MMA accumulating into it
(and, for a register A operand, the score MMA its softmax read, one level down, with the
previous iteration's loop variable where the operand is carried) and every reduction
position `t` of those MMAs, each input element the MMA reads, in bounds of its tensor and
not masked by the softmax (keys at or past `kv_len`, or past the row when causal), is one
the spec reads for that output element: some read of that tensor whose index, with the
output coordinates and the kernel's dims substituted, equals it for bound variables in
range (each solved from the first index coordinate that names it) and whose guard holds.

A table read by the kernel (`LoadScalar`: the expert of a row block) and a read through an
index tensor in the spec (`@block_expert[o0 // 128]`) are the same uninterpreted function
of the table, so an expert's weights are pinned to the expert of the rows they multiply.

Counterexamples (`kind` "spec-read") name the output element, the input element read and
the index the spec expected, with the program point of the MMA and of the load.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import z3

from argus_core.ir import explicit as x
from argus_core.ir.expr import (
    BinOp,
    BoolOp,
    Call,
    Cmp,
    Const,
    Expr,
    IntLike,
    Sym,
    as_expr,
    binop,
    call,
    land,
    lnot,
    to_source,
    to_z3,
)
from argus_core.ir.tags import DataRead, read
from argus_core.spec.explicit import ExplicitSpec, attached
from argus_core.types import VerifyReport
from argus_plugins.verifiers.smt import explicit_ops as ops
from argus_plugins.verifiers.smt.solver import _load_factor

U, V, T, T2 = (Sym(n, "local", 0) for n in ("u", "v", "t", "t2"))
TIMEOUT_MS = 4000


@dataclass
class _Read:
    """Input `tensor` read at (row, col) (None: a coordinate not tracked) by `op`."""

    tensor: str
    index: tuple[IntLike | None, IntLike | None]
    where: str
    mma: str


@dataclass
class _Chain:
    """What one element of a stored tile is computed from: `reads` under `masks`
    (predicates: the read happens only where they hold), the locals' extents."""

    reads: list[_Read]
    masks: list[Expr]
    extents: dict[str, int]


def verify(kernel: x.ExplicitKernel, consts: dict[str, int] | None = None) -> VerifyReport:
    """`explicit_ops.verify_explicit`, plus the spec attached to `kernel` as ghost data
    (`argus_core.spec.explicit.attach`), where there is one."""
    spec = attached(kernel)
    extra = None if spec is None else (lambda ctx: check(ctx, spec))
    return ops.verify_explicit(kernel, consts, extra)


def check(ctx: Any, es: ExplicitSpec) -> None:
    """Report, through `ctx` (`explicit_ops._Ctx`), every stored element that reads an
    input element its spec does not name."""
    k: x.ExplicitKernel = ctx.kernel
    tables = _tables(ctx, k)
    for part in k.partitions:
        lets = ops._lets(ctx, part)
        for op in x.walk(part.body):
            for out, coords, chain in _stores(ctx, k, part, op, lets):
                _check_store(ctx, es, tables, op, out, coords, chain)


# ------------------------------------------------------------------ what is stored


def _tensor_of(k: x.ExplicitKernel, name: str) -> str:
    for d in k.descs:
        if d.name == name:
            return d.tensor
    return k.ptr(name).tensor


def _stores(ctx, k, part, op, lets):
    """(output tensor, its coordinates per view axis, the chain) of a store op."""
    if isinstance(op, x.TmaStore | x.StoreTile):
        if isinstance(op, x.TmaStore):
            accs = _stored_accs(part, op.src)
            tensor = _tensor_of(k, op.desc)
        else:
            accs = _with_partners(part, {op.acc})
            tensor = _tensor_of(k, op.ptr)
        r, c = (ops._expand(e, lets) for e in op.coords)
        for acc in sorted(accs):
            for mma in _mmas_on(part, acc):
                chain = _chain(ctx, part, mma, U, V, T, depth=0)
                if chain is not None:
                    chain.extents |= _acc_extents(ctx, acc)
                    cols = op.cols if isinstance(op, x.StoreTile) else None
                    if cols is not None:  # the tile stores its first `cols` columns only
                        n = _const_value(ctx, cols)
                        if n is not None:
                            chain.extents[V.name] = min(chain.extents[V.name], n)
                        else:
                            chain.masks.append(Cmp("<", V, as_expr(ops._expand(cols, lets))))
                    yield tensor, (r + U, c + V), chain
    elif isinstance(op, x.StoreLse):
        tensor = _tensor_of(k, op.ptr)
        row = ops._expand(op.row0, lets)
        for mma in _mmas_on(part, op.s_acc):
            chain = _chain(ctx, part, mma, U, V, T, depth=0)
            if chain is None:
                continue
            sm = _last(part, lambda o: isinstance(o, x.OnlineSoftmax) and o.s_acc == op.s_acc)
            if sm is not None:
                chain.masks += _softmax_masks(sm, U, V, lets)
            chain.extents |= _acc_extents(ctx, op.s_acc)
            yield tensor, (row + U,), chain


def _const_value(ctx, v: IntLike) -> int | None:
    """`v` as an int where it is one or names a constexpr of the kernel, else None."""
    if isinstance(v, int):
        return v
    if isinstance(v, Const):
        return int(v.value)
    if isinstance(v, Sym) and v.name in {**ctx.kernel.consts, **ctx.consts}:
        return ctx.kernel.const(v.name, ctx.consts)
    return None


def _acc_extents(ctx, acc: str) -> dict[str, int]:
    """The extents of an accumulator's rows (u) and columns (v)."""
    k = ctx.kernel
    zero = k.acc_decl(acc)
    if zero is None:
        raise ValueError(f"{k.name}: accumulator {acc!r} has no ZeroAcc giving its shape")
    return {U.name: k.const(zero.rows, ctx.consts), V.name: k.const(zero.cols, ctx.consts)}


def _stored_accs(part: x.Partition, buf: str) -> set[str]:
    accs = set()
    for o in x.walk(part.body):
        if isinstance(o, x.StoreShared) and o.dst == buf:
            accs.add(o.acc)
        elif isinstance(o, x.NormalizeStore) and o.dst == buf:
            accs.add(o.o)
    return _with_partners(part, accs)


def _with_partners(part: x.Partition, accs: set[str]) -> set[str]:
    """`accs` and the accumulators an epilogue combined into them (SiluMul's up)."""
    out = set(accs)
    for o in x.walk(part.body):
        if isinstance(o, x.SiluMul) and o.gate in accs:
            out.add(o.up)
    return out


def _mmas_on(part: x.Partition, acc: str) -> list[Any]:
    return [o for o in x.walk(part.body) if isinstance(o, x.Wgmma | x.Mfma) and o.acc == acc]


def _last(part: x.Partition, pred) -> Any:
    found = None
    for o in x.walk(part.body):
        if pred(o):
            found = o
    return found


# ------------------------------------------------------------------ chains of reads


def _source(ctx, name: str) -> tuple[Any, dict] | None:
    """The load that fills buffer/registers `name` (TMA, or a LoadTile behind a
    StoreRegs), with the lets of its partition."""
    k = ctx.kernel
    for p in k.partitions:
        lets = ops._lets(ctx, p)
        loads = {o.dst: o for o in x.walk(p.body) if isinstance(o, x.LoadTile)}
        for o in x.walk(p.body):
            if isinstance(o, x.TmaLoad) and o.dst == name:
                return o, lets
            if isinstance(o, x.StoreRegs) and o.dst == name and o.src in loads:
                return loads[o.src], lets
    return None


def _block_read(ctx, got: tuple[Any, dict], row_off, col_off, mma) -> _Read:
    """The read of element (row_off, col_off) of the block load `got` (`_source`) makes."""
    ld, lets = got
    tensor = _tensor_of(ctx.kernel, ld.desc if isinstance(ld, x.TmaLoad) else ld.ptr)
    r, c = (ops._expand(e, lets) for e in ld.coords)
    return _Read(tensor, (r + row_off, c + col_off), ld.point, mma.point)


def _k_extent(ctx, ld: Any, mma) -> int:
    """The reduction extent of `mma`, from its B block's load `ld`."""
    k = ctx.kernel
    block = k.desc(ld.desc).block if isinstance(ld, x.TmaLoad) else ld.block
    return k.const(block[1 if mma.b_trans else 0], ctx.consts)


def _chain(ctx, part, mma, row, col, red, depth: int) -> _Chain | None:
    """The reads of element (row, col) of `mma`'s product at reduction position `red`."""
    got_b = _source(ctx, mma.b)
    if got_b is None or depth > 1:
        return None
    extents = {red.name: _k_extent(ctx, got_b[0], mma)}
    reads = [_block_read(ctx, got_b, *((col, red) if mma.b_trans else (red, col)), mma=mma)]
    if mma.a_stage is not None:
        got_a = _source(ctx, mma.a)
        if got_a is None:
            return None
        reads.append(_block_read(ctx, got_a, row, red, mma))
        return _Chain(reads, [], extents)
    # a register A: P of a softmax over a score MMA (P[row, red] = f(S[row, red]))
    carried = ops._carried(part, mma) if isinstance(mma, x.Wgmma) else None
    if carried is None:
        sm = ops._last_before(
            part, mma.point, lambda o: isinstance(o, x.OnlineSoftmax) and o.p == mma.a
        )
        back: dict[Sym, IntLike] = {}
    else:
        move, loop = carried
        sm = ops._last_before(
            part, move.point, lambda o: isinstance(o, x.OnlineSoftmax) and o.p == move.src
        )
        back = {loop.var: loop.var - loop.step}
    if sm is None:
        return None
    src = ops._last_before(
        part, sm.point, lambda o: isinstance(o, x.Wgmma | x.Mfma) and o.acc == sm.s_acc
    )
    if src is None:
        return None
    inner = _chain(ctx, part, src, row, red, T2, depth + 1)
    if inner is None:
        return None
    lets = ops._lets(ctx, part)
    masks = _softmax_masks(sm, row, red, lets)
    if back:
        inner.reads = [
            _Read(r.tensor, tuple(ops._subs_once(i, back) if i is not None else None
                                  for i in r.index), r.where + " (one iteration back)", r.mma)
            for r in inner.reads
        ]  # fmt: skip
        masks = [ops._subs_once(m, back) for m in masks]
    return _Chain(reads + inner.reads, masks + inner.masks, {**extents, **inner.extents})


def _softmax_masks(sm: x.OnlineSoftmax, row, col, lets) -> list[Expr]:
    """Where P[row, col] is not masked to zero: key `col0 + col` below `kv_len` and, causal,
    at or before the query row `row0 + row`."""
    key = ops._expand(sm.col0, lets) + col
    out = [key < ops._expand(sm.kv_len, lets)]
    if sm.causal:
        out.append(key <= ops._expand(sm.row0, lets) + row)
    return out


def _tables(ctx, k: x.ExplicitKernel) -> dict[str, tuple[str, IntLike]]:
    """Each `LoadScalar`'s name -> (its table tensor, its index over kernel symbols)."""
    out = {}
    for p in k.partitions:
        lets = ops._lets(ctx, p)
        for o in x.walk(p.body):
            if isinstance(o, x.LoadScalar):
                out[o.name] = (_tensor_of(k, o.ptr), ops._expand(o.index, lets))
    return out


# ------------------------------------------------------------------ the obligation


def _check_store(ctx, es: ExplicitSpec, tables, store, out: str, coords, chain: _Chain) -> None:
    spec = es.spec
    out_spec = es.spec.outputs.get(out)
    if out_spec is None:
        return  # an output the reference does not describe (none shipped)
    facts: list[Any] = list(es.assume)
    norm = _Norm(ctx.consts, lambda pred: _query(ctx, facts, _not(pred), chain, tables) is None)
    coords = tuple(norm.simplify(c) for c in coords)
    osyms = {Sym(f"o{d}", "spec"): c for d, c in enumerate(coords)}
    dims = {Sym(n, "shape"): e for n, e in es.dims.items()}

    def bind(e: Any) -> Any:
        if isinstance(e, int | bool) or e is None:
            return e
        e = e.subs(dims)
        e = e.subs(osyms) if not isinstance(e, int | bool) else e
        return norm.simplify(e)

    premise: list[Any] = [norm.simplify(m) for m in chain.masks]
    for c, n in zip(coords, [bind(d) for d in out_spec.shape]):
        premise += [_ge0(c), _lt(c, n)]
    for r in chain.reads:
        name = r.tensor
        index = tuple(norm.simplify(i) for i in r.index)
        want = [rd for rd in out_spec.reads if rd.tensor == name]
        bounds = []
        for i, n in zip(index, [bind(d) for d in spec.dims.get(name, ())]):
            if i is not None:
                bounds += [_ge0(i), _lt(i, n)]
        alts = [_match(rd, out_spec, index, bind, norm) for rd in want]
        ctx.assertions += 1
        got = _query(ctx, facts + premise + bounds, _not(_any(alts)), chain, tables)
        if got is None:
            continue
        model, values = got
        shown = ", ".join(_show(i, values) for i in index)
        expected = "; ".join(_expected(rd, bind, values) for rd in want) or "nothing"
        elem = ", ".join(_show(c, values) for c in coords)
        ctx.report(
            "spec-read",
            store,
            f"{out}[{elem}] (stored here) reads {r.tensor}[{shown}] (loaded at {r.where}, "
            f"multiplied at {r.mma}); its reference reads {name} there only at {expected}"
            + (" (not decided in time)" if model.get("unknown") else f" (e.g. {model})"),
            values=model,
            output=[_int(c, values) for c in coords],
            read=[_int(i, values) for i in index],
            load=r.where,
            mma=r.mma,
            assertion="synth_dataflow",  # `argus_core.spec.caught`: the run's metrics
            invariant=f"{out} <- " + " | ".join(rd.text() for rd in want) if want else out,
        )


def _ge0(e: IntLike) -> Any:
    return as_expr(e) >= 0


def _lt(a: IntLike, b: IntLike) -> Any:
    return as_expr(a) < b


def _eq(a: IntLike, b: IntLike, norm: _Norm) -> Any:
    d = norm.simplify(a - b) if not (isinstance(a, int) and isinstance(b, int)) else a - b
    if isinstance(d, int):
        return d == 0
    return Cmp("==", as_expr(d), as_expr(0))


def _not(p: Any) -> Any:
    return (not p) if isinstance(p, bool) else lnot(p)


def _any(alts: list[Any]) -> Any:
    if any(a is True for a in alts):
        return True
    alts = [a for a in alts if a is not False]
    if not alts:
        return False
    out = alts[0]
    for a in alts[1:]:
        out = out | a
    return out


def _match(rd, out_spec, index, bind, norm: _Norm) -> Any:
    """The predicate: the spec read `rd` names the element at `index` (bound variables
    solved from the first coordinate that names each; their ranges; the guard)."""
    bounds = out_spec.bounds
    defs: dict[Sym, IntLike] = {}
    conds: list[Any] = []
    comps = [bind(i) for i in rd.index]
    for want, got in zip(comps, index):
        if got is None:
            continue
        free = [s for s in _syms(want) if s in bounds and s not in defs]
        if len(free) == 1:
            b = free[0]
            rest = want.subs({b: 0}) if not isinstance(want, int) else want
            defs[b] = norm.simplify(got - rest)
    for want, got in zip(comps, index):
        if got is None:
            continue
        w = norm.simplify(want.subs(defs)) if not isinstance(want, int) else want
        if _syms(w) & set(bounds):
            continue  # a coordinate over a bound variable no tracked coordinate fixes
        conds.append(_eq(w, got, norm))
    for b, e in defs.items():
        conds += [_ge0(e), _lt(e, bind(bounds[b].extent))]
    if rd.guard is not None:
        g = bind(rd.guard)
        if not isinstance(g, bool):
            g = norm.simplify(g.subs(defs))
        if not (_syms(g) & set(bounds)):
            conds.append(g)
    if any(c is False for c in conds):
        return False
    conds = [c for c in conds if c is not True]
    return land(*conds) if conds else True


def _syms(e: Any) -> set[Sym]:
    if isinstance(e, int | bool) or e is None:
        return set()
    out: set[Sym] = set()
    for s in e.symbols():
        out.add(s)
        if isinstance(s, DataRead):
            for a in s.args:
                out |= _syms(a)
    return out


def _query(ctx, facts: list[Any], goal: Any, chain: _Chain, tables):
    """A model of facts & goal (shown values, all values), None when none exists."""
    if goal is False:
        return None
    syms: set[Sym] = set()
    for e in (*facts, goal):
        syms |= _syms(e)
    env: dict[str, Any] = {}
    funcs: dict[str, Any] = {}
    solver = z3.Solver()
    solver.set("timeout", int(TIMEOUT_MS * _load_factor()))  # slower when loaded

    def fn(tensor: str):
        if tensor not in funcs:
            funcs[tensor] = z3.Function(f"{tensor}_table", z3.IntSort(), z3.IntSort())
        return funcs[tensor]

    def plain(s: Sym) -> None:
        if s.name in env:
            return
        if s.name in ctx.consts:
            env[s.name] = ctx.consts[s.name]
            return
        env[s.name] = z3.Int(s.name)
        solver.add(env[s.name] >= (1 if s.kind in ("shape", "num_pids") else 0))
        if s.name in chain.extents:
            solver.add(env[s.name] < chain.extents[s.name])

    def table_term(name: str, seen: tuple[str, ...] = ()):
        tensor, index = tables[name]
        for s in _syms(index):
            if s.name in tables and s.name not in seen and s.name not in env:
                env[s.name] = table_term(s.name, (*seen, name))
            elif not isinstance(s, DataRead):
                plain(s)
        return fn(tensor)(to_z3(index, env))

    for s in sorted(syms, key=lambda s: s.name):
        if isinstance(s, DataRead):
            continue
        if s.name in tables:
            if s.name not in env:
                env[s.name] = table_term(s.name)
        else:
            plain(s)
    for s in sorted((s for s in syms if isinstance(s, DataRead)), key=lambda s: len(s.name)):
        for inner in _syms(s.args[0]):
            if not isinstance(inner, DataRead):
                plain(inner)
        env[s.name] = fn(s.tensor)(to_z3(s.args[0], env))
    for p in facts:
        solver.add(_z3(p, env))
    solver.add(_z3(goal, env))
    got = solver.check()
    if got == z3.unknown:
        return {"unknown": 1}, {}
    if got != z3.sat:
        return None
    m = solver.model()
    values = {}
    for name, term in env.items():
        values[name] = (
            term if isinstance(term, int) else m.eval(term, model_completion=True).as_long()
        )
    shown = {
        n: v
        for n, v in values.items()
        if n not in ctx.consts and not n.startswith("@") and n not in tables
    }
    return shown, values


def _z3(p: Any, env):
    if isinstance(p, bool):
        return z3.BoolVal(p)
    return to_z3(p, env)


def _show(e: IntLike | None, values: dict[str, int]) -> str:
    if e is None:
        return ":"
    got = _int(e, values)
    return str(got) if got is not None else to_source(e)


def _int(e: IntLike | None, values: dict[str, int]) -> int | None:
    if e is None:
        return None
    if isinstance(e, int):
        return e
    try:
        return int(e.evaluate(values))
    except Exception:
        return None


def _expected(rd, bind, values) -> str:
    parts = []
    for i in rd.index:
        b = bind(i)
        got = _int(b, values)
        parts.append(str(got) if got is not None else to_source(b))
    return f"[{', '.join(parts)}]"


# ------------------------------------------------------------------ index arithmetic
#
# The spec over 2-D views divides flat row indices by products of shape symbols
# (`o0 // (H * S) * ...`), which z3's nonlinear integer arithmetic does not decide in
# time. `_simplify` rewrites them first with identities that hold for positive divisors:
# (X * d + Y) // d = X + Y // d and (X * d + Y) % d = Y % d; A // (d1 * d2) =
# (A // d1) // d2; Y // d = 0 and Y % d = Y where 0 <= Y < d is proved (linear: `provable`).
# Sums of products are kept in a normal form (coefficient, sorted atoms), so a kernel's
# `(g // H * HKV + ...) * SKV` and the spec's `g // H * (HKV * SKV) + ...` are one term.

Poly = dict[tuple[str, ...], int]  # atoms' keys -> coefficient


class _Norm:
    """Normal forms of index expressions; `provable(pred)` decides a range fact."""

    def __init__(self, consts: dict[str, int], provable):
        self.consts = consts
        self.provable = provable
        self.atoms: dict[str, IntLike] = {}
        # memos (one obligation's facts): the same index expressions recur in every read
        # of a chain, and each range fact is a z3 query
        self._simple: dict[str, Any] = {}
        self._ranges: dict[tuple[str, str], bool] = {}

    def simplify(self, e: Any) -> Any:
        if e is None or isinstance(e, bool | int):
            return e
        key = to_source(e)
        if key not in self._simple:
            if _is_pred(e):
                self._simple[key] = _rebuild_pred(e, self.simplify)
            else:
                self._simple[key] = self.expr(self.poly(e))
        return self._simple[key]

    # polynomials
    def poly(self, e: IntLike) -> Poly:
        if isinstance(e, int):
            return {(): e} if e else {}
        if isinstance(e, Const):
            return self.poly(e.value)
        if isinstance(e, Sym) and not isinstance(e, DataRead):
            if e.name in self.consts:
                return self.poly(self.consts[e.name])
            return {self.atom(e): 1}
        if isinstance(e, DataRead):
            return {self.atom(read(e.tensor, *[self.simplify(a) for a in e.args])): 1}
        if isinstance(e, BinOp) and e.op in "+-*":
            a, b = self.poly(e.a), self.poly(e.b)
            if e.op == "+":
                return _add(a, b)
            if e.op == "-":
                return _add(a, {k: -v for k, v in b.items()})
            return _mul(a, b)
        if isinstance(e, BinOp) and e.op in ("//", "%"):
            return self.divide(self.poly(e.a), self.poly(e.b), e.op)
        if isinstance(e, Call):
            return {self.atom(call(e.fn, *[self.simplify(a) for a in e.args])): 1}
        return {self.atom(e): 1}

    def atom(self, e: IntLike) -> tuple[str, ...]:
        key = to_source(e)
        self.atoms.setdefault(key, e)
        return (key,)

    def expr(self, p: Poly) -> IntLike:
        out: IntLike = 0
        for mono, coef in sorted(p.items()):
            term: IntLike = coef
            for a in mono:
                term = term * self.atoms[a]
            out = out + term
        return out

    def divide(self, a: Poly, d: Poly, op: str) -> Poly:
        if len(d) != 1 or next(iter(d.values())) <= 0:
            return {self.atom(binop(op, self.expr(a), self.expr(d))): 1}
        ((mono, coef),) = d.items()
        factors: list[Any] = ([coef] if coef != 1 else []) + list(mono)
        if op == "%":
            if len(factors) == 1:
                return self._mod1(a, factors[0])
            q = self.divide(a, d, "//")  # A % D = A - D * (A // D)
            return _add(a, {k: -v for k, v in _mul(d, q).items()})
        # divide by a factor that divides cleanly first ((g * S + r) // (H * S): by S)
        while factors:
            for f in factors:
                quot, rest = self._split(a, f)
                if not rest or self._in_range(rest, f):
                    a = quot
                    factors.remove(f)
                    break
            else:
                top: IntLike = 1
                for f in factors:
                    top = top * (f if isinstance(f, int) else self.atoms[f])
                return {self.atom(binop("//", self.expr(a), top)): 1}
        return a

    def _split(self, a: Poly, f: Any) -> tuple[Poly, Poly]:
        quot: Poly = {}
        rest: Poly = {}
        for mono, c in a.items():
            if isinstance(f, int):
                if c % f == 0:
                    quot[mono] = c // f
                else:
                    rest[mono] = c
            elif f in mono:
                m = list(mono)
                m.remove(f)
                quot[tuple(m)] = quot.get(tuple(m), 0) + c
            else:
                rest[mono] = c
        return quot, rest

    def _in_range(self, rest: Poly, f: Any) -> bool:
        r = self.expr(rest)
        top = f if isinstance(f, int) else self.atoms[f]
        key = (to_source(r), to_source(top))
        if key not in self._ranges:
            self._ranges[key] = self.provable(land(_ge0(r), _lt(r, top)))
        return self._ranges[key]

    def _mod1(self, a: Poly, f: Any) -> Poly:
        _, rest = self._split(a, f)
        if not rest:
            return {}
        if self._in_range(rest, f):
            return rest
        top = f if isinstance(f, int) else self.atoms[f]
        return {self.atom(binop("%", self.expr(rest), top)): 1}


def _add(a: Poly, b: Poly) -> Poly:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
        if out[k] == 0:
            del out[k]
    return out


def _mul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for ka, va in a.items():
        for kb, vb in b.items():
            k = tuple(sorted(ka + kb))
            out[k] = out.get(k, 0) + va * vb
            if out[k] == 0:
                del out[k]
    return out


def _is_pred(e: Any) -> bool:
    return isinstance(e, Cmp | BoolOp)


def _rebuild_pred(e: Any, f) -> Any:
    if isinstance(e, Cmp):
        return Cmp(e.op, as_expr(f(e.a)), as_expr(f(e.b)))
    if isinstance(e, BoolOp):
        return BoolOp(e.op, tuple(_rebuild_pred(a, f) if _is_pred(a) else a for a in e.args))
    return e
