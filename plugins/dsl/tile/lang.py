"""The Argus tile-level DSL. Kernel modules use it as `from argus_plugins.dsl.tile import lang as al`.

Layouts are values: a global tensor carries its layout (extents and strides, symbolic), and
a tile view is made by dividing that layout by a tile shape and indexing the rest modes
(`a.tile(BM, BK)[pm, k]`), never by hand-written pointer arithmetic. Loading a view gives a
tile whose elements carry their global coordinates.
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
    Cast,
    Dot,
    Elementwise,
    ExpandDims,
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
    TensorParam,
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
from argus_core.layout import Layout
from argus_core.layout.tile import tile_coords
from argus_plugins.dsl.tile import tracer

# ------------------------------------------------------------------------------- types


@dataclass(frozen=True)
class DType:
    name: str  # f32 f16 bf16 i32 i1, or like:<tensor>

    def __repr__(self) -> str:
        return self.name


f32, f16, bf16, i32, i1 = DType("f32"), DType("f16"), DType("bf16"), DType("i32"), DType("i1")
DTYPES = {"f32": f32, "f16": f16, "bf16": bf16, "i32": i32, "i1": i1}


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


# ------------------------------------------------------------------------ global tensors


class TensorArg:
    """A global tensor inside a traced kernel, or a sub-tensor with its leading dims fixed
    (`q[b, h]` is the 2-D `[S, D]` slice of a 4-D `q`): its layout stays the tensor's own,
    so a view's offset is always the layout applied to full coordinates."""

    def __init__(self, param: TensorParam, fixed: tuple[IntLike, ...] = ()):
        self.param = param
        self.fixed = tuple(fixed)
        self.layout = Layout(param.dims, param.strides)

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
        out = TensorArg(self.param, self.fixed + index)
        out.layout = self.layout
        return out

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
        return TiledTensor(self, tuple(tiler))

    def __repr__(self) -> str:
        fixed = "".join(f"[{f}]" for f in self.fixed)
        return f"{self.name}{fixed}{list(self.shape)}"


class TiledTensor:
    """A tensor divided into tiles: index it with tile coordinates to get a view."""

    def __init__(self, tensor: TensorArg, tiler: tuple[IntLike, ...]):
        self.tensor, self.tiler = tensor, tiler

    @property
    def shape(self) -> tuple[IntLike, ...]:
        """Number of tiles along each dim (partial tiles count)."""
        return tuple(_cdiv(d, t) for d, t in zip(self.tensor.shape, self.tiler))

    def __getitem__(self, index: Any) -> TileView:
        index = index if isinstance(index, tuple) else (index,)
        if len(index) != len(self.tiler):
            raise tracer.fail(
                f"tile index {index} of {self.tensor.name} needs {len(self.tiler)} coordinates"
            )
        elems = tuple(elem_sym(d, t) for d, t in enumerate(self.tiler))
        coords, in_bounds = tile_coords(self.tiler, index, elems, self.tensor.shape)
        full = self.tensor.fixed + tuple(coords)
        fixed = "".join(f"[{f}]" for f in self.tensor.fixed)
        desc = (
            f"{self.tensor.name}{fixed}.tile({', '.join(map(str, self.tiler))})"
            f"[{', '.join(map(str, index))}]"
        )
        view = View(
            tensor=self.tensor.param,
            shape=self.tiler,
            coords=full,
            offset=self.tensor.layout(full),  # the tensor's layout applied to the coordinates
            in_bounds=as_expr(in_bounds),
            desc=desc,
        )
        return TileView(view)


class RowsTensor:
    """Rows of a tensor chosen by a tile of indices (`x.rows(ids)`); tile the other dims."""

    def __init__(self, tensor: TensorArg, index: Tile):
        self.tensor, self.index = tensor, index

    def tile(self, *tiler: IntLike) -> _RowsTiled:
        rest = self.tensor.shape[1:]
        if len(tiler) != len(rest):
            raise tracer.fail(
                f"{self.tensor.name}.rows(...).tile{tuple(tiler)} needs {len(rest)} tile sizes "
                f"for dims {list(rest)}"
            )
        return _RowsTiled(self, tuple(tiler))

    def view(self, tiler: tuple[IntLike, ...] = (), index: tuple[IntLike, ...] = ()) -> TileView:
        t = self.tensor
        n = self.index.shape[0]
        row = TileElem(f"%{self.index._value.id}", "data", 0, None, value=self.index._value, axis=0)
        elems = tuple(elem_sym(d + 1, b) for d, b in enumerate(tiler))
        rest = tuple(i * b + e for i, b, e in zip(index, tiler, elems))
        full = t.fixed + (row,) + rest
        in_bounds = land(row < t.shape[0], *[c < d for c, d in zip(rest, t.shape[1:])])
        fixed = "".join(f"[{f}]" for f in t.fixed)
        idx = self.index._value.name or "?"
        desc = f"{t.name}{fixed}.rows({idx})" + (
            f".tile({', '.join(map(str, tiler))})[{', '.join(map(str, index))}]" if tiler else ""
        )
        view = View(t.param, (n, *tiler), full, t.layout(full), as_expr(in_bounds), desc)
        return TileView(view)


