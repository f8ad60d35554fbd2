"""CuTe layouts: a hierarchical shape with a congruent stride, read as a function from a
coordinate (or a flat index) to an offset. The algebra (coalesce, composition, complement,
divide, product) is a set of small recursive free functions that dispatch the same way:
on a Layout, an int, a tuple (by-mode), or None (identity).

Evaluation (`Layout.__call__`) and slicing work on concrete ints, symbolic `Expr`s and z3
terms, and on coordinate strides (`coord.ArithTuple`); the rest of the algebra needs to
decide divisibility, so it takes concrete layouts, or symbolic ones only where the answer is
structural (a stride of 1, a mode equal to itself).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from argus_core.layout.inttuple import (
    Int,
    IntTuple,
    LayoutError,
    ceildiv,
    coalesce_ok,
    congruent,
    crd2idx,
    divides,
    flatten,
    floordiv,
    is_concrete,
    is_tuple,
    prefix_product,
    product,
    same,
)


class Layout:
    """`shape:stride`. The stride defaults to the column-major prefix products of the shape."""

    __slots__ = ("shape", "stride")

    def __init__(self, shape: IntTuple, stride: IntTuple | None = None):
        if stride is None:
            stride = prefix_product(shape)
        if not congruent(shape, stride):
            raise LayoutError(f"shape {shape!r} and stride {stride!r} are not congruent")
        self.shape: IntTuple = shape
        self.stride: IntTuple = stride

    def __call__(self, *crd: IntTuple) -> Int:
        """The offset of a coordinate (hierarchical, one per mode) or of a flat index."""
        return crd2idx(crd[0] if len(crd) == 1 else crd, self.shape, self.stride)

    def __len__(self) -> int:
        return rank(self)

    def __getitem__(self, i: int | slice) -> Layout:
        """Mode `i` (or a slice of modes) as a layout."""
        if is_tuple(self.shape):
            return Layout(self.shape[i], self.stride[i])
        if i == 0:
            return self
        raise IndexError(f"mode {i!r} of rank-1 layout {self}; valid: 0")

    def __iter__(self) -> Iterator[Layout]:
        return (self[i] for i in range(rank(self)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Layout) and (self.shape, self.stride) == (
            other.shape,
            other.stride,
        )

    def __hash__(self) -> int:
        return hash((self.shape, self.stride))

    def __repr__(self) -> str:
        return f"{_fmt(self.shape)}:{_fmt(self.stride)}"


Tiler = Layout | IntTuple | None


def _fmt(t: IntTuple) -> str:
    if is_tuple(t):
        return "(" + ",".join(_fmt(v) for v in t) + ")"
    return str(t)


# ------------------------------------------------------------------ attributes


def size(layout: Layout) -> Int:
    """Number of coordinates in the domain."""
    return product(layout.shape)


def cosize(layout: Layout) -> Int:
    """One past the largest offset (for non-negative strides)."""
    total: Int = 1
    for s, d in zip(flatten(layout.shape), flatten(layout.stride)):
        total = total + (s - 1) * d
    return total


def rank(layout: Layout) -> int:
    return len(layout.shape) if is_tuple(layout.shape) else 1


def depth(layout: Layout) -> int:
    def go(t: IntTuple) -> int:
        return 1 + max((go(v) for v in t), default=0) if is_tuple(t) else 0

    return go(layout.shape)


def make_layout(*layouts: Layout | Iterable[Layout]) -> Layout:
    """The layout whose modes are `layouts` (also accepts one iterable of layouts)."""
    if len(layouts) == 1 and not isinstance(layouts[0], Layout):
        layouts = tuple(layouts[0])
    return Layout(tuple(m.shape for m in layouts), tuple(m.stride for m in layouts))


def _from_modes(modes: list[tuple[Int, Int]]) -> Layout:
    # flat list of (shape, stride) -> the smallest layout: an int mode when there is one
    if not modes:
        return Layout(1, 0)
    if len(modes) == 1:
        return Layout(*modes[0])
    return Layout(tuple(s for s, _ in modes), tuple(d for _, d in modes))


# ------------------------------------------------------------------ slicing


def slice_and_offset(crd: IntTuple | None, layout: Layout) -> tuple[Layout, Int]:
    """Fix the modes of `layout` that `crd` gives and keep those it leaves None (CuTe's `_`):
    returns the layout of the kept modes and the offset of the fixed ones, so that
    `layout(full) == offset + kept(rest)` when `full` is `crd` with `rest` in its None places.
    A mode with a None inside is sliced recursively; a fully fixed `layout` keeps `()`:`()`."""
    if crd is None:
        return layout, 0
    if not is_tuple(crd):
        return Layout((), ()), layout(crd)
    if len(crd) != rank(layout):
        raise LayoutError(f"slice {crd!r} has {len(crd)} modes; layout {layout} has {rank(layout)}")
    kept: list[Layout] = []
    offset: Int = 0
    for c, mode in zip(crd, layout):
        if _has_none(c):
            sub, off = slice_and_offset(c, mode)
            kept.append(sub)
        else:
            off = mode(c)
        offset = offset + off
    return make_layout(*kept), offset


def _has_none(crd: IntTuple | None) -> bool:
    if crd is None:
        return True
    return is_tuple(crd) and any(_has_none(c) for c in crd)


# ------------------------------------------------------------------ coalesce


def coalesce(layout: Layout, profile: IntTuple | None = None) -> Layout:
    """The same function with the fewest modes: size-1 modes dropped, and a mode merged into
    the previous one when it continues it (stride == previous shape * previous stride).
    With a tuple `profile`, each of the first len(profile) modes is coalesced separately."""
    if is_tuple(profile):
        head = [coalesce(layout[i], profile[i]) for i in range(len(profile))]
        return make_layout(*head, *(layout[i] for i in range(len(profile), rank(layout))))
    modes: list[tuple[Int, Int]] = []
    for s, d in zip(flatten(layout.shape), flatten(layout.stride)):
        if same(s, 1):
            continue
        if modes and coalesce_ok(modes[-1], d):
            modes[-1] = (modes[-1][0] * s, modes[-1][1])
        else:
            modes.append((s, d))
    return _from_modes(modes)


# ------------------------------------------------------------------ composition


def composition(a: Layout, b: Tiler) -> Layout:
    """`a ∘ b`: promises `composition(a, b)(i) == a(b(i))` for every i < size(b), where `a`
    is extended past its size through its last mode. A tuple `b` composes by mode."""
    if b is None:
        return a
    if is_tuple(b):
        if len(b) > rank(a):
            raise LayoutError(f"tiler {b!r} has more modes than layout {a} (rank {rank(a)})")
        head = [composition(a[i], b[i]) for i in range(len(b))]
        return make_layout(*head, *(a[i] for i in range(len(b), rank(a))))
    if not isinstance(b, Layout):
        b = Layout(b)
    if is_tuple(b.shape):
        return make_layout(*(composition(a, mode) for mode in b))
    return _compose_mode(a, b.shape, b.stride)


def _compose_mode(a: Layout, n: Int, d: Int) -> Layout:
    # a ∘ (n:d): first skip through a's modes by d (the stride divides out modes from the
    # left), then keep n elements (the shape takes modes from the left); a's last mode is
    # unbounded, so whatever of n and d is left lands there
    if same(d, 0):
        return Layout(n, 0)
    flat = coalesce(a)
    shapes, strides = flatten(flat.shape), flatten(flat.stride)
    out: list[tuple[Int, Int]] = []
    for i, (s, t) in enumerate(zip(shapes, strides)):
        if same(n, 1):
            break
        if i == len(shapes) - 1:
            out.append((n, d * t))
            break
        if divides(d, s):
            avail, next_d = floordiv(s, d), 1
        elif divides(s, d):
            avail, next_d = 1, floordiv(d, s)
        else:
            raise LayoutError(f"composition: stride {d!r} and mode size {s!r} of {a} do not divide")
        if not same(avail, 1):
            if divides(avail, n):
                take, n = avail, floordiv(n, avail)
            elif divides(n, avail):
                take, n = n, 1
            else:
                raise LayoutError(f"composition: size {n!r} and mode size {avail!r} do not divide")
            out.append((take, d * t))
        d = next_d
    return _from_modes(out)


# ------------------------------------------------------------------ complement, inverses


def _concrete_modes(layout: Layout, what: str) -> list[tuple[int, int]]:
    if not is_concrete(layout.shape) or not is_concrete(layout.stride):
        raise LayoutError(f"{what} needs a concrete layout, got {layout}")
    return list(zip(flatten(layout.shape), flatten(layout.stride)))


def complement(layout: Layout, cotarget: Int = 1) -> Layout:
    """The layout of the offsets `layout` skips, up to `cotarget`: promises that
    `make_layout(layout, complement(layout, c))` is injective with ordered, non-overlapping
    images, and that its image covers [0, c) when `layout` is compact below c."""
    modes = sorted((d, s) for s, d in _concrete_modes(layout, "complement") if s != 1 and d != 0)
    out: list[tuple[Int, Int]] = []
    current = 1
    for d, s in modes:
        if d % current:
            raise LayoutError(
                f"complement: {layout} overlaps itself (stride {d} is not a multiple of {current})"
            )
        out.append((d // current, current))
        current = s * d
    out.append((ceildiv(cotarget, current), current))
    return coalesce(_from_modes(out))


def right_inverse(layout: Layout) -> Layout:
    """The largest `r` with `layout(r(i)) == i` for all i < size(r): it follows the strides
    1, s0, s0*s1, ... through the modes that continue the contiguous image from 0."""
    flat = coalesce(layout)
    shapes = flatten(flat.shape)
    weights = flatten(prefix_product(shapes))
    by_stride = {d: (s, w) for (s, d), w in zip(_concrete_modes(flat, "right_inverse"), weights)}
    out: list[tuple[Int, Int]] = []
    current = 1
    while current in by_stride and by_stride[current][0] != 1:
        s, w = by_stride[current]
        out.append((s, w))
        current *= s
    return coalesce(_from_modes(out))


def left_inverse(layout: Layout) -> Layout:
    """For an injective `layout`, `l` with `l(layout(i)) == i` for all i < size(layout)."""
    return right_inverse(make_layout(layout, complement(layout)))


# ------------------------------------------------------------------ divide and product


def logical_divide(a: Layout, tiler: Tiler) -> Layout:
    """`a` split into (tile, rest): `a ∘ (tiler, complement(tiler, size(a)))`. A tuple
    tiler divides mode by mode."""
    if tiler is None:
        return a
    if is_tuple(tiler):
        if len(tiler) > rank(a):
            raise LayoutError(f"tiler {tiler!r} has more modes than layout {a} (rank {rank(a)})")
        head = [logical_divide(a[i], tiler[i]) for i in range(len(tiler))]
        return make_layout(*head, *(a[i] for i in range(len(tiler), rank(a))))
    if not isinstance(tiler, Layout):
        tiler = Layout(tiler)
    return composition(a, make_layout(tiler, complement(tiler, size(a))))


def zipped_divide(a: Layout, tiler: Tiler) -> Layout:
    """`logical_divide` with the tile modes gathered in mode 0 and the rest modes in mode 1."""
    divided = logical_divide(a, tiler)
    if not is_tuple(tiler):
        return divided
    k = len(tiler)
    tiles = make_layout(*(divided[i][0] for i in range(k)))
    rests = make_layout(
        *(divided[i][1] for i in range(k)), *(divided[i] for i in range(k, rank(a)))
    )
    return make_layout(tiles, rests)


def tiled_divide(a: Layout, tiler: Tiler) -> Layout:
    """`zipped_divide` with the rest modes unpacked: (tile, rest0, rest1, ...)."""
    z = zipped_divide(a, tiler)
    return make_layout(z[0], *z[1])


def logical_product(a: Layout, b: Layout) -> Layout:
    """(a, b repeated over the offsets a does not reach): `(a, complement(a, size(a)*cosize(b)) ∘ b)`."""
    return make_layout(a, composition(complement(a, size(a) * cosize(b)), b))


def _zip_product(a: Layout, b: Layout, a_first: bool) -> Layout:
    if rank(a) != rank(b):
        raise LayoutError(
            f"product of layouts of different ranks: {a} (rank {rank(a)}) and {b} (rank {rank(b)})"
        )
    reps = composition(complement(a, size(a) * cosize(b)), b)
    if rank(a) == 1:
        return make_layout(a, reps) if a_first else make_layout(reps, a)
    return make_layout(
        *(
            make_layout(a[i], reps[i]) if a_first else make_layout(reps[i], a[i])
            for i in range(rank(a))
        )
    )


def blocked_product(a: Layout, b: Layout) -> Layout:
    """Mode i is (a_i, b_i): copies of the block `a` laid out by `b`."""
    return _zip_product(a, b, a_first=True)


def raked_product(a: Layout, b: Layout) -> Layout:
    """Mode i is (b_i, a_i): the elements of `a` interleaved ("raked") across the copies."""
    return _zip_product(a, b, a_first=False)
