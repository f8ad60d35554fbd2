"""Transfer functions of data ops: scalar loads, prefix sums, contracts, and the ghost ops
that relate data-indexed rows to their sources (`summand`, `rows_for`). The values of
integer tiles themselves are tracked by `data_values.DataState`."""

from __future__ import annotations

from argus_core.ir import as_expr, land, lnot
from argus_core.ir.nodes import LoadScalar, Scan
from argus_core.ir.tags import COORD, Contract, RowsFor, Summand, read
from argus_plugins.verifiers.smt.domain import AVal, Contribution, TagVal
from argus_plugins.verifiers.smt.interpreter import Interpreter


def load_scalar(it: Interpreter, op: LoadScalar) -> None:
    """`load_scalar(t, *index)`: the symbol becomes the read t[index]; the index must be in
    bounds (no mask guards it)."""
    ctx = it.ctx
    coords = tuple(ctx.norm(c) for c in op.coords)
    dims = tuple(ctx.norm(d) for d in op.tensor.dims)
    r = read(op.tensor.name, *coords)
    ctx.subst[op.sym] = r
    inside = land(
        *[as_expr(c) >= 0 for c in coords], *[as_expr(c) < d for c, d in zip(coords, dims)]
    )
    it.chk.require(
        "bounds",
        op.point,
        (),
        lnot(inside),
        list(coords),
        list(dims),
        f"reads coordinate {{lhs}} of {op.tensor.name}, outside its extents {{rhs}}",
    )


def scan(it: Interpreter, op: Scan) -> None:
    """A prefix sum (`cumsum`): no tags (elements mix), valid everywhere; its value is the
    data state's (`prefix_sums.scan_value`)."""
    it.state[op.out.id] = AVal(it.shape_of(op.out.shape, op.point))


def contract(it: Interpreter, op: Contract) -> None:
    return None  # assumed in every query (DataState.instances)


def summand(it: Interpreter, op: Summand) -> None:
    """Coordinate entry `entry` of the value's tag becomes a contracted coordinate."""
    v = it.state[op.value.id]
    t = v.tags.get(COORD)
    if t is None or not 0 <= op.entry < len(t.exprs) or t.extents is None:
        it.malformed(op, f"summand: the tile needs a {COORD!r} tag with entry {op.entry}")
        return
    rank = len(v.shape)
    axes = t.axes_for(rank) or (None,) * len(t.exprs)
    keep = [n for n in range(len(t.exprs)) if n != op.entry]
    tag = TagVal(
        tuple(t.exprs[n] for n in keep),
        t.defined,
        tuple(t.extents[n] for n in keep),
        tuple(axes[n] for n in keep),
    )
    kk = it.ctx.fresh("term", 0, 1)  # one term per iteration: no k-element within it
    loops = tuple((lp.var, *it.ctx.loops[lp.var.name]) for lp in it.loops)
    c = Contribution(
        t.exprs[op.entry], land(v.valid, t.defined), kk, 1, loops, t.extents[op.entry], op.point
    )
    it.state[op.value.id] = AVal(
        v.shape, {**v.tags, COORD: tag}, v.valid, v.contrib + (c,), fills=v.fills
    )


def rows_for(it: Interpreter, op: RowsFor) -> None:
    """Assert the row coordinate is `source`, then relabel it the scatter's index."""
    ctx = it.ctx
    v, ix = it.state[op.value.id], it.state[op.index.id]
    t = v.tags.get(COORD)
    axes = t.axes_for(len(v.shape)) if t is not None else None
    if t is None or axes is None or 0 not in axes:
        it.malformed(op, f"rows_for: the tile needs a {COORD!r} tag with a row entry")
        return
    row = axes.index(0)
    source, target = ctx.norm(op.source), ctx.norm(op.target)
    valid = land(v.valid, t.defined, ix.valid)
    it.chk.require(
        "rows_for",
        op.point,
        v.shape,
        land(valid, as_expr(t.exprs[row]).ne(source)),
        [t.exprs[row]],
        [source],
        "row was computed from source row {lhs} but its index names source row {rhs}",
        structural=as_expr(t.exprs[row]) == as_expr(source),
    )
    exprs = list(t.exprs)
    exprs[row] = target
    ext = list(t.extents) if t.extents is not None else None
    if ext is not None:
        ext[row] = None  # the scatter's extent is the store's tensor's, not the gather's
    tag = TagVal(tuple(exprs), land(t.defined, ix.valid), None, t.axes)
    it.state[op.value.id] = AVal(
        v.shape, {**v.tags, COORD: tag}, v.valid, v.contrib, v.window, v.fills
    )
