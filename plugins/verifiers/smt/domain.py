"""The abstract domain: what the verifier knows about each tile value.

A tile value is abstracted, per element, as a map from (program, element index, loop
iterations) to named tag tuples, each with a guard (`defined`: where the tag is known; a
tile made by `zeros`/`full` has none, a wildcard that matches anything). `valid` is the
element's mask (masked elements are not real data). An accumulator also records its
contraction: for every `dot` that fed it, the contracted coordinate as a function of the
iteration variables and the contracted element index, so a store can check that the sum
covers the contraction exactly once.

All expressions are IR `Expr`s over the element symbols `_i0`, `_i1`, ... of the value,
program and loop symbols, and shapes; tile constants are already concrete.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from argus_core.ir import Expr, IntLike, ProgramPoint, Sym


@dataclass(frozen=True)
class TagVal:
    """One named tag: `exprs` per element where `defined` holds. `extents` bounds each
    entry when the tag is a tensor coordinate (the tensor's dims), else None. `axes` names,
    per entry, the tile axis it walks (None: constant across the tile, like the fixed
    leading coordinates `b, h` of `q[b, h]`); None when unknown (a user tag)."""

    exprs: tuple[IntLike, ...]
    defined: IntLike = 1
    extents: tuple[IntLike, ...] | None = None
    axes: tuple[int | None, ...] | None = None

    def subs(self, mapping: dict[Sym, IntLike]) -> TagVal:
        return replace(
            self,
            exprs=tuple(sub(e, mapping) for e in self.exprs),
            defined=sub(self.defined, mapping),
        )

    def axes_for(self, rank: int) -> tuple[int | None, ...] | None:
        """`axes`, or the identity when a tag has one entry per tile axis."""
        if self.axes is not None:
            return self.axes
        return tuple(range(rank)) if len(self.exprs) == rank else None


@dataclass(frozen=True)
class Contribution:
    """A `dot` that was summed into an accumulator: element (i, j) received the product at
    contracted coordinate `cc` (over `_i0`, `_i1`, `kk`, and the loop variables in scope)
    where `valid` holds. `loops` lists (var, start, stop, step) of the loops around the
    dot whose variable still ranges; `ext` is the contracted extent (K)."""

    cc: IntLike
    valid: IntLike
    kk: Sym
    kk_extent: int
    loops: tuple[tuple[Sym, IntLike, IntLike, IntLike], ...]
    ext: IntLike
    point: ProgramPoint


@dataclass(frozen=True)
class AVal:
    shape: tuple[int, ...]
    tags: dict[str, TagVal] = field(default_factory=dict)
    valid: IntLike = 1
    contrib: tuple = ()  # Contribution, or a loop's marker object for "the carried value"
    window: bool = False  # the contraction was proved exact by an assert_contraction

    def with_tags(self, tags: dict[str, TagVal]) -> AVal:
        return replace(self, tags=tags)


def sub(e: IntLike, mapping: dict[Sym, IntLike]) -> IntLike:
    """`e` with symbols replaced simultaneously (ints pass through)."""
    return e.subs(mapping) if isinstance(e, Expr) else e
