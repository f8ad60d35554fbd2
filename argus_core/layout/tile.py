"""Tile views of tensors whose extents may be symbolic: what `a.tile(BM, BK)[pm, k]` means.

`tile_divide` splits each mode `M:s` of a tensor's layout by a concrete tile size `B` into
`(B, cdiv(M, B)):(s, B*s)`. Unlike `logical_divide` it needs no divisibility: the rest
mode counts partial tiles, and the elements of a partial tile past the extent are the
ones `tile_coords`'s predicate masks off.
"""

from __future__ import annotations

from collections.abc import Sequence

from argus_core.ir.expr import Expr, as_expr, land
from argus_core.layout.inttuple import Int, LayoutError, ceildiv, is_tuple
from argus_core.layout.layout import Layout, make_layout, rank


def tile_divide(layout: Layout, tiler: Sequence[int]) -> Layout:
    """Mode d of the result is `((tiler[d], cdiv(M_d, tiler[d]))):((s_d, tiler[d]*s_d))` for
    mode d `M_d:s_d` of `layout`; the tile coordinate comes first, the tile index second.
    Each mode of `layout` must be flat (an int or Expr extent), and `tiler` one int per mode."""
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
        if not isinstance(b, int) or isinstance(b, bool) or b <= 0:
            raise LayoutError(f"tile_divide: tile size {b!r} of mode {d} must be a positive int")
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


def tile_coords(
    tiler: Sequence[int], index: Sequence[Int], element: Sequence[Int], extents: Sequence[Int]
) -> tuple[tuple[Int, ...], Expr]:
    """Global coordinates `index[d]*tiler[d] + element[d]` of element `element` of tile
    `index`, and the predicate that all of them are below `extents` (the tensor's shape).
    The predicate is an Expr (constant 1/0 when everything is concrete)."""
    n = len(tiler)
    if not (len(index) == len(element) == len(extents) == n):
        raise LayoutError(
            f"tile_coords: tiler {tuple(tiler)!r}, index {tuple(index)!r}, element {tuple(element)!r} "
            f"and extents {tuple(extents)!r} must have the same length"
        )
    coords = tuple(i * b + e for b, i, e in zip(tiler, index, element))
    in_bounds = land(*(_less(c, m) for c, m in zip(coords, extents)))
    return coords, in_bounds


def _less(a: Int, b: Int) -> Expr | bool:
    if isinstance(a, Expr) or isinstance(b, Expr):
        return as_expr(a) < as_expr(b)
    return a < b
