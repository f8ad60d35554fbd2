"""Coordinates as values: layouts that map an element to the coordinate it names.

A layout whose strides are coordinate vectors (CuTe's `ArithmeticTuple`; `basis(d, n)` is
CuTe's unit `E<d>`) maps a coordinate to a coordinate rather than to a memory offset. The
identity layout of a tensor's shape is the start: slicing it fixes leading coordinates
(`q[b, h]`), dividing it into tiles gives every tile element's tensor coordinate, and
permuting its modes permutes a view, all by the same algebra that divides offset layouts.
The tensor's offset layout applied to those coordinates gives the element offsets. A
`CustomStride` makes a mode index by a function of its coordinate: with a table of row
indices, a gather (CuTe's `CustomStride` gather example).

Components may be ints, symbolic `Expr`s or z3 terms; sums and products keep their operand
order, so printed indices read `pm * BM + i`, as written by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from argus_core.layout.inttuple import Int, IntTuple, LayoutError, flatten, is_tuple
from argus_core.layout.layout import Layout


class ArithTuple:
    """A coordinate that adds componentwise and scales by an integer: `0 + t == t`,
    `t + u == (t0 + u0, ...)`, `k * t == (k * t0, ...)`. A leaf of an int tuple (not a mode),
    so it can stand as a stride."""

    __slots__ = ("values",)

    def __init__(self, values: Iterable[Int]):
        self.values: tuple[Int, ...] = tuple(values)

    def __add__(self, other: Any) -> ArithTuple:
        if isinstance(other, ArithTuple):
            if len(other.values) != len(self.values):
                raise LayoutError(f"cannot add coordinates of ranks {len(self)} and {len(other)}")
            return ArithTuple(a + b for a, b in zip(self.values, other.values))
        if _is_zero(other):
            return self
        return NotImplemented

    def __radd__(self, other: Any) -> ArithTuple:
        return self if _is_zero(other) else NotImplemented

    def __mul__(self, k: Int) -> ArithTuple:
        if isinstance(k, ArithTuple | CustomStride):
            return NotImplemented
        return ArithTuple(v * k for v in self.values)

    def __rmul__(self, k: Int) -> ArithTuple:
        # k first: a tile index times the tile size prints as `pm * BM`
        return ArithTuple(k * v for v in self.values)

    def __iter__(self) -> Iterator[Int]:
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, i: int) -> Int:
        return self.values[i]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ArithTuple) and self.values == other.values

    def __hash__(self) -> int:
        return hash(("ArithTuple", self.values))

    def __repr__(self) -> str:
        return "<" + ",".join(str(v) for v in self.values) + ">"


def _is_zero(x: object) -> bool:
    # the start of every sum in the algebra is the int 0
    return isinstance(x, int) and not isinstance(x, bool) and x == 0


def basis(d: int, rank: int, scale: Int = 1) -> ArithTuple:
    """`scale` along coordinate `d` of a rank-`rank` coordinate, 0 elsewhere (CuTe `E<d>`)."""
    if not 0 <= d < rank:
        raise LayoutError(f"basis direction {d} is not a coordinate of rank {rank}")
    return ArithTuple(scale if i == d else 0 for i in range(rank))


def zero(rank: int) -> ArithTuple:
    """The origin of rank-`rank` coordinates."""
    return ArithTuple((0,) * rank)


def identity_layout(shape: IntTuple) -> Layout:
    """The layout mapping each coordinate of `shape` to itself, as an `ArithTuple` with one
    entry per leaf of `shape` (CuTe's `make_identity_layout`)."""
    leaves = flatten(shape)
    bases = iter(basis(d, len(leaves)) for d in range(len(leaves)))

    def rebuild(t: IntTuple) -> IntTuple:
        return tuple(rebuild(v) for v in t) if is_tuple(t) else next(bases)

    return Layout(shape, rebuild(shape))


@dataclass(frozen=True, eq=False)
class CustomStride:
    """A stride that applies a function to the coordinate first: `crd * CustomStride(f, s)
    == f(crd) * s`. `f` may read data (a tile of row indices), which makes a gather."""

    fn: Callable[[Int], Int]
    stride: Any
    name: str = "f"  # how the layout prints it: `f*<1,0>`

    def __rmul__(self, crd: Int) -> Any:
        return self.fn(crd) * self.stride

    def __repr__(self) -> str:
        return f"{self.name}*{self.stride}"
