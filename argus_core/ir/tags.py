"""Tag ops: ghost annotations on tiles, for the verifier only.

A tag gives every element of a tile a tuple of symbolic integers (an expression over the
element symbols `_i0`, `_i1`, ... and over program values: program ids, loop variables,
shapes). Assertions relate tags at use sites. All three ops have `erased = True`: the
lowering skips them, so a kernel's lowered source is the same with and without them.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from argus_core.ir.expr import Expr, IntLike, Sym, as_expr, to_source
from argus_core.ir.nodes import Op, Value

# The built-in tag of a loaded tile: its global coordinates. Every DSL gives loaded tiles
# this tag and every verifier reads it, so the name lives with the IR.
COORD = "coord"


@dataclass(eq=False)
class Tag(Op):
    """From here on, element e of `value` carries tag `name` = `exprs` (evaluated at e)."""

    value: Value
    exprs: tuple[IntLike, ...]
    name: str
    kind = "tag"
    erased = True

    def operands(self):
        return [self.value]


@dataclass(eq=False)
class AssertTagEq(Op):
    """Wherever both elements are real (unmasked), tag `name_a` of `a` equals tag
    `name_b` of `b`, element by element (the tiles have the same shape)."""

    a: Value
    b: Value
    name_a: str
    name_b: str
    kind = "assert_tag_eq"
    erased = True

    def operands(self):
        return [self.a, self.b]


@dataclass(eq=False)
class AssertTag(Op):
    """`pred` (an expression over the element symbols and tag `name`'s entries, which
    are the symbols in `tag_syms`) holds at every real element of `value`."""

    value: Value
    name: str
    tag_syms: tuple[Expr, ...]
    pred: Expr
    kind = "assert_tag"
    erased = True

    def operands(self):
        return [self.value]


@dataclass(eq=False)
class AssertContraction(Op):
    """The contracted coordinates summed into element e of `value` (by every `dot` that fed
    it, across loop iterations) are exactly the c with `window` (an expression over tag
    `name`'s entries, the symbols `tag_syms`, and the contracted coordinate `c_sym`), each
    exactly once. `window` must describe a prefix [0, hi) of the contraction."""

    value: Value
    name: str
    tag_syms: tuple[Expr, ...]
    c_sym: Expr
    window: Expr
    kind = "assert_contraction"
    erased = True

    def operands(self):
        return [self.value]


@dataclass(eq=False)
class Requires(Op):
    """A precondition of the kernel over shapes and scalar arguments (`HQ % HKV == 0`,
    `D <= HEAD_D`): the verifier assumes it in every query; the caller must establish it."""

    pred: Expr
    kind = "requires"
    erased = True


# --- data-dependent values: ghost reads, contracts, sums over slots, gathered rows -------
@dataclass(frozen=True, eq=False, repr=False)
class DataRead(Sym):
    """`tensor[args]` as an uninterpreted function of its index (a ghost read: nothing is
    loaded). The verifier gives it no value but what a `Contract` says. `tensor` may name a
    tensor of another kernel (`"ids"`), so contracts can relate the data of two kernels.
    Its name spells the call, so equal reads are one symbol; `map` rewrites the index."""

    tensor: str = ""
    args: tuple[Expr, ...] = ()

    def children(self) -> tuple[Expr, ...]:
        return self.args

    def map(self, f):
        return f(read(self.tensor, *[a.map(f) for a in self.args]))

    def __hash__(self) -> int:
        return hash(("Sym", self.name))

    def __eq__(self, other: object) -> bool:  # type: ignore[override]
        return isinstance(other, Sym) and other.name == self.name


def read(tensor: str, *index: IntLike) -> DataRead:
    """The ghost read `tensor[index]` (see `DataRead`)."""
    args = tuple(as_expr(i) for i in index)
    name = f"@{tensor}[{', '.join(to_source(a) for a in args)}]"
    node = READS.get(name)
    if node is None:
        node = READS[name] = DataRead(name, "data", None, None, tensor=tensor, args=args)
    return node


# every live read by name: the verifier's z3 environment looks symbols up by name only
READS: weakref.WeakValueDictionary[str, DataRead] = weakref.WeakValueDictionary()


@dataclass(eq=False)
class Contract(Op):
    """A precondition on data: for all `vars` (bound, var d in [0, extents[d])), `pred`.
    The verifier assumes it, instantiated at the reads of the data in each query."""

    vars: tuple[Sym, ...]
    extents: tuple[IntLike, ...]
    pred: Expr
    name: str
    kind = "contract"
    erased = True


@dataclass(eq=False)
class Summand(Op):
    """`value` is one term of a sum over its coordinate entry `entry` (a token's K slots):
    that entry becomes a contracted coordinate, like a dot's k, so the store of the sum
    proves it covers [0, extent) once."""

    value: Value
    entry: int
    kind = "summand"
    erased = True

    def operands(self):
        return [self.value]


@dataclass(eq=False)
class RowsFor(Op):
    """Row r of `value` is the result for row `index[r]` (a scatter's index tile), computed
    from source row `source` (an expression over `index[r]`, e.g. slot // topk): asserts its
    row coordinate is `source`, then relabels that row coordinate `index[r]`."""

    value: Value
    index: Value
    source: Expr
    target: Expr
    kind = "rows_for"
    erased = True

    def operands(self):
        return [self.value, self.index]


__all__ = [
    "COORD",
    "AssertContraction",
    "AssertTag",
    "AssertTagEq",
    "Contract",
    "DataRead",
    "Requires",
    "RowsFor",
    "Summand",
    "Tag",
    "read",
]
