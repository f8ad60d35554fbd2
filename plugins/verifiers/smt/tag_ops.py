"""Transfer functions of tag ops: user tags, preconditions, and the assertions a kernel
states (`assert_tag_eq`, `assert_tag`, `assert_contraction`). A ghost op whose tile lacks
the tag it names is an `unknown` finding, never skipped silently."""

from __future__ import annotations

from dataclasses import replace

from argus_core.ir import Expr, IntLike, as_expr, land, lnot
from argus_core.ir.tags import AssertContraction, AssertTag, AssertTagEq, Requires, Tag
from argus_plugins.verifiers.smt.contraction_coverage import check_window
from argus_plugins.verifiers.smt.domain import Contribution, TagVal
from argus_plugins.verifiers.smt.exprs import any_ne, same, sub
from argus_plugins.verifiers.smt.interpreter import Interpreter


def tag(it: Interpreter, op: Tag) -> None:
    v = it.state[op.value.id]
    tags = dict(v.tags)
    tags[op.name] = TagVal(tuple(it.ctx.norm(e) for e in op.exprs), 1, None)
    it.state[op.value.id] = v.with_tags(tags)


def requires(it: Interpreter, op: Requires) -> None:
    return None  # the Context assumes preconditions in every query


def assert_contraction(it: Interpreter, op: AssertContraction) -> None:
    v = it.state[op.value.id]
    t = v.tags.get(op.name)
    contribs = [c for c in v.contrib if isinstance(c, Contribution)]
    if t is None or len(t.exprs) != len(op.tag_syms) or not contribs:
        it.malformed(
            op,
            f"assert_contraction: the tile needs tag {op.name!r} with {len(op.tag_syms)} "
            f"entries and a dot summed into it (has {len(contribs)} contributions)",
        )
        return
    # norm may fold a window to a constant (an int, which has no .subs): `sub` passes it
    window = sub(it.ctx.norm(op.window), dict(zip(op.tag_syms, t.exprs)))

    def inside(c: IntLike, w=window, cs=op.c_sym) -> Expr:
        return as_expr(sub(w, {cs: c}))

    if it.chk.collect:
        check_window(it, op, v.shape, land(v.valid, t.defined), contribs, inside)
    it.state[op.value.id] = replace(v, window=True)


def assert_tag_eq(it: Interpreter, op: AssertTagEq) -> None:
    a, b = it.state[op.a.id], it.state[op.b.id]
    ta, tb = a.tags.get(op.name_a), b.tags.get(op.name_b)
    if ta is None or tb is None or len(ta.exprs) != len(tb.exprs):
        it.malformed(
            op,
            f"assert_tag_eq: tag {op.name_a!r} of a is {ta and ta.exprs} and tag "
            f"{op.name_b!r} of b is {tb and tb.exprs}; both must exist with equal arity",
        )
        return
    it.chk.require(
        "assert_tag_eq",
        op.point,
        a.shape,
        land(a.valid, b.valid, ta.defined, tb.defined, any_ne(ta.exprs, tb.exprs)),
        ta.exprs,
        tb.exprs,
        f"tag {op.name_a!r} is {{lhs}} but {op.name_b!r} is {{rhs}}",
        structural=same(ta.exprs, tb.exprs),
    )


def assert_tag(it: Interpreter, op: AssertTag) -> None:
    v = it.state[op.value.id]
    t = v.tags.get(op.name)
    if t is None or len(t.exprs) != len(op.tag_syms):
        it.malformed(
            op, f"assert_tag: the tile has no tag {op.name!r} with {len(op.tag_syms)} entries"
        )
        return
    # a predicate may fold to a constant once tiles and index-tile values are substituted
    # (`al.at(full_tile) >= 0`): an int, which `sub` passes through; a true constant holds
    # without z3, a false one fails at every valid element
    pred = sub(it.ctx.norm(op.pred), dict(zip(op.tag_syms, t.exprs)))
    it.chk.require(
        "assert_tag",
        op.point,
        v.shape,
        land(v.valid, t.defined, lnot(pred)),
        t.exprs,
        [],
        f"tag {op.name!r} = {{lhs}} breaks the asserted predicate",
        structural=isinstance(pred, int) and bool(pred),
    )
