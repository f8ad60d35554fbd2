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

`Frame` is the interpretation state the domains share: every IR value's abstract value so
far and the loops around the op being interpreted. The joins the transfer functions need
(`broadcast`, `merge`) are here, beside the values they combine.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from argus_core.ir import Expr, IntLike, Loop, ProgramPoint, Sym, as_expr, elem_sym, land, lnot
from argus_core.ir.expr import Select
from argus_plugins.verifiers.smt.exprs import lor, sub


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
class Factor:
    """One factor's contributions in a product of finished sums (`silu(x @ wg) * (x @
    up)`): each factor must cover its contraction exactly once on its own, so the store
    checks each group separately instead of as one sum."""

    contribs: tuple[Contribution, ...]


@dataclass(frozen=True)
class AVal:
    """A tile's abstract value. `contrib` holds `Contribution`s, `Factor`s, or a loop's
    marker object for "the carried value"."""

    shape: tuple[int, ...]
    tags: dict[str, TagVal] = field(default_factory=dict)
    valid: IntLike = 1
    contrib: tuple = ()
    window: bool = False  # the contraction was proved exact by an assert_contraction
    # what masked elements hold: (condition, value, line) triples, value a known float (a
    # load's `other`, a `where`'s constant, and what elementwise ops make of them) or None
    # (unknown), line the op that made it (a counterexample's first cause); a reduction
    # checks them against its identity (`reduce_masked`), a store that it writes none
    fills: tuple[tuple[IntLike, float | None, int], ...] = ()

    def with_tags(self, tags: dict[str, TagVal]) -> AVal:
        return replace(self, tags=tags)


@dataclass
class Frame:
    """What the interpretation knows so far: each IR value's abstract value (by value id)
    and the loops around the current op, innermost last."""

    values: dict[int, AVal] = field(default_factory=dict)
    loops: list[Loop] = field(default_factory=list)


def factor_groups(tiles: list[AVal]) -> tuple[Factor, ...] | None:
    """The factor groups of a product, or None when at most one operand is a sum."""
    groups = []
    for x in tiles:
        cs = tuple(c for c in x.contrib if isinstance(c, Contribution))
        groups.extend(c for c in x.contrib if isinstance(c, Factor))
        if cs and not x.window:
            groups.append(Factor(cs))
    return tuple(groups) if len(groups) > 1 else None


def broadcast(x: AVal, shape: tuple[int, ...]) -> AVal:
    """`x` read at the elements of a `shape` tile (NumPy broadcasting: size-1 axes)."""
    m = {elem_sym(d): 0 for d, (a, b) in enumerate(zip(x.shape, shape)) if a == 1 and b != 1}
    if not m:
        return x
    return replace(
        x,
        shape=shape,
        tags={n: t.subs(m) for n, t in x.tags.items()},
        valid=sub(x.valid, m),
        fills=tuple((sub(c, m), v, n) for c, v, n in x.fills),
    )


def _either(cond: Expr, a: IntLike, b: IntLike) -> IntLike:
    return a if as_expr(a) == as_expr(b) else Select(cond, as_expr(a), as_expr(b))


def _pred_either(cond: Expr, a: IntLike, b: IntLike) -> IntLike:
    if as_expr(a) == as_expr(b):
        return a
    return lor(land(cond, a), land(lnot(cond), b))


def merge(cond: Expr, a: AVal, b: AVal, contrib: tuple) -> AVal:
    """The value that is `a` where `cond` holds and `b` elsewhere; a tag missing on one
    side is undefined there."""
    tags: dict[str, TagVal] = {}
    for name in list(a.tags) + [n for n in b.tags if n not in a.tags]:
        ta, tb = a.tags.get(name), b.tags.get(name)
        if ta is not None and tb is not None and len(ta.exprs) == len(tb.exprs):
            if ta == tb:
                tags[name] = ta
                continue
            exprs = tuple(_either(cond, x, y) for x, y in zip(ta.exprs, tb.exprs))
            tags[name] = TagVal(
                exprs,
                _pred_either(cond, ta.defined, tb.defined),
                tb.extents or ta.extents,
                tb.axes or ta.axes,
            )
        elif ta is not None:
            tags[name] = replace(ta, defined=land(cond, ta.defined))
        elif tb is not None:
            tags[name] = replace(tb, defined=land(lnot(cond), tb.defined))
    fills = tuple((land(cond, c), v, n) for c, v, n in a.fills) + tuple(
        (land(lnot(cond), c), v, n) for c, v, n in b.fills
    )
    return AVal(b.shape, tags, _pred_either(cond, a.valid, b.valid), contrib, fills=fills)