class _RowsTiled:
    def __init__(self, rows: RowsTensor, tiler: tuple[IntLike, ...]):
        self.rows, self.tiler = rows, tiler

    def __getitem__(self, index: Any) -> TileView:
        index = index if isinstance(index, tuple) else (index,)
        if len(index) != len(self.tiler):
            raise tracer.fail(f"tile index {index} needs {len(self.tiler)} coordinates")
        return self.rows.view(self.tiler, index)


class TileView:
    """A tile-shaped window of a global tensor (what `load` reads and `store` writes)."""

    def __init__(self, view: View):
        self.view = view

    def coord(self, dim: int) -> IntLike:
        """The global coordinate along `dim` of each element (an expression over the tile)."""
        return self.view.coords[dim]

    @property
    def in_bounds(self) -> Expr:
        return self.view.in_bounds


# ---------------------------------------------------------------------------------- tiles


def _dtype_name(dt: DType | str) -> str:
    if isinstance(dt, DType):
        return dt.name
    if isinstance(dt, str) and (dt in DTYPES or dt.startswith("like:")):
        return dt
    raise tracer.fail(f"invalid dtype {dt!r}; valid choices: {', '.join(DTYPES)} or tensor.dtype")


def _new(shape: tuple[IntLike, ...], dtype: str) -> Value:
    return Value(tuple(shape), dtype)


class Tile:
    """A tile of values in registers (wraps an IR value)."""

    def __init__(self, value: Value):
        self._value = value

    @property
    def shape(self) -> tuple[IntLike, ...]:
        return self._value.shape

    @property
    def dtype(self) -> DType:
        return DType(self._value.dtype)

    def to(self, dtype: DType | str) -> Tile:
        out = _new(self.shape, _dtype_name(dtype))
        tracer.state().emit(Cast(tracer.point("cast"), out, self._value))
        return Tile(out)

    def _bin(self, fn: str, other: Any, swap: bool = False) -> Tile:
        args = [other, self] if swap else [self, other]
        return _elementwise(fn, args)

    def __add__(self, o):
        return self._bin("add", o)

    def __radd__(self, o):
        return self._bin("add", o, True)

    def __sub__(self, o):
        return self._bin("sub", o)

    def __rsub__(self, o):
        return self._bin("sub", o, True)

    def __mul__(self, o):
        return self._bin("mul", o)

    def __rmul__(self, o):
        return self._bin("mul", o, True)

    def __truediv__(self, o):
        return self._bin("div", o)

    def __rtruediv__(self, o):
        return self._bin("div", o, True)

    def __neg__(self):
        return _elementwise("neg", [self])

    def __floordiv__(self, o):
        return self._bin("floordiv", o)

    def __mod__(self, o):
        return self._bin("mod", o)

    def __and__(self, o):
        return self._bin("and", o)

    def __or__(self, o):
        return self._bin("or", o)

    def eq(self, o):
        return self._bin("eq", o)

    def ne(self, o):
        return self._bin("ne", o)

    def __lt__(self, o):
        return self._bin("lt", o)

    def __le__(self, o):
        return self._bin("le", o)

    def __gt__(self, o):
        return self._bin("gt", o)

    def __ge__(self, o):
        return self._bin("ge", o)

    def __getitem__(self, index: Any) -> Tile:
        """`x[:, None]` / `x[None, :]`: insert a size-1 axis where None stands."""
        index = index if isinstance(index, tuple) else (index,)
        if any(i is not None and i != slice(None) for i in index) or index.count(None) != 1:
            raise tracer.fail(f"tile indexing supports one new axis like x[:, None], got {index}")
        if len(index) != len(self.shape) + 1:
            raise tracer.fail(
                f"x{list(index)} on a {len(self.shape)}-D tile needs {len(self.shape) + 1} entries"
            )
        axis = index.index(None)
        shape = self.shape[:axis] + (1,) + self.shape[axis:]
        out = _new(shape, self._value.dtype)
        tracer.state().emit(ExpandDims(tracer.point("expand_dims"), out, self._value, axis))
        return Tile(out)

    def __bool__(self) -> bool:
        raise tracer.fail("a tile has no truth value at trace time; use al.where")

    def __repr__(self) -> str:
        return f"Tile{self._value!r}{list(self.shape)}:{self._value.dtype}"


