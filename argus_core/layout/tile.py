"""Tile views of tensors whose extents, and tile sizes, may be symbolic: what
`a.tile(BM, BK)[pm, k]` means.

`tile_divide` splits each mode `M:s` of a layout by a tile size `B` into
`(B, cdiv(M, B)):(s, B*s)`. Unlike `logical_divide` it needs no divisibility: the rest
mode counts partial tiles, and the elements of a partial tile past the extent are the
ones `elem_less` masks off. `tile_at` fixes the tile index. Divide a tensor's offset layout
and you get element offsets; divide its identity layout (`coord.identity_layout`) and you
get element coordinates, which is how `tile_coords` and the DSL's tile views are made.
"""

from __future__ import annotations

from collections.abc import Sequence

from argus_core.ir.expr import Expr, as_expr, land
from argus_core.layout.coord import identity_layout
from argus_core.layout.inttuple import Int, LayoutError, ceildiv, is_tuple
from argus_core.layout.layout import Layout, make_layout, rank


def tile_divide(layout: Layout, tiler: Sequence[Int]) -> Layout:
    """Mode d of the result is `((tiler[d], cdiv(M_d, tiler[d]))):((s_d, tiler[d]*s_d))` for
    mode d `M_d:s_d` of `layout`; the tile coordinate comes first, the tile index second.
    Each mode of `layout` must be flat (an int or Expr extent), and `tiler` one size per mode:
    a positive int, or a symbolic size (an `Expr`, such as a constexpr, taken as positive)."""
    tiler = tuple(tiler)
    if len(tiler) != rank(layout):
        raise LayoutError(
            f"tiler {tiler!r} has {len(tiler)} modes; layout {layout} has {rank(layout)}"
        )
    modes = []
    for d, (mode, b) in enumerate(zip(layout, tiler)):
        if is_tuple(mode.shape):
            raise LayoutError(
                f"tile_divide: mode {d} of {layout} is hierarchical ({mode}); expected a flat extent"
            )
        if not (isinstance(b, Expr) or (isinstance(b, int) and not isinstance(b, bool) and b > 0)):
            raise LayoutError(
                f"tile_divide: tile size {b!r} of mode {d} must be a positive int or a symbol"
            )
        modes.append(Layout((b, ceildiv(mode.shape, b)), (mode.stride, b * mode.stride)))
    return make_layout(*modes)


def tile_at(divided: Layout, index: Sequence[Int]) -> tuple[Int, Layout]:
    """Fix the tile index of every mode of a `tile_divide` result: returns the offset of the
    tile's first element and the layout of the tile (shape = the tiler), so that element
    `e` of tile `index` sits at `offset + inner(e)`."""
    index = tuple(index)
    if len(index) != rank(divided):
        raise LayoutError(
            f"tile index {index!r} has {len(index)} entries; {divided} has {rank(divided)} modes"
        )
    offset: Int = 0
    inner = []
    for d, (mode, i) in enumerate(zip(divided, index)):
        if not (is_tuple(mode.shape) and len(mode.shape) == 2):
            raise LayoutError(
                f"tile_at: mode {d} of {divided} is not (tile, rest); make it with tile_divide"
            )
        offset = offset + i * mode.stride[1]
        inner.append(mode[0])
    return offset, make_layout(*inner)


def elem_less(coords: Sequence[Int], extents: Sequence[Int]) -> Expr:
    """The predicate that `coords[d] < extents[d]` for every d (CuTe's `elem_less`), as an
    Expr: constant 1/0 when everything is concrete, the terms in order otherwise."""
    if len(coords) != len(extents):
        raise LayoutError(f"elem_less: {tuple(coords)!r} and {tuple(extents)!r} differ in rank")
    return land(*(_less(c, m) for c, m in zip(coords, extents)))


def _less(a: Int, b: Int) -> Expr | bool:
    if isinstance(a, Expr) or isinstance(b, Expr):
        return as_expr(a) < as_expr(b)
    return a < b


def tile_coords(
    tiler: Sequence[Int], index: Sequence[Int], element: Sequence[Int], extents: Sequence[Int]
) -> tuple[tuple[Int, ...], Expr]:
    """Global coordinates `index[d]*tiler[d] + element[d]` of element `element` of tile
    `index` of a tensor of shape `extents` (its identity layout divided by `tiler`), and
    the predicate that all of them are below `extents`."""
    n = len(tiler)
    if not (len(index) == len(element) == len(extents) == n):
        raise LayoutError(
            f"tile_coords: tiler {tuple(tiler)!r}, index {tuple(index)!r}, element {tuple(element)!r} "
            f"and extents {tuple(extents)!r} must have the same length"
        )
    offset, inner = tile_at(tile_divide(identity_layout(tuple(extents)), tiler), index)
    coords = tuple(offset + inner(tuple(element)))
    return coords, elem_less(coords, extents)
