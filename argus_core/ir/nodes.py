"""The kernel IR: tile values, ops with program points, loops with symbolic induction variables.

A traced kernel is a list of ops. Scalars (program ids, loop variables, shapes, strides,
tile constants) are symbolic `Expr`s; tiles are `Value`s produced by ops. Every op records
the program point of the DSL statement that made it. Loops are not unrolled: a `Loop` holds
its body once, its induction variable is a `Sym`, and its loop-carried values are explicit.

Element positions inside a tile are the symbols `_i0`, `_i1`, ... (axis d of the tile), so
a load's addresses, mask and built-in coordinate tags are expressions over them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from argus_core.ir.expr import Expr, IntLike, Sym

_ids = itertools.count()


def elem_sym(axis: int, extent: IntLike | None = None) -> Sym:
    """The symbol for the element index along `axis` of a tile."""
    return Sym(f"_i{axis}", "elem", 0, extent)


def elem_axis(e: object) -> int | None:
    """The axis of an element-index symbol made by `elem_sym`; None for anything else."""
    if isinstance(e, Sym) and e.kind == "elem" and e.name.startswith("_i"):
        return int(e.name[2:])
    return None


@dataclass(frozen=True, eq=False, repr=False)
class TileElem(Sym):
    """Data as an index: element `_i{axis}` of the 1-D tile `value` (a gathered row index, a
    loaded mask). To the verifier it is an uninterpreted function of the element; the
    lowering prints the tile, broadcast along `axis` of the view it indexes."""

    value: Any = None
    axis: int = 0


@dataclass(frozen=True)
class ProgramPoint:
    file: str
    line: int
    op: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} ({self.op})"

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "op": self.op}


@dataclass(eq=False)
class Value:
    """A tile: `shape` (ints or constexpr symbols) and element `dtype`.

    dtype is "f32", "f16", "bf16", "i32", "i1", or "like:<tensor>" for the element type of a
    kernel tensor argument (bound at compile time).
    """

    shape: tuple[IntLike, ...]
    dtype: str
    name: str = ""
    id: int = field(default_factory=lambda: next(_ids))

    def __repr__(self) -> str:
        return f"%{self.name or self.id}"


@dataclass(frozen=True)
class TensorParam:
    """A global tensor argument: its dims and strides are symbols, its layout divides into tiles."""

    name: str
    dims: tuple[Sym, ...]
    strides: tuple[Sym, ...]


@dataclass(frozen=True)
class View:
    """A tile view of a global tensor: the global coordinate of each tile element.

    `coords[d]` is an expression over the element symbols giving coordinate d in the
    tensor; `offset` is the element offset from the tensor's base (the layout applied to
    the coordinates); `in_bounds` is the predicate that the coordinates lie inside the
    tensor's extents. `shape` is the tile shape.
    """

    tensor: TensorParam
    shape: tuple[IntLike, ...]
    coords: tuple[IntLike, ...]
    offset: IntLike
    in_bounds: Expr
    desc: str = ""  # how the DSL made it, for comments in lowered code: "a.tile(BM, BK)[pm, k]"


@dataclass(eq=False)
class Op:
    """Base op. Subclasses list their operands as fields; `result` is the produced tile."""

    point: ProgramPoint

    kind = "op"

    def operands(self) -> list[Value]:
        return []

    def replace_operand(self, old: Value, new: Value) -> None:
        for name, val in list(vars(self).items()):
            if val is old:
                setattr(self, name, new)

    @property
    def result(self) -> Value | None:
        return getattr(self, "out", None)


@dataclass(eq=False)
class Let(Op):
    """Binds a scalar symbol to an expression (program ids and their ordering)."""

    sym: Sym
    expr: IntLike
    kind = "let"


@dataclass(eq=False)
class LoadScalar(Op):
    """Binds the data symbol `sym` (kind "data") to one element of a global tensor."""

    sym: Sym
    tensor: TensorParam
    coords: tuple[IntLike, ...]
    offset: IntLike
    kind = "load_scalar"


@dataclass(eq=False)
class Zeros(Op):
    out: Value
    kind = "zeros"


@dataclass(eq=False)
class Full(Op):
    out: Value
    value: float
    kind = "full"


@dataclass(eq=False)
class Load(Op):
    """Loads `view`; elements where `mask` is false read `other`. The result's built-in tag
    is the view's coordinates. `along`: the tile dim whose neighbouring elements go to
    neighbouring lanes (a layout hint for the lowering, no meaning to the verifier); None
    leaves it to the compiler (the last dim where nothing is known)."""

    out: Value
    view: View
    mask: Expr | None
    other: float
    along: int | None = None
    kind = "load"


@dataclass(eq=False)
class Store(Op):
    """Stores `value` into `view` where `mask` holds."""

    view: View
    value: Value
    mask: Expr | None
    kind = "store"

    def operands(self):
        return [self.value]


# --- split-K support (added with the verifier, plugins/verifiers/smt) -------------------
@dataclass(eq=False)
class AtomicAdd(Store):
    """Adds `value` into `view` where `mask` holds (partial sums of split-K programs)."""

    kind = "atomic_add"


@dataclass(eq=False)
class Dot(Op):
    out: Value
    a: Value
    b: Value
    acc: Value | None
    kind = "dot"

    def operands(self):
        return [v for v in (self.a, self.b, self.acc) if v is not None]


@dataclass(eq=False)
class Cast(Op):
    out: Value
    x: Value
    kind = "cast"

    def operands(self):
        return [self.x]


@dataclass(eq=False)
class Elementwise(Op):
    """`fn` applied elementwise; args are tiles, Python numbers, or scalar Exprs."""

    out: Value
    fn: str
    args: list[Any]
    kind = "elementwise"

    def operands(self):
        return [a for a in self.args if isinstance(a, Value)]

    def replace_operand(self, old: Value, new: Value) -> None:
        self.args = [new if a is old else a for a in self.args]


@dataclass(eq=False)
class ExpandDims(Op):
    """`x[:, None]`: the same elements with a size-1 axis inserted at `axis`."""

    out: Value
    x: Value
    axis: int
    kind = "expand_dims"

    def operands(self):
        return [self.x]


@dataclass(eq=False)
class Scan(Op):
    """Inclusive prefix `fn` (cumsum) along `axis`; same shape as `x`."""

    out: Value
    fn: str
    x: Value
    axis: int
    kind = "scan"

    def operands(self):
        return [self.x]


@dataclass(eq=False)
class Reduce(Op):
    out: Value
    fn: str  # sum, max, min
    x: Value
    axis: int
    kind = "reduce"

    def operands(self):
        return [self.x]


@dataclass
class Carry:
    """A loop-carried tile: `init` enters, `arg` is its value at the top of an iteration,
    `yielded` at the bottom, `result` after the loop."""

    init: Value
    arg: Value
    yielded: Value
    result: Value


@dataclass(eq=False)
class Loop(Op):
    var: Sym
    start: IntLike
    stop: IntLike
    step: IntLike
    body: list[Op]
    carried: list[Carry]
    kind = "loop"

    def operands(self):
        return [c.init for c in self.carried]


@dataclass
class KernelIR:
    """A traced kernel: parameters, ops, launch grid."""

    name: str
    file: str
    tensors: list[TensorParam]
    shape_syms: list[Sym]  # in order of first appearance; bound from tensors' sizes
    shape_bindings: dict[str, tuple[str, int]]  # shape symbol -> (tensor, dim) that binds it
    constexprs: list[Sym]
    ops: list[Op]
    grid: tuple[IntLike, ...]
    written: list[str]  # tensors stored to
    source: str = ""
    scalars: list[tuple[Sym, str]] = field(default_factory=list)  # (symbol, "i32" | "fp32")

    def walk(self) -> Iterator[Op]:
        """Every op, loop bodies included, in program order."""

        def go(ops: list[Op]) -> Iterator[Op]:
            for op in ops:
                yield op
                if isinstance(op, Loop):
                    yield from go(op.body)

        return go(self.ops)