_FLOAT_DTYPES = ("f16", "bf16", "f32")


def _result_dtype(tiles: list[Value]) -> str:
    dts = [t.dtype for t in tiles]
    if "f32" in dts:
        return "f32"
    return dts[0]


def _broadcast_shape(shapes: list[tuple[IntLike, ...]]) -> tuple[IntLike, ...]:
    """NumPy broadcasting of equal-rank tile shapes: each dim equal, or 1."""
    shapes = [s for s in shapes if len(s)] or [()]  # a 0-D tile broadcasts to any shape
    out = list(shapes[0])
    for s in shapes[1:]:
        if len(s) != len(out):
            raise tracer.fail(
                f"tile shapes {tuple(out)} and {s} differ in rank; add an axis with x[:, None]"
            )
        for d, (a, b) in enumerate(zip(out, s)):
            if isinstance(a, int) and a == 1:
                out[d] = b
            elif not (isinstance(b, int) and b == 1) and a != b:
                raise tracer.fail(f"tile shapes {tuple(out)} and {s} do not broadcast (dim {d})")
    return tuple(out)


def _index_shape(e: Expr) -> tuple[IntLike, ...] | None:
    """The tile shape an index expression spans: extent `hi` along the axis of each element
    symbol in it (1 elsewhere); None when it holds no element symbol."""
    axes = {int(s.name[2:]): s.hi for s in e.symbols() if s.kind == "elem" and s.hi is not None}
    if not axes:
        return None
    return tuple(axes.get(d, 1) for d in builtins.range(builtins.max(axes) + 1))


def _elementwise(fn: str, args: list[Any]) -> Tile:
    vals: list[Any] = []
    for a in args:
        if isinstance(a, Tile):
            vals.append(a._value)
        elif isinstance(a, int | float | Expr):
            vals.append(a)
        else:
            raise tracer.fail(f"{fn}: cannot use {type(a).__name__} {a!r} in tile arithmetic")
    tiles = [v for v in vals if isinstance(v, Value)]
    if not tiles:
        raise tracer.fail(f"{fn} needs at least one tile operand")
    # where's result takes its branches' type; an index expression branch is an int
    typed = [v for v in vals[1:] if isinstance(v, Value)] if fn == "where" else tiles
    dtype = _result_dtype(typed) if typed else "i32"
    if fn == "where" and any(isinstance(v, float) for v in vals[1:]) and dtype not in _FLOAT_DTYPES:
        dtype = "f32"
    shapes = [t.shape for t in tiles] + [_index_shape(a) for a in vals if isinstance(a, Expr)]
    out = _new(_broadcast_shape([sh for sh in shapes if sh is not None]), dtype)
    if fn in ("lt", "le", "gt", "ge", "eq", "ne"):
        out.dtype = "i1"
    tracer.state().emit(Elementwise(tracer.point(fn), out, fn, vals))
    return Tile(out)


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
        return _elementwise("minimum", [a, b])
    return _emin(a, b)


def maximum(a: Any, b: Any) -> Any:
    if isinstance(a, Tile) or isinstance(b, Tile):
        return _elementwise("maximum", [a, b])
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
        if defining and getattr(op, "out", None) is old:
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
    out = _new(_shape(shape), _dtype_name(dtype))
    tracer.state().emit(Zeros(tracer.point("zeros"), out))
    return Tile(out)


def full(shape: Sequence[IntLike], value: float, dtype: DType | str = f32) -> Tile:
    out = _new(_shape(shape), _dtype_name(dtype))
    tracer.state().emit(Full(tracer.point("full"), out, float(value)))
    return Tile(out)


# --------------------------------------------------------------------------------- memory


def _check_view(view: Any, op: str) -> View:
    if isinstance(view, RowsTensor) and len(view.tensor.shape) == 1:
        view = view.view()
    if not isinstance(view, TileView):
        raise tracer.fail(
            f"{op} takes a tile view like a.tile(BM, BK)[pm, k], got {type(view).__name__}"
        )
    return view.view


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
    coords = tensor.fixed + tuple(index)
    if len(coords) != len(tensor.param.dims):
        raise tracer.fail(f"load_scalar({tensor.name}, ...) needs {len(tensor.param.dims)} indices")
    sym = Sym(tracer.fresh_name(f"{tensor.name}_at"), "data", None, None)
    tracer.state().emit(
        LoadScalar(tracer.point("load_scalar"), sym, tensor.param, coords, tensor.layout(coords))
    )
    return sym


