"""Global tensors and the views of them that loads and stores move: all made by the layout
algebra (`argus_core.layout`), never by index arithmetic of their own.

A tensor carries two layouts: its offset layout (extents and strides, or the strides
`with_strides` gives) and its coordinate layout (the identity layout of its free dims, from
an origin that holds the coordinates fixed by indexing: `q[b, h]` is a slice). A tile view
divides the coordinate layout into tiles and fixes the tile (`a.tile(BM, BK)[pm, k]`); a
gathered view indexes its first mode by data (a custom stride); a permuted view composes
with a permutation of modes; a swizzled view composes with a `Swizzle` on the tile
coordinate, and a swizzle composed with its inverse is the view it came from. The IR
`View` of any of them is its coordinates at the element symbols, the offset layout applied
to them, and the predicate that the free coordinates are below the extents.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from argus_core.ir import Expr, IntLike, Sym, TensorParam, TileElem, View, elem_axis, elem_sym
from argus_core.layout import (
    ArithTuple,
    CustomStride,
    Layout,
    Swizzle,
    basis,
    elem_less,
    identity_layout,
    make_layout,
    slice_and_offset,
    tile_at,
    tile_divide,
    zero,
)
from argus_plugins.dsl.tile import tracer
from argus_plugins.dsl.tile.tiles import DType, Tile

# ------------------------------------------------------------------------ global tensors


class TensorArg:
    """A global tensor inside a traced kernel, or a sub-tensor with its leading dims fixed
    (`q[b, h]` is the 2-D `[S, D]` slice of a 4-D `q`). `layout` maps a full coordinate to
    the element offset; `coords` maps a coordinate of the free dims to the full coordinate
    (added to `origin`, which holds the fixed ones)."""

    def __init__(self, param: TensorParam, layout: Layout | None = None):
        self.param = param
        self.layout = layout if layout is not None else Layout(param.dims, param.strides)
        self.coords = identity_layout(param.dims)
        self.origin = zero(len(param.dims))
        self.fixed: tuple[IntLike, ...] = ()  # the indices that fixed the leading dims

    @property
    def name(self) -> str:
        return self.param.name

    @property
    def shape(self) -> tuple[Sym, ...]:
        """Extents of the dims not fixed by indexing."""
        return self.param.dims[len(self.fixed) :]

    @property
    def dtype(self) -> DType:
        return DType(f"like:{self.param.name}")

    def __getitem__(self, index: Any) -> TensorArg:
        """Fix the leading dims: `q[b, h]` (ints, program ids, or index expressions)."""
        index = index if isinstance(index, tuple) else (index,)
        if len(index) >= len(self.shape):
            raise tracer.fail(
                f"{self.name}[...] fixes {len(index)} dims but only {len(self.shape) - 1} of "
                f"{list(self.shape)} can be fixed (a tile needs at least one free dim)"
            )
        for i in index:
            if not isinstance(i, int | Expr):
                raise tracer.fail(f"{self.name}[...]: index {i!r} is not an int or a program value")
        free = (None,) * (len(self.shape) - len(index))
        coords, offset = slice_and_offset(index + free, self.coords)
        out = TensorArg(self.param, self.layout)
        out.coords, out.origin, out.fixed = coords, self.origin + offset, self.fixed + index
        return out

    def point(self, index: Sequence[IntLike]) -> tuple[IntLike, ...]:
        """The full coordinate of the element at `index` (one entry per free dim)."""
        return tuple(self.origin + self.coords(tuple(index)))

    def bounds(self, coords: Sequence[IntLike]) -> Expr:
        """The predicate that the free dims of a full coordinate are below their extents
        (the fixed ones are the kernel's to keep in range)."""
        f = len(self.fixed)
        return elem_less(tuple(coords)[f:], self.param.dims[f:])

    def rows(self, index: Tile) -> RowsTensor:
        """Gather (load) or scatter (store) along the first free dim by data: row `i` of the
        result is row `index[i]` of this tensor. Rows whose index is past the extent (padding
        sentinels) are masked, like any out-of-bounds element."""
        if not isinstance(index, Tile) or len(index.shape) != 1:
            raise tracer.fail(
                f"{self.name}.rows(...) takes a 1-D tile of row indices, got {index!r}"
            )
        return RowsTensor(self, index)

    def tile(self, *tiler: IntLike) -> TiledTensor:
        """Divide this tensor's layout into tiles of shape `tiler` (partial tiles at the edges)."""
        if len(tiler) != len(self.shape):
            raise tracer.fail(
                f"{self.name}.tile{tuple(tiler)} needs {len(self.shape)} tile sizes, one per dim "
                f"{self.shape}, got {len(tiler)}"
            )
        return TiledTensor(self, _tiler(tiler, f"{self.name}.tile"))

    def describe(self) -> str:
        """How the DSL names it in comments: `q[b][h]`."""
        return self.name + "".join(f"[{f}]" for f in self.fixed)

    def __repr__(self) -> str:
        return f"{self.describe()}{list(self.shape)}"


def _tiler(tiler: Sequence[Any], what: str) -> tuple[IntLike, ...]:
    for b in tiler:
        if isinstance(b, bool) or not (isinstance(b, Expr) or (isinstance(b, int) and b > 0)):
            raise tracer.fail(f"{what}{tuple(tiler)}: tile sizes are positive ints or constexprs")
    return tuple(tiler)


def _index(index: Any, n: int, what: str) -> tuple[IntLike, ...]:
    index = index if isinstance(index, tuple) else (index,)
    if len(index) != n:
        raise tracer.fail(f"tile index {index} of {what} needs {n} coordinates")
    for i in index:
        if isinstance(i, bool) or not isinstance(i, int | Expr):
            raise tracer.fail(
                f"tile index {index} of {what}: {i!r} is not an int or a program value"
            )
    return index


class TiledTensor:
    """A tensor divided into tiles: index it with tile coordinates to get a view."""

    def __init__(self, tensor: TensorArg, tiler: tuple[IntLike, ...]):
        self.tensor, self.tiler = tensor, tiler
        self.divided = tile_divide(tensor.coords, tiler)

    @property
    def shape(self) -> tuple[IntLike, ...]:
        """Number of tiles along each dim (partial tiles count)."""
        return tuple(mode.shape[1] for mode in self.divided)

    def __getitem__(self, index: Any) -> TileView:
        index = _index(index, len(self.tiler), self.tensor.name)
        offset, inner = tile_at(self.divided, index)
        desc = (
            f"{self.tensor.describe()}.tile({', '.join(map(str, self.tiler))})"
            f"[{', '.join(map(str, index))}]"
        )
        return TileView(self.tensor, self.tiler, desc, self.tensor.origin + offset, inner)


class RowsTensor:
    """Rows of a tensor chosen by a tile of indices (`x.rows(ids)`); tile the other dims."""

    def __init__(self, tensor: TensorArg, index: Tile):
        self.tensor, self.index = tensor, index

    def tile(self, *tiler: IntLike) -> RowsTiled:
        rest = self.tensor.shape[1:]
        if len(tiler) != len(rest):
            raise tracer.fail(
                f"{self.tensor.name}.rows(...).tile{tuple(tiler)} needs {len(rest)} tile sizes "
                f"for dims {list(rest)}"
            )
        return RowsTiled(self, _tiler(tiler, f"{self.tensor.name}.rows(...).tile"))

    def view(self, tiler: tuple[IntLike, ...] = (), index: tuple[IntLike, ...] = ()) -> TileView:
        """The rows, with tile `index` of the other dims divided by `tiler`: the first mode of
        the coordinate layout strides by the index tile's data, the rest are divided."""
        t = self.tensor
        rows = Layout(self.index.shape[0], CustomStride(self._row, t.coords[0].stride, "rows"))
        offset, inner = 0, Layout((), ())
        if tiler:
            offset, inner = tile_at(tile_divide(t.coords[1:], tiler), index)
        idx = self.index._value.name or "?"
        desc = f"{t.describe()}.rows({idx})" + (
            f".tile({', '.join(map(str, tiler))})[{', '.join(map(str, index))}]" if tiler else ""
        )
        shape = (self.index.shape[0], *tiler)
        return TileView(t, shape, desc, t.origin + offset, make_layout(rows, *inner))

    def _row(self, e: IntLike) -> TileElem:
        """Row `index[e]`: the index tile's element at e's axis of the view (data)."""
        axis = elem_axis(e)
        if axis is None:
            raise tracer.fail(
                f"{self.tensor.name}.rows(...): its rows are indexed by data, so a view of it "
                f"can only reorder axes, not compute the row from {e!r}"
            )
        v = self.index._value
        return TileElem(f"%{v.id}", "data", 0, None, value=v, axis=axis)


class RowsTiled:
    """`x.rows(ids).tile(BK)`: index it with the tile coordinates of the other dims."""

    def __init__(self, rows: RowsTensor, tiler: tuple[IntLike, ...]):
        self.rows, self.tiler = rows, tiler

    def __getitem__(self, index: Any) -> TileView:
        index = _index(index, len(self.tiler), f"{self.rows.tensor.name}.rows(...)")
        return self.rows.view(self.tiler, index)


# ---------------------------------------------------------------------------------- views

Step = Layout | Swizzle  # a map of element coordinates: a permutation, or a swizzle


@dataclass(frozen=True, eq=False)
class TileView:
    """A tile-shaped window of a global tensor (what `load` reads and `store` writes).

    A view made from a tensor maps element e to `origin + layout(e)`; a derived view
    (permuted, swizzled) maps e to its `source`'s coordinate of `step(e)`."""

    tensor: TensorArg
    shape: tuple[IntLike, ...]
    desc: str  # how the DSL made it, for comments in lowered code
    origin: ArithTuple | None = None
    layout: Layout | None = None
    source: TileView | None = None
    step: Step | None = None

    def coordinate(self, e: tuple[IntLike, ...]) -> tuple[IntLike, ...]:
        """The full tensor coordinate of element `e` of this view."""
        if self.source is None:
            return tuple(self.origin + self.layout(e))
        if isinstance(self.step, Swizzle):
            return self.source.coordinate(self.step.on_tile(*e))
        return self.source.coordinate(tuple(self.step(e)))

    @cached_property
    def view(self) -> View:
        """The IR view: coordinates over the element symbols, offsets, and bounds."""
        coords = self.coordinate(tuple(elem_sym(d, n) for d, n in enumerate(self.shape)))
        return View(
            tensor=self.tensor.param,
            shape=self.shape,
            coords=coords,
            offset=self.tensor.layout(coords),
            in_bounds=self.tensor.bounds(coords),
            desc=self.desc,
        )

    def coord(self, dim: int) -> IntLike:
        """The global coordinate along `dim` of each element (an expression over the tile)."""
        return self.view.coords[dim]

    @property
    def in_bounds(self) -> Expr:
        return self.view.in_bounds


def tile_view(view: Any, op: str) -> TileView:
    """`view` as a TileView (a whole gathered 1-D tensor, `ids.rows(pos)`, is one), or the
    error naming what `op` takes."""
    if isinstance(view, RowsTensor) and len(view.tensor.shape) == 1:
        return view.view()
    if not isinstance(view, TileView):
        raise tracer.fail(
            f"{op} takes a tile view like a.tile(BM, BK)[pm, k], got {type(view).__name__}"
        )
    return view


def permute(view: Any, order: Sequence[int]) -> TileView:
    """The view through the layout with modes permuted: element e of the result is element
    `e'` of `view` with `e'[order[d]] = e[d]`; its shape is `view.shape` permuted. Its own
    inverse is the inverse permutation."""
    v = tile_view(view, "permute")
    order = tuple(order)
    if sorted(order) != list(range(len(v.shape))):
        raise tracer.fail(
            f"permute order {order} is not a permutation of {tuple(range(len(v.shape)))}"
        )
    shape = tuple(v.shape[o] for o in order)
    step = Layout(shape, tuple(basis(o, len(order)) for o in order))
    return TileView(v.tensor, shape, f"permute({v.desc}, {order})", source=v, step=step)


def swizzle(view: Any, bits: int, base: int = 0, shift: int = 0) -> TileView:
    """XOR swizzle of a 2-D view (CuTe `Swizzle<bits, base, bits + shift>` over its atoms):
    element (i, j) of the result is element (i, j ^ (((i >> shift) % 2**bits) << base)) of
    `view`. A swizzle is its own inverse; `unswizzle` names that for readability."""
    v = tile_view(view, "swizzle")
    if len(v.shape) != 2:
        raise tracer.fail(f"swizzle needs a 2-D view, got shape {v.shape}")
    if bits < 0 or base < 0 or shift < 0:
        raise tracer.fail(f"swizzle bits/base/shift must be >= 0, got {bits}/{base}/{shift}")
    sw = Swizzle(bits, base, bits + shift)
    if v.step == sw.inverse():
        return v.source  # a swizzle composed with its inverse is the identity
    desc = f"swizzle({v.desc}, {bits}, {base}, {shift})"
    return TileView(v.tensor, v.shape, desc, source=v, step=sw)


def unswizzle(view: Any, bits: int, base: int = 0, shift: int = 0) -> TileView:
    """The inverse of `swizzle(view, bits, base, shift)` (XOR swizzles are involutions)."""
    return swizzle(view, bits, base, shift)


def with_strides(tensor: Any, *strides: IntLike) -> TensorArg:
    """Reinterpret `tensor` with explicit strides (offsets computed from them) while its
    elements keep their true coordinates. The verifier checks the offsets against the
    tensor's true (contiguous row-major) layout, so a wrong stride is a counterexample."""
    if not isinstance(tensor, TensorArg):
        raise tracer.fail(
            f"with_strides takes a kernel tensor argument, got {type(tensor).__name__}"
        )
    if tensor.fixed:
        raise tracer.fail(
            f"with_strides takes a whole kernel tensor, not the sub-tensor {tensor.describe()}"
        )
    if len(strides) != len(tensor.shape):
        raise tracer.fail(
            f"{tensor.name}.with_strides needs {len(tensor.shape)} strides, got {len(strides)}"
        )
    return TensorArg(tensor.param, Layout(tensor.param.dims, tuple(strides)))
