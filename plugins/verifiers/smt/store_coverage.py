"""Store obligations across the whole grid: every output element written exactly once.

Output coverage: no two (program, element) pairs write one coordinate (injectivity); each
program's store is a tile-shaped box, whose tile index stays inside the output's tile grid;
the grid has as many programs as there are tiles (so, being injective, every tile is hit);
and the mask drops no element inside the output. A stored sum must also cover its
contraction exactly once (`contraction_coverage.py`).

For kernels that index memory by data: a scatter through an index tile is covered by the
index tensor's positions (`scatter_grid`); a store inside loops writes each coordinate
once across (program, iteration, element), two stores of one tensor write disjoint
coordinates, and a tensor whose rows are computed from sums of data is covered by select
witnesses (`select_witnesses.py`).
"""

from __future__ import annotations

from argus_core.ir import Expr, IntLike, ProgramPoint, Store, as_expr, cdiv, elem_sym, land, lnot
from argus_core.ir.expr import Select
from argus_core.ir.tags import DataRead
from argus_plugins.verifiers.smt import select_witnesses
from argus_plugins.verifiers.smt.checker import Finding
from argus_plugins.verifiers.smt.contraction_coverage import (
    PID,
    check_factors,
    contraction,
)
from argus_plugins.verifiers.smt.data_values import DataState
from argus_plugins.verifiers.smt.domain import AVal, Contribution
from argus_plugins.verifiers.smt.exprs import any_ne, is_data, lor, reads, rename, sub
from argus_plugins.verifiers.smt.interpreter import Interpreter
from argus_plugins.verifiers.smt.solver import Query


def check_store(
    it: Interpreter, op: Store, shape, coords, dims, mask, inside, val: AVal, atomic: bool
) -> None:
    """All grid-wide obligations of one store; `coords` and `dims` in tile-axis order."""
    chk = it.chk
    rank = len(shape)
    elems = [elem_sym(d) for d in range(rank)]
    if not atomic:
        p = "'"
        other = [rename(PID, p)] + [rename(e, p) for e in elems]
        mine = [*it.ctx.program_vector(), *elems]
        differ = any_ne(mine, [rename(x, p) for x in mine])
        viol = land(mask, rename(mask, p), *[as_expr(c).eq(rename(c, p)) for c in coords], differ)
        chk.require(
            "store_once",
            op.point,
            shape,
            viol,
            other,
            coords,
            "lands at {rhs}, which (program, element) {lhs} also writes",
        )
    f = chk.require(
        "store_cover",
        op.point,
        shape,
        land(inside, lnot(mask)),
        coords,
        dims,
        "is inside the output {rhs} at {lhs} but masked off, so it is never written",
    )
    if f is not None and f.status == "violated":
        _confirm_unwritten(it, f, op, shape, coords, mask)
    if not scatter_grid(it, op, shape, coords, dims, atomic):  # through an index tile
        _tile_grid(it, op, shape, coords, dims, atomic)
    check_factors(it, op, shape, coords, mask, val, atomic)
    contribs = [c for c in val.contrib if isinstance(c, Contribution)]
    if contribs and not val.window:  # an assert_contraction already proved its window
        contraction(it, op, shape, coords, mask, contribs, atomic)


def _confirm_unwritten(it: Interpreter, f: Finding, op, shape, coords, mask) -> None:
    """Does any other (program, element) write the coordinate the model left unwritten?"""
    cex = f.cex
    q = Query(it.ctx, shape, fixed={**cex["shapes"], **cex.get("scalars", {})})
    s = "%"
    viol = land(rename(mask, s), *[as_expr(rename(c, s)).eq(v) for c, v in zip(coords, cex["lhs"])])
    if q.check(viol).status != "proved":
        f.status, f.cex, f.note = (
            "unknown",
            None,
            "a masked-off element may be written by another program",
        )


