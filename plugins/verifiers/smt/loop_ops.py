"""The transfer function of loops: induction over a symbolic iteration.

The carried values' tags at the top of a symbolic iteration k are the entry value at
k == start and the body's result at k - step otherwise; the body is checked under that
assumption, and the assumption is checked at the bottom (`loop_invariant`: the yielded
tags equal the assumed ones at k + step). A first pass, with no assertions collected,
learns what the body does to the carried values.
"""

from __future__ import annotations

from dataclasses import replace

from argus_core.ir import Expr, IntLike, Loop, Sym, as_expr, land
from argus_plugins.verifiers.smt.domain import AVal, Contribution, merge
from argus_plugins.verifiers.smt.exprs import any_ne, same, sub
from argus_plugins.verifiers.smt.interpreter import Interpreter


def loop(it: Interpreter, op: Loop) -> None:
    start, stop, step = it.ctx.loops[op.var.name]
    k = op.var
    markers = {id(c): object() for c in op.carried}
    inits = {id(c): it.state[c.init.id] for c in op.carried}
    collect = it.chk.collect
    # pass 1: guess that the carried tags do not change, to learn the body's effect (and,
    # for integer tiles, which carried values are running sums)
    it.chk.collect = False
    for c in op.carried:
        it.state[c.arg.id] = replace(inits[id(c)], contrib=(markers[id(c)],))
    if it.data is not None:
        it.data.loop_entry(op)
    _body(it, op)
    first = {id(c): it.state[c.yielded.id] for c in op.carried}
    if it.data is not None:
        it.data.loop_summands(op)
    it.chk.collect = collect
    # pass 2: the carried values at the top of iteration k, then check the body under it
    tops = {}
    for c in op.carried:
        tops[id(c)] = at_top(inits[id(c)], first[id(c)], k, start, step, markers[id(c)])
        it.state[c.arg.id] = tops[id(c)]
    _body(it, op)
    nxt = {k: k + step}
    last = start + ((stop - start - 1) // step) * step
    nonempty = as_expr(stop) > start
    for c in op.carried:
        y, top, init = it.state[c.yielded.id], tops[id(c)], inits[id(c)]
        for name, t in top.tags.items():
            ty = y.tags.get(name)
            if ty is None or len(ty.exprs) != len(t.exprs):
                continue
            tn = t.subs(nxt)
            it.chk.require(
                "loop_invariant",
                op.point,
                y.shape,
                land(
                    as_expr(k + step) < stop,
                    y.valid,
                    ty.defined,
                    tn.defined,
                    any_ne(ty.exprs, tn.exprs),
                ),
                ty.exprs,
                tn.exprs,
                f"carried tile {c.init.name or c.init.id!r} leaves an iteration with "
                f"{name!r} tag {{lhs}} but the next iteration expects {{rhs}}",
                structural=same(ty.exprs, tn.exprs) and as_expr(ty.defined) == as_expr(tn.defined),
            )
        it.state[c.result.id] = after_loop(init, y, k, last, nonempty, markers[id(c)])


def _body(it: Interpreter, op: Loop) -> None:
    it.loops.append(op)
    try:
        it.run(op.body)
    finally:
        it.loops.pop()


def at_top(
    init: AVal, yielded: AVal, k: Sym, start: IntLike, step: IntLike, marker: object
) -> AVal:
    """The carried value at the top of iteration k: `init` at k == start, else what the
    body yielded at k - step."""
    if init.tags == yielded.tags and as_expr(init.valid) == as_expr(yielded.valid):
        return replace(init, contrib=(marker,))
    prev = {k: k - step}
    shifted = AVal(
        yielded.shape, {n: t.subs(prev) for n, t in yielded.tags.items()}, sub(yielded.valid, prev)
    )
    return merge(k.eq(start), init, shifted, (marker,))


def after_loop(init: AVal, y: AVal, k: Sym, last: IntLike, nonempty: Expr, marker: object) -> AVal:
    """The carried value after the loop: the last iteration's yield (or `init` if the loop
    runs no iteration). Contributions summed across iterations keep k ranging over the
    loop; a value rebuilt each iteration keeps only the last one's."""
    at_last = {k: last}
    final = AVal(y.shape, {n: t.subs(at_last) for n, t in y.tags.items()}, sub(y.valid, at_last))
    if any(c is marker for c in y.contrib):
        contrib = init.contrib + tuple(c for c in y.contrib if c is not marker)
    else:  # the carried value was reset inside the loop: only the last iteration survives
        contrib = tuple(
            Contribution(
                sub(c.cc, at_last),
                land(nonempty, sub(c.valid, at_last)),
                c.kk,
                c.kk_extent,
                tuple(lp for lp in c.loops if lp[0] != k),
                c.ext,
                c.point,
            )
            for c in y.contrib
            if isinstance(c, Contribution)
        )
    out = merge(nonempty, final, init, contrib)
    return out
