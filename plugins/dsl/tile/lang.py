"""The Argus tile-level DSL. Kernel modules use it as `from argus_plugins.dsl.tile import lang as al`.

Layouts are values: a global tensor carries its layout (extents and strides, symbolic), and
a tile view is made by dividing that layout by a tile shape and indexing the rest modes
(`a.tile(BM, BK)[pm, k]`), never by hand-written pointer arithmetic (`views.py`). Loading a
view gives a tile whose elements carry their global coordinates.

This module holds the kernel annotations, program ids, loops, tile creation, memory and
math ops, and re-exports the names kernels use from the layers below it: `tiles` (tile
values and their arithmetic), `views` (tensors and views) and `tags` (tags, assertions,
contracts).
"""

from __future__ import annotations

import builtins
import dis
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from argus_core.errors import DSLError
from argus_core.ir import (
    Carry,
    Dot,
    Expr,
    Full,
    IntLike,
    Let,
    Load,
    LoadScalar,
    Loop,
    Op,
    Reduce,
    Scan,
    Store,
    Sym,
    TileElem,
    Value,
    View,
    Zeros,
    as_expr,
    elem_sym,
    land,
)
from argus_core.ir import cdiv as _cdiv
from argus_core.ir import emax as _emax
from argus_core.ir import emin as _emin
from argus_plugins.dsl.tile import tiles, tracer, views
from argus_plugins.dsl.tile.tags import (
    COORD,
    assert_contraction,
    assert_tag,
    assert_tag_eq,
    at,
    atomic_add,
    contract,
    expect,
    read,
    requires,
    rows_for,
    split_range,
    summand,
    tag,
)
from argus_plugins.dsl.tile.tiles import DType, Tile, bf16, f16, f32, i1, i32
from argus_plugins.dsl.tile.views import (
    TensorArg,
    TileView,
    permute,
    swizzle,
    unswizzle,
    with_strides,
)

# ------------------------------------------------------------------------- annotations


class constexpr:
    """Annotation: a compile-time constant taken from the candidate's policy (tile sizes)."""


@dataclass(frozen=True)
class _TensorAnnotation:
    dims: tuple[str, ...]


class Tensor:
    """Annotation: `Tensor["M", "K"]` is a 2-D global tensor whose extents are the shape
    symbols M and K. Tensors sharing a symbol must agree on that extent at launch."""

    def __class_getitem__(cls, dims: str | tuple[str, ...]) -> _TensorAnnotation:
        dims = (dims,) if isinstance(dims, str) else tuple(dims)
        for d in dims:
            if not (isinstance(d, str) and d.isidentifier()):
                raise DSLError(f"Tensor dims must be identifiers like 'M', got {d!r}")
        return _TensorAnnotation(dims)


@dataclass
class KernelDef:
    """What `@al.kernel` returns: the Python function, traced later by the front end."""

    fn: Callable[..., Any]

    @property
    def __name__(self) -> str:  # noqa: A003
        return self.fn.__name__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise DSLError(
            f"kernel {self.fn.__name__!r} is not called directly; the pipeline traces, "
            "verifies, lowers and launches it"
        )


def kernel(fn: Callable[..., Any]) -> KernelDef:
    return KernelDef(fn)


# ------------------------------------------------------------------------- program ids


@dataclass(frozen=True)
class Order:
    kind: str  # "row_major" | "grouped"
    group: IntLike = 1


row_major = Order("row_major")


def grouped(group: IntLike) -> Order:
    """Grouped (swizzled) program order: GROUP rows of tiles are walked column by column, so
    programs running together share A and B tiles in L2."""
    return Order("grouped", group)


def _let(name: str, expr: IntLike, op: str = "program_ids") -> Sym:
    st = tracer.state()
    sym = Sym(tracer.fresh_name(name), "pid")
    st.emit(Let(tracer.point(op), sym, expr))
    return sym