def load(
    view: TileView, mask: Expr | None = None, other: float = 0.0, boundary: bool = True
) -> Tile:
    """Read a tile. With `boundary` (the default) elements outside the tensor are masked
    (they read `other`); `mask` adds a condition of your own."""
    v = _check_view(view, "load")
    m = land(v.in_bounds if boundary else None, _mask_expr(mask, v))
    out = _new(v.shape, f"like:{v.tensor.name}")
    tracer.state().emit(
        Load(tracer.point("load"), out, v, None if m == as_expr(1) else m, float(other))
    )
    return Tile(out)


def store(view: TileView, value: Tile, mask: Expr | None = None, boundary: bool = True) -> None:
    """Write a tile where the view lies inside the tensor (and `mask` holds)."""
    v = _check_view(view, "store")
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
    out = _new(shape, acc._value.dtype if acc is not None else "f32")
    tracer.state().emit(
        Dot(tracer.point("dot"), out, a._value, b._value, acc._value if acc is not None else None)
    )
    return Tile(out)


def where(cond: Any, a: Any, b: Any) -> Tile:
    return _elementwise("where", [cond, a, b])


def exp(x: Tile) -> Tile:
    return _elementwise("exp", [x])


def exp2(x: Tile) -> Tile:
    return _elementwise("exp2", [x])


def log2(x: Tile) -> Tile:
    return _elementwise("log2", [x])


def log(x: Tile) -> Tile:
    return _elementwise("log", [x])


def sqrt(x: Tile) -> Tile:
    return _elementwise("sqrt", [x])


def abs(x: Tile) -> Tile:  # noqa: A001
    return _elementwise("abs", [x])


def sigmoid(x: Tile) -> Tile:
    return _elementwise("sigmoid", [x])


def _reduce(fn: str, x: Tile, axis: int) -> Tile:
    if not isinstance(x, Tile):
        raise tracer.fail(f"{fn} takes a tile")
    if not 0 <= axis < len(x.shape):
        raise tracer.fail(f"{fn} axis {axis} out of range for a {len(x.shape)}-D tile")
    shape = tuple(s for d, s in enumerate(x.shape) if d != axis)
    out = _new(shape, x._value.dtype)
    tracer.state().emit(Reduce(tracer.point(fn), out, fn, x._value, axis))
    return Tile(out)


def cumsum(x: Tile, axis: int = 0) -> Tile:
    """Inclusive prefix sum along `axis` (same shape)."""
    if not isinstance(x, Tile) or not 0 <= axis < len(x.shape):
        raise tracer.fail(f"cumsum takes a tile and an axis below its rank, got {x!r}, {axis}")
    out = _new(x.shape, x._value.dtype)
    tracer.state().emit(Scan(tracer.point("cumsum"), out, "cumsum", x._value, axis))
    return Tile(out)


def sum(x: Tile, axis: int) -> Tile:  # noqa: A001
    return _reduce("sum", x, axis)


def max(x: Tile, axis: int) -> Tile:  # noqa: A001
    return _reduce("max", x, axis)


def min(x: Tile, axis: int) -> Tile:  # noqa: A001
    return _reduce("min", x, axis)


__all__ = [
    "DType",
    "cumsum",
    "load_scalar",
    "indices",
    "Tensor",
    "Tile",
    "TileView",
    "abs",
    "bf16",
    "cdiv",
    "constexpr",
    "dot",
    "exp",
    "exp2",
    "f16",
    "f32",
    "full",
    "grouped",
    "i1",
    "i32",
    "kernel",
    "load",
    "log",
    "log2",
    "max",
    "maximum",
    "min",
    "minimum",
    "program_ids",
    "range",
    "row_major",
    "sigmoid",
    "sqrt",
    "store",
    "sum",
    "where",
    "zeros",
]

try:  # tags, tag assertions and explicit layouts live beside the core ops
    from argus_plugins.dsl.tile.tags import *  # noqa: F401,F403,E402
    from argus_plugins.dsl.tile.tags import __all__ as _tag_names  # noqa: E402

    __all__ += list(_tag_names)
except ModuleNotFoundError as _exc:  # pragma: no cover - only while tags.py does not exist
    if _exc.name != "argus_plugins.dsl.tile.tags":
        raise
