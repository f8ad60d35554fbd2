"""Tiles: the DSL's values in registers, their element types, and elementwise arithmetic.

A `Tile` wraps an IR `Value`; its operators record `Elementwise` ops (broadcasting tile
shapes the NumPy way, and index expressions over element symbols as tiles of their own
shape). The lowest layer of the DSL besides the tracer: views, tags and `lang` build on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from argus_core.ir import Cast, Elementwise, ExpandDims, Expr, IntLike, Value, elem_axis
from argus_plugins.dsl.tile import tracer

# ------------------------------------------------------------------------------- types


@dataclass(frozen=True)
class DType:
    name: str  # f32 f16 bf16 i32 i1, or like:<tensor>

    def __repr__(self) -> str:
        return self.name


f32, f16, bf16, i32, i1 = DType("f32"), DType("f16"), DType("bf16"), DType("i32"), DType("i1")
DTYPES = {"f32": f32, "f16": f16, "bf16": bf16, "i32": i32, "i1": i1}


# ---------------------------------------------------------------------------------- tiles


def dtype_name(dt: DType | str) -> str:
    """The IR name of a dtype given as a DType or a name (`"f32"`, `"like:<tensor>"`)."""
    if isinstance(dt, DType):
        return dt.name
    if isinstance(dt, str) and (dt in DTYPES or dt.startswith("like:")):
        return dt
    raise tracer.fail(f"invalid dtype {dt!r}; valid choices: {', '.join(DTYPES)} or tensor.dtype")


def new_value(shape: tuple[IntLike, ...], dtype: str) -> Value:
    """A fresh IR tile value (an op records it as its result)."""
    return Value(tuple(shape), dtype)


class Tile(tracer.TileHandle):
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
        out = new_value(self.shape, dtype_name(dtype))
        tracer.state().emit(Cast(tracer.point("cast"), out, self._value))
        return Tile(out)

    def _bin(self, fn: str, other: Any, swap: bool = False) -> Tile:
        args = [other, self] if swap else [self, other]
        return elementwise(fn, args)

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
        return elementwise("neg", [self])

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
        out = new_value(shape, self._value.dtype)
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
    axes = {
        elem_axis(s): s.hi for s in e.symbols() if elem_axis(s) is not None and s.hi is not None
    }
    if not axes:
        return None
    return tuple(axes.get(d, 1) for d in range(max(axes) + 1))


def elementwise(fn: str, args: list[Any]) -> Tile:
    """Record `fn` over tiles, numbers and index expressions: the result has their
    broadcast shape, the widest float type among the tiles (i1 for comparisons)."""
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
    out = new_value(_broadcast_shape([sh for sh in shapes if sh is not None]), dtype)
    if fn in ("lt", "le", "gt", "ge", "eq", "ne"):
        out.dtype = "i1"
    tracer.state().emit(Elementwise(tracer.point(fn), out, fn, vals))
    return Tile(out)