def _tile_grid(it: Interpreter, op, shape, coords, dims, atomic: bool) -> None:
    chk, ctx = it.chk, it.ctx
    # a sub-tensor view (o[b, h].tile(BM, D)): its fixed leading coordinates index tiles
    # of size 1, so the output's tile grid spans them too
    tile = tuple(shape)  # the query's element symbols range over the tile itself
    shape = (1,) * (len(coords) - len(tile)) + tile
    zero = {elem_sym(d): 0 for d in range(len(tile))}
    base = [sub(c, zero) for c in coords]
    box = lor(
        *[lor(as_expr(c - b) < 0, as_expr(c - b) >= n) for c, b, n in zip(coords, base, shape)],
        *[as_expr(b % n).ne(0) for b, n in zip(base, shape)],
    )
    f = chk.require(
        "store_tile",
        op.point,
        tile,
        box,
        coords,
        base,
        "element lands at {lhs}, outside the tile that starts at {rhs}",
    )
    if f is None or f.status != "proved":
        if f is not None:  # not a tile-shaped store: coverage of the output cannot be proved
            f.status, f.cex = "unknown", None
            f.note = "the store is not an aligned tile, so output coverage is not proved"
        return
    tiles = [b // n for b, n in zip(base, shape)]
    ntiles = [cdiv(d, n) for d, n in zip(dims, shape)]
    outside = lor(*[lor(as_expr(t) < 0, as_expr(t) >= nt) for t, nt in zip(tiles, ntiles)])
    chk.require(
        "store_tile_range",
        op.point,
        tile,
        outside,
        tiles,
        ntiles,
        "stores tile {lhs}, outside the output's {rhs} tiles, so some tile is never written",
    )
    if atomic:
        return
    total: IntLike = 1
    for nt in ntiles:
        total = total * nt
    grid = ctx.grid_total
    chk.require(
        "store_grid",
        op.point,
        tile,
        as_expr(grid) < total,
        [grid],
        [total],
        "the grid launches {lhs} programs for {rhs} output tiles, so some tile is never written",
        structural=as_expr(grid) == as_expr(total),
    )


def scatter_grid(it: Interpreter, op: Store, shape, coords, dims, atomic: bool) -> bool:
    """Output coverage of a scatter (`y.rows(slots)`): True when handled here.

    A coordinate that is a read of a 1-D index tensor at a position (`sorted_ids[pb*BM +
    r]`, or that read where the position is in bounds) is replaced by the position: the
    tile grid is then proved over the index tensor's positions (every row of `sorted_ids`
    is visited once), and coverage of the output follows from the contract (every slot
    appears in `sorted_ids`: assumed, see docs/verifier.md). Other data-dependent
    coordinates are not modelled: `unknown`."""
    if not any(is_data(c) for c in coords):
        return False
    tensors = {t.name: t for t in it.ctx.ir.tensors}
    vcoords, vdims = [], []
    for c, d in zip(coords, dims):
        if not is_data(c):
            vcoords.append(c)
            vdims.append(d)
            continue
        r = c.a if isinstance(c, Select) and isinstance(c.a, DataRead) else c
        t = tensors.get(r.tensor) if isinstance(r, DataRead) else None
        if t is None or len(r.args) != 1 or reads(list(r.args)):
            it.chk.unknown(
                "store_tile", op.point, f"output coverage of a scatter to rows {c} is not modelled"
            )
            return True
        vcoords.append(r.args[0])
        vdims.append(it.ctx.norm(t.dims[0]))
    _tile_grid(it, op, shape, vcoords, vdims, atomic)
    return True


def check_writes(it: Interpreter, st: DataState, op: Store, shape, coords, mask) -> bool:
    """For a data-indexed kernel (data state `st`): a store inside loops writes each
    coordinate once across (program, iteration, element); two stores of one tensor write
    disjoint coordinates. True when the coordinates are computed from prefix sums: then
    every coordinate of the tensor is proved written by some store (select witnesses) at
    its last store, instead of by `check_store`."""
    computed = any(r.tensor in st.ps for r in reads([as_expr(c) for c in coords]))
    name = op.view.tensor.name
    if computed and name not in st.uncovered:
        st.uncovered[name] = op.point  # its coverage is proved at its last store
    ctx, chk, p = it.ctx, it.chk, "'"
    rank = len(shape)
    elems = [elem_sym(d) for d in range(rank)]
    loops = [lp.var for lp in it.loops]
    if loops or computed:  # else check_store poses store_once
        mine = [*ctx.program_vector(), *loops, *elems]
        chk.require(
            "store_once",
            op.point,
            shape,
            land(
                mask,
                rename(mask, p),
                *[as_expr(c).eq(rename(c, p)) for c in coords],
                any_ne(mine, [rename(x, p) for x in mine]),
            ),
            [rename(x, p) for x in mine],
            coords,
            "lands at {rhs}, which (program, iteration, element) {lhs} also writes",
        )
    value = st.vals.get(op.value.id) if computed else None
    per_element = (
        value is not None
        and isinstance(value, Expr)
        and any(e in as_expr(value).symbols() for e in elems)
        and not reads([as_expr(value)])
    )
    if per_element:
        # rows computed from sums get per-element values (moe_align's slots): each value
        # lands in one row only, the readers' `row_of[s] = r` (the padding stores write one
        # value, the sentinel, everywhere, and are not asked this)
        mine = [*ctx.program_vector(), *loops, *elems]
        chk.require(
            "store_value_once",
            op.point,
            shape,
            land(
                mask,
                rename(mask, p),
                as_expr(value).eq(rename(value, p)),
                any_ne(coords, [rename(c, p) for c in coords]),
            ),
            [value],
            [rename(x, p) for x in mine],
            "writes value {lhs}, which (program, iteration, element) {rhs} also writes, "
            "to another row",
        )
    writes = st.writes
    for n, (point, pshape, pcoords, pmask) in enumerate(writes.get(name, [])):
        # the other store's elements are fresh bounded scalars (its tile shape differs)
        fresh = {elem_sym(d): ctx.fresh(f"w{n}_{d}", 0, s) for d, s in enumerate(pshape)}
        oc = [rename(as_expr(c).subs(fresh), p) for c in pcoords]
        om = rename(as_expr(pmask).subs(fresh), p)
        if len(oc) != len(coords):
            continue
        chk.require(
            "store_disjoint",
            op.point,
            shape,
            land(mask, om, *[as_expr(c).eq(o) for c, o in zip(coords, oc)]),
            coords,
            [point.line],
            f"writes {{lhs}} of {name}, which the store at line {{rhs}} also writes",
            query=Query(ctx, tuple(shape)),
        )
    writes.setdefault(name, []).append((op.point, shape, tuple(coords), mask))
    loops_ = [(lp.var, *ctx.loops[lp.var.name]) for lp in it.loops]
    st.cover_writes.setdefault(name, []).append((op.point, shape, tuple(coords), mask, loops_))
    stores = sum(1 for o in ctx.ir.walk() if isinstance(o, Store) and o.view.tensor.name == name)
    if name in st.uncovered and len(st.cover_writes[name]) == stores:
        _cover(it, op, name, st.cover_writes[name], st.uncovered[name])
    return computed


def _cover(it: Interpreter, op: Store, name: str, writes: list, point: ProgramPoint) -> None:
    """Every element of a tensor whose rows are computed from sums is written (select
    witnesses); more than one dimension is not modelled (`unknown`)."""
    dims = op.view.tensor.dims
    if len(dims) != 1 or any(len(w[2]) != 1 for w in writes):
        note = f"that every element of {name} is written is not proved (rows computed by sums)"
        it.chk.unknown("store_cover", point, note)
        return
    select_witnesses.check_cover(it.ctx, it.chk, name, it.ctx.norm(dims[0]), writes, point)