def program_ids(grid: Sequence[IntLike], order: Order = row_major) -> tuple[Sym, ...]:
    """Launch a 1-D grid of prod(grid) programs and give each its coordinates in `grid`."""
    st = tracer.state()
    if st.grid is not None:
        raise tracer.fail("program_ids may be called once per kernel")
    grid = tuple(grid)
    total: IntLike = 1
    for g in grid:
        total = total * g
    st.grid = (total,)
    pid = Sym(tracer.fresh_name("pid"), "pid", 0, total)
    st.emit(Let(tracer.point("program_id"), pid, Sym("program_id_0", "pid", 0, total)))
    if order.kind == "grouped":
        if len(grid) != 2:
            raise tracer.fail(f"grouped order needs a 2-D grid, got {len(grid)}-D {grid}")
        n_m, n_n = (_let("num_pid_m", grid[0]), _let("num_pid_n", grid[1]))
        in_group = _let("num_pid_in_group", order.group * n_n)
        first_m = _let("first_pid_m", (pid // in_group) * order.group)
        size_m = _let("group_size_m", _emin(n_m - first_m, order.group))
        pm = _let("pid_m", first_m + (pid % in_group) % size_m)
        pn = _let("pid_n", (pid % in_group) // size_m)
        return (pm, pn)
    # row-major: the last grid dim varies fastest
    out: list[Sym] = []
    rest: IntLike = pid
    for d in builtins.range(len(grid) - 1, -1, -1):
        out.append(_let(f"pid_{d}", rest % grid[d] if d > 0 else rest))
        rest = rest // grid[d]
    return tuple(reversed(out))


def cdiv(a: Any, b: Any) -> Any:
    """Ceiling division; elementwise over tuples (`al.cdiv(c.shape, (BM, BN))`)."""
    if isinstance(a, tuple):
        b = b if isinstance(b, tuple) else (b,) * len(a)
        return tuple(_cdiv(x, y) for x, y in zip(a, b))
    return _cdiv(a, b)


def minimum(a: Any, b: Any) -> Any:
    if isinstance(a, Tile) or isinstance(b, Tile):
        return tiles.elementwise("minimum", [a, b])
    return _emin(a, b)


def maximum(a: Any, b: Any) -> Any:
    if isinstance(a, Tile) or isinstance(b, Tile):
        return tiles.elementwise("maximum", [a, b])
    return _emax(a, b)


# ---------------------------------------------------------------------------------- loops


def _assigned_name(frame) -> str | None:
    """The loop target name: the STORE instruction right after the FOR_ITER being run."""
    if frame is None:
        return None
    instrs = list(dis.get_instructions(frame.f_code))
    for i, ins in enumerate(instrs):
        if ins.offset == frame.f_lasti and i + 1 < len(instrs):
            nxt = instrs[i + 1]
            if nxt.opname in ("STORE_FAST", "STORE_NAME", "STORE_DEREF"):
                return str(nxt.argval)
    return None


class range:  # noqa: N801  (mirrors Python's range)
    """`for k in al.range(n)`: a loop traced once with a symbolic induction variable."""

    def __init__(self, start: IntLike, stop: IntLike | None = None, step: IntLike = 1):
        if stop is None:
            start, stop = 0, start
        self.start, self.stop, self.step = start, stop, step
        self._entered = False
        self._done = False

    def __iter__(self) -> range:
        return self

    def __next__(self) -> Sym:
        st = tracer.state()
        frame = tracer.kernel_frame()
        if self._done:
            raise StopIteration
        if not self._entered:
            self._entered = True
            self._point = tracer.point("range")
            self._before = dict(frame.f_locals) if frame else {}
            name = _assigned_name(frame) or "k"
            self.var = Sym(tracer.fresh_name(name), "loop", 0, None)
            st.scopes.append([])
            return self.var
        self._done = True
        body = st.scopes.pop()
        after = dict(frame.f_locals) if frame else {}
        carried = self._carried(body, after)
        st.emit(Loop(self._point, self.var, self.start, self.stop, self.step, body, carried))
        raise StopIteration

    def _carried(self, body: list[Op], after: dict[str, Any]) -> list[Carry]:
        defined_in_body = {id(op.result) for op in _walk(body) if op.result is not None}
        carried: list[Carry] = []
        for var, new in after.items():
            old = self._before.get(var)
            if (
                isinstance(new, Expr)
                and isinstance(old, Expr)
                and new is not old
                and not (isinstance(new, Sym) and new == self.var)
            ):
                if old != new:
                    raise DSLError(
                        f"loop-carried scalar {var!r} is not supported; compute it from the loop "
                        f"variable {self.var.name!r} instead",
                        f"{self._point.file}:{self._point.line}",
                    )
            if not (isinstance(new, Tile) and isinstance(old, Tile)) or new._value is old._value:
                continue
            y = new._value
            if id(y) not in defined_in_body:
                continue
            init = old._value
            name = var  # the carried value is named by the variable the loop rebinds
            inner = Value(y.shape, y.dtype, name)
            arg = Value(init.shape, init.dtype, name)
            if tuple(y.shape) != tuple(init.shape):
                raise DSLError(
                    f"loop-carried {var!r} changes shape from {init.shape} to {y.shape}",
                    f"{self._point.file}:{self._point.line}",
                )
            _rewrite(body, y, inner, defining=True)
            _rewrite(body, init, arg)
            y.name = name
            carried.append(Carry(init=init, arg=arg, yielded=inner, result=y))
        return carried


def _walk(ops: list[Op]):
    for op in ops:
        yield op
        if isinstance(op, Loop):
            yield from _walk(op.body)


def _rewrite(ops: list[Op], old: Value, new: Value, defining: bool = False) -> None:
    for op in _walk(ops):
        if defining and op.result is old:
            op.out = new
        op.replace_operand(old, new)
        if isinstance(op, Loop):
            for c in op.carried:
                if c.init is old:
                    c.init = new


# ----------------------------------------------------------------------- tile creation


def _shape(shape: Sequence[IntLike]) -> tuple[IntLike, ...]:
    shape = tuple(shape)
    for s in shape:
        if not isinstance(s, int | Expr):
            raise tracer.fail(f"tile shape entries must be ints or constexprs, got {s!r}")
    return shape


def indices(shape: Sequence[IntLike]) -> tuple[Sym, ...]:
    """The element index along each axis of a tile of `shape`, for masks and index math:
    `i, j = al.indices((BM, BN))`; `al.where(row0 + i >= col0 + j, s, -inf)`."""
    return tuple(elem_sym(d, n) for d, n in enumerate(_shape(shape)))


def zeros(shape: Sequence[IntLike], dtype: DType | str = f32) -> Tile:
    out = tiles.new_value(_shape(shape), tiles.dtype_name(dtype))
    tracer.state().emit(Zeros(tracer.point("zeros"), out))
    return Tile(out)


def full(shape: Sequence[IntLike], value: float, dtype: DType | str = f32) -> Tile:
    out = tiles.new_value(_shape(shape), tiles.dtype_name(dtype))
    tracer.state().emit(Full(tracer.point("full"), out, float(value)))
    return Tile(out)


# --------------------------------------------------------------------------------- memory


def _mask_expr(mask: Any, v: View) -> Expr | None:
    """A mask is a predicate over element indices, or a boolean tile of the view's shape."""
    if mask is None or isinstance(mask, Expr):
        return mask
    if isinstance(mask, Tile):
        if tuple(mask.shape) == tuple(v.shape):
            axis = None
        elif len(mask.shape) == 1 and len(v.shape) > 1 and mask.shape[0] == v.shape[0]:
            axis = 0  # a per-row mask of a row-gathered view
        else:
            raise tracer.fail(f"mask tile of shape {mask.shape} for a view of shape {v.shape}")
        return TileElem(f"%{mask._value.id}", "data", 0, None, value=mask._value, axis=axis).ne(0)
    raise tracer.fail(f"a mask is a predicate or a boolean tile, got {type(mask).__name__}")


def load_scalar(tensor: TensorArg, *index: IntLike) -> Sym:
    """One element of a global tensor, as a symbolic value (data the verifier cannot see
    into: a contract or an assertion must say what it may be)."""
    if not isinstance(tensor, TensorArg):
        raise tracer.fail(f"load_scalar takes a kernel tensor, got {type(tensor).__name__}")
    if len(tensor.fixed) + len(index) != len(tensor.param.dims):
        raise tracer.fail(f"load_scalar({tensor.name}, ...) needs {len(tensor.param.dims)} indices")
    coords = tensor.point(index)
    sym = Sym(tracer.fresh_name(f"{tensor.name}_at"), "data", None, None)
    tracer.state().emit(
        LoadScalar(tracer.point("load_scalar"), sym, tensor.param, coords, tensor.layout(coords))
    )
    return sym


def load(
    view: TileView,
    mask: Expr | None = None,
    other: float = 0.0,
    boundary: bool = True,
    along: int | None = None,
) -> Tile:
    """Read a tile. With `boundary` (the default) elements outside the tensor are masked
    (they read `other`); `mask` adds a condition of your own. `along=d` spreads neighbouring
    elements of dim d over neighbouring lanes: for a gather whose addresses the compiler
    cannot see are contiguous (rows picked by computed indices), name the dim along which
    memory is contiguous so the loads coalesce. A layout choice only: the tile's values
    are the same."""
    v = views.tile_view(view, "load").view
    if along is not None and (
        isinstance(along, bool) or not isinstance(along, int) or not 0 <= along < len(v.shape)
    ):
        raise tracer.fail(
            f"load along={along!r}: a dim of the {len(v.shape)}-D tile "
            f"({', '.join(map(str, builtins.range(len(v.shape))))}) or None"
        )
    m = land(v.in_bounds if boundary else None, _mask_expr(mask, v))
    out = tiles.new_value(v.shape, f"like:{v.tensor.name}")
    last = along is None or along == len(v.shape) - 1  # the compiler's own default
    tracer.state().emit(
        Load(
            tracer.point("load"),
            out,
            v,
            None if m == as_expr(1) else m,
            float(other),
            None if last else along,
        )
    )
    return Tile(out)


def store(view: TileView, value: Tile, mask: Expr | None = None, boundary: bool = True) -> None:
    """Write a tile where the view lies inside the tensor (and `mask` holds)."""
    v = views.tile_view(view, "store").view
    if not isinstance(value, Tile):
        raise tracer.fail(f"store needs a tile value, got {type(value).__name__}")
    if tuple(value.shape) != tuple(v.shape):
        raise tracer.fail(f"store of a {value.shape} tile into a {v.shape} view of {v.tensor.name}")
    m = land(v.in_bounds if boundary else None, _mask_expr(mask, v))
    st = tracer.state()
    st.emit(Store(tracer.point("store"), v, value._value, None if m == as_expr(1) else m))
    if v.tensor.name not in st.written:
        st.written.append(v.tensor.name)


# ---------------------------------------------------------------------------------- math


def dot(a: Tile, b: Tile, acc: Tile | None = None) -> Tile:
    """Matrix product of an (m, k) and a (k, n) tile, accumulated in fp32 (or into `acc`)."""
    if not (isinstance(a, Tile) and isinstance(b, Tile)):
        raise tracer.fail("dot takes two tiles")
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise tracer.fail(f"dot needs 2-D tiles, got {a.shape} and {b.shape}")
    if a.shape[1] != b.shape[0]:
        raise tracer.fail(f"dot contracts a's {a.shape[1]} with b's {b.shape[0]}: they differ")
    shape = (a.shape[0], b.shape[1])
    if acc is not None and tuple(acc.shape) != shape:
        raise tracer.fail(f"dot accumulator has shape {acc.shape}, expected {shape}")
    out = tiles.new_value(shape, acc._value.dtype if acc is not None else "f32")
    tracer.state().emit(
        Dot(tracer.point("dot"), out, a._value, b._value, acc._value if acc is not None else None)
    )
    return Tile(out)


def where(cond: Any, a: Any, b: Any) -> Tile:
    return tiles.elementwise("where", [cond, a, b])


def exp(x: Tile) -> Tile:
    return tiles.elementwise("exp", [x])


def exp2(x: Tile) -> Tile:
    return tiles.elementwise("exp2", [x])


def log2(x: Tile) -> Tile:
    return tiles.elementwise("log2", [x])


def log(x: Tile) -> Tile:
    return tiles.elementwise("log", [x])


def sqrt(x: Tile) -> Tile:
    return tiles.elementwise("sqrt", [x])


def abs(x: Tile) -> Tile:  # noqa: A001
    return tiles.elementwise("abs", [x])


def sigmoid(x: Tile) -> Tile:
    return tiles.elementwise("sigmoid", [x])


def _reduce(fn: str, x: Tile, axis: int) -> Tile:
    if not isinstance(x, Tile):
        raise tracer.fail(f"{fn} takes a tile")
    if not 0 <= axis < len(x.shape):
        raise tracer.fail(f"{fn} axis {axis} out of range for a {len(x.shape)}-D tile")
    shape = tuple(s for d, s in enumerate(x.shape) if d != axis)
    out = tiles.new_value(shape, x._value.dtype)
    tracer.state().emit(Reduce(tracer.point(fn), out, fn, x._value, axis))
    return Tile(out)


def cumsum(x: Tile, axis: int = 0) -> Tile:
    """Inclusive prefix sum along `axis` (same shape)."""
    if not isinstance(x, Tile) or not 0 <= axis < len(x.shape):
        raise tracer.fail(f"cumsum takes a tile and an axis below its rank, got {x!r}, {axis}")
    out = tiles.new_value(x.shape, x._value.dtype)
    tracer.state().emit(Scan(tracer.point("cumsum"), out, "cumsum", x._value, axis))
    return Tile(out)


def sum(x: Tile, axis: int) -> Tile:  # noqa: A001
    return _reduce("sum", x, axis)


def max(x: Tile, axis: int) -> Tile:  # noqa: A001
    return _reduce("max", x, axis)


def min(x: Tile, axis: int) -> Tile:  # noqa: A001
    return _reduce("min", x, axis)


__all__ = [
    "COORD",
    "DType",
    "Tensor",
    "Tile",
    "TileView",
    "abs",
    "assert_contraction",
    "assert_tag",
    "assert_tag_eq",
    "at",
    "atomic_add",
    "bf16",
    "cdiv",
    "constexpr",
    "contract",
    "cumsum",
    "dot",
    "exp",
    "exp2",
    "expect",
    "f16",
    "f32",
    "full",
    "grouped",
    "i1",
    "i32",
    "indices",
    "kernel",
    "load",
    "load_scalar",
    "log",
    "log2",
    "max",
    "maximum",
    "min",
    "minimum",
    "permute",
    "program_ids",
    "range",
    "read",
    "requires",
    "row_major",
    "rows_for",
    "sigmoid",
    "split_range",
    "sqrt",
    "store",
    "sum",
    "summand",
    "swizzle",
    "tag",
    "unswizzle",
    "where",
    "with_strides",
    "zeros",
]
