"""Tag ops: ghost annotations on tiles, for the verifier only.

A tag gives every element of a tile a tuple of symbolic integers (an expression over the
element symbols `_i0`, `_i1`, ... and over program values: program ids, loop variables,
shapes). Assertions relate tags at use sites. All three ops have `erased = True`: the
lowering skips them, so a kernel's lowered source is the same with and without them.
"""

from __future__ import annotations

from dataclasses import dataclass

from argus_core.ir.expr import Expr, IntLike
from argus_core.ir.nodes import Op, Value


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


__all__ = ["AssertContraction", "AssertTag", "AssertTagEq", "Requires", "Tag"]
