"""Tags, tag assertions, contracts, and the split-K and data-dependent ops the verifier
reasons about.

Kernels use these through `lang` (`al.tag(...)`, `al.expect(...)`). Tags and assertions
are ghost state: they emit erased IR ops, so the lowered code is the same without them.
The built-in tag of a loaded tile is named `"coord"`: its global coordinates (a view's
coordinates, `views.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from argus_core.ir import Expr, IntLike, Sym, as_expr, cdiv, elem_sym, emin, land
from argus_core.ir.nodes import AtomicAdd, TileElem
from argus_core.ir.tags import (
    COORD,
    AssertContraction,
    AssertTag,
    AssertTagEq,
    Contract,
    Requires,
    RowsFor,
    Summand,
    Tag,
)
from argus_core.ir.tags import read as data_read
from argus_plugins.dsl.tile import tracer
from argus_plugins.dsl.tile.tiles import Tile
from argus_plugins.dsl.tile.views import TensorArg, tile_view


def _tile_value(x: Any, op: str):
    if not isinstance(x, Tile):
        raise tracer.fail(f"{op} takes a tile (a loaded or computed value), got {type(x).__name__}")
    return x._value


def _as_tuple(v: Any, op: str) -> tuple[IntLike, ...]:
    vals = tuple(v) if isinstance(v, tuple | list) else (v,)
    for e in vals:
        if not isinstance(e, int | Expr) or isinstance(e, bool):
            raise tracer.fail(f"{op}: tag entries must be ints or symbolic expressions, got {e!r}")
    return vals


# ------------------------------------------------------------------------------- tags


def tag(x: Any, fn: Callable[..., Any], name: str = "tag") -> Any:
    """Attach tag `name` to every element of tile `x`: `fn(i0, i1, ...)` receives the element
    indices (symbols) and returns a tuple of expressions (it may close over program ids,
    loop variables and shapes). Returns `x` so a tag can be written inline."""
    v = _tile_value(x, "tag")
    if name == COORD:
        raise tracer.fail(f"tag name {COORD!r} is the built-in coordinate tag; choose another name")
    elems = [elem_sym(d, s) for d, s in enumerate(v.shape)]
    exprs = _as_tuple(fn(*elems), "tag")
    tracer.state().emit(Tag(tracer.point("tag", ghost=True), v, exprs, name))
    return x


def assert_tag_eq(a: Any, b: Any, name: str = COORD, name_b: str | None = None) -> None:
    """Assert that tag `name` of `a` equals tag `name_b` (default: `name`) of `b` at every
    element where both are real. `a` and `b` must have the same shape."""
    va, vb = _tile_value(a, "assert_tag_eq"), _tile_value(b, "assert_tag_eq")
    if tuple(va.shape) != tuple(vb.shape):
        raise tracer.fail(
            f"assert_tag_eq of tiles with shapes {va.shape} and {vb.shape}: they must match"
        )
    tracer.state().emit(
        AssertTagEq(tracer.point("assert_tag_eq", ghost=True), va, vb, name, name_b or name)
    )


def assert_tag(
    pred: Callable[..., Any], x: Any, name: str = COORD, arity: int | None = None
) -> None:
    """Assert `pred(*tag_entries)` at every real element of `x`; `pred` receives the entries
    of tag `name` as symbols and returns a predicate (`t0 < M`, `(t0 - t1).eq(0)`, ...).
    `arity` is the number of entries (default: the tile's rank)."""
    v = _tile_value(x, "assert_tag")
    n = len(v.shape) if arity is None else arity
    syms = tuple(Sym(f"_tag{d}", "scalar") for d in range(n))
    p = pred(*syms)
    if not isinstance(p, Expr):
        raise tracer.fail(f"assert_tag: the predicate must return a symbolic condition, got {p!r}")
    tracer.state().emit(AssertTag(tracer.point("assert_tag", ghost=True), v, name, syms, p))


def assert_contraction(
    x: Any, window: Callable[..., Any], name: str = COORD, arity: int | None = None
) -> None:
    """Assert that the contracted coordinates summed into each element of `x` (by every
    `dot` that fed it, across loop iterations) are exactly those c with
    `window(*tag_entries, c)`, each summed once. `window` receives tag `name`'s entries and
    c as symbols and must describe a prefix [0, hi) of the contraction (for causal
    attention: `(c < SKV) & (causal.eq(0) | (c <= row + SKV - S))`)."""
    v = _tile_value(x, "assert_contraction")
    n = len(v.shape) if arity is None else arity
    syms = tuple(Sym(f"_tag{d}", "scalar") for d in range(n))
    c = Sym("_tagc", "scalar")
    p = window(*syms, c)
    if not isinstance(p, Expr):
        raise tracer.fail(
            f"assert_contraction: the window must return a symbolic condition, got {p!r}"
        )
    tracer.state().emit(
        AssertContraction(tracer.point("assert_contraction", ghost=True), v, name, syms, c, p)
    )


def requires(pred: Any) -> None:
    """State a precondition over shapes and scalar arguments (`(HQ % HKV).eq(0)`,
    `D <= HEAD_D`). Ghost code: the verifier assumes it; the lowering erases it."""
    if not isinstance(pred, Expr):
        raise tracer.fail(f"requires takes a symbolic condition over shapes, got {pred!r}")
    tracer.state().emit(Requires(tracer.point("requires", ghost=True), pred))


# --------------------------------------------------------------------- split-K support


def split_range(n: IntLike, splits: IntLike, s: IntLike) -> tuple[IntLike, IntLike]:
    """Iterations `[lo, hi)` of split `s` when `n` iterations are cut into `splits` parts."""
    per = cdiv(n, splits)
    return s * per, emin((s + 1) * per, n)


def atomic_add(view: Any, value: Any, mask: Expr | None = None, boundary: bool = True) -> None:
    """Add a tile into `view` atomically (split-K partial sums). The verifier checks that
    the partial sums landing on each output element cover the contraction exactly once."""
    v = tile_view(view, "atomic_add").view
    if not isinstance(value, Tile) or tuple(value.shape) != tuple(v.shape):
        raise tracer.fail(f"atomic_add needs a tile of shape {v.shape}, got {value!r}")
    m = land(v.in_bounds if boundary else None, mask)
    st = tracer.state()
    st.emit(AtomicAdd(tracer.point("atomic_add"), v, value._value, None if m == as_expr(1) else m))
    if v.tensor.name not in st.written:
        st.written.append(v.tensor.name)


# ------------------------------------------------- data-dependent values (MoE routing)


def read(tensor: Any, *index: IntLike) -> Expr:
    """Ghost read of `tensor[index]` for contracts and assertions: an uninterpreted value
    the verifier knows only through contracts (nothing is loaded). `tensor` is a kernel
    tensor or the name of another kernel's tensor (`"ids"`)."""
    index = _as_tuple(index, "read")
    if isinstance(tensor, TensorArg):
        if len(tensor.fixed) + len(index) != len(tensor.param.dims):
            raise tracer.fail(f"read({tensor.name}, ...) needs {len(tensor.param.dims)} indices")
        index = tensor.point(index)
        name = tensor.name
    elif isinstance(tensor, str) and tensor.isidentifier():
        name = tensor
    else:
        raise tracer.fail(f"read takes a kernel tensor or a tensor name, got {tensor!r}")
    return data_read(name, *index)


def at(x: Any, axis: int = 0) -> Expr:
    """Ghost: element r of the 1-D tile `x`, where r is the element index along `axis` of
    the tile an assertion or tag speaks about (`al.at(slots)`: the slot of row r); for a
    0-d tile (a reduction's result, `base`), its one value."""
    v = _tile_value(x, "at")
    if len(v.shape) > 1:
        raise tracer.fail(f"at takes a 0-d or 1-D tile, got shape {v.shape}")
    return TileElem(f"%{v.id}", "data", 0, None, value=v, axis=axis)


def expect(x: Any, pred: Callable[..., Any], name: str = COORD, arity: int | None = None) -> Any:
    """`assert_tag(pred, x, name, arity)` that returns `x`, so an assertion can be written
    inline where a tile is made (`xt = al.expect(al.load(...), lambda t, c: ...)`)."""
    assert_tag(pred, x, name, arity)
    return x


def contract(pred: Callable[..., Any], *extents: IntLike, name: str = "contract") -> None:
    """State a precondition on data: `pred(r0, r1, ...)` holds for every r_d in
    [0, extents[d]). `pred` reads data with `al.read` (for MoE: every row of `sorted_ids`
    is padding or a slot routed to its block's expert). The verifier assumes it; the
    kernel producing the data must establish it."""
    if not extents:
        raise tracer.fail("contract needs the extent of at least one bound variable")
    syms = tuple(Sym(f"_{name}_r{d}", "scalar") for d in range(len(extents)))
    p = pred(*syms)
    if not isinstance(p, Expr):
        raise tracer.fail(f"contract {name!r}: the predicate must be symbolic, got {p!r}")
    tracer.state().emit(
        Contract(tracer.point("contract", ghost=True), syms, tuple(extents), p, name)
    )


def summand(x: Any, entry: int = 0) -> Any:
    """Ghost: `x` is one term of a sum over its coordinate entry `entry` (a loop over a
    token's slots: `acc = acc + al.summand(al.load(y[s]...), 0)`). Returns `x`."""
    v = _tile_value(x, "summand")
    tracer.state().emit(Summand(tracer.point("summand", ghost=True), v, int(entry)))
    return x


def rows_for(x: Any, index: Any, source: Callable[[Expr], Any]) -> Any:
    """Ghost: row r of `x` is the result for row `index[r]` of a scatter, computed from
    source row `source(index[r])` (`al.rows_for(act, slots, lambda s: s // topk)`). The
    verifier asserts x's row coordinate is that source row, then relabels it `index[r]`,
    so a store through `h1.rows(slots)` must land exactly there. Returns `x`."""
    v = _tile_value(x, "rows_for")
    target = at(index, 0)
    src = source(target)
    if not isinstance(src, int | Expr):
        raise tracer.fail(f"rows_for: source must return an index expression, got {src!r}")
    tracer.state().emit(
        RowsFor(
            tracer.point("rows_for", ghost=True),
            v,
            _tile_value(index, "rows_for"),
            as_expr(src),
            target,
        )
    )
    return x


__all__ = [
    "COORD",
    "at",
    "contract",
    "expect",
    "read",
    "rows_for",
    "summand",
    "assert_contraction",
    "assert_tag",
    "assert_tag_eq",
    "atomic_add",
    "requires",
    "split_range",
    "tag",
]
