"""XOR swizzles of shared-memory offsets and of tile coordinates, composed layouts, and
bank-conflict counting.

`Swizzle(bits, base, shift)` is CuTe's Swizzle<B, M, S>: it XORs the `bits` bits at
position `base + shift` into the bits at position `base`, i.e. `y ^ ((y & mask) >> shift)`.
Rows of a tile (the high bits) so permute the 16-byte chunks (the low bits) that a column
access touches, spreading it over the banks. It is an involution, so its own inverse.

A swizzle applies to a flat offset (`sw(y)`) or to a coordinate (row, col) of a row-major
tile covered by copies of its atom (`sw.on_tile(row, col)`), which needs no row pitch and so
suits tiles of symbolic width. Both take ints, z3 terms and symbolic `Expr`s; on an Expr the
XOR is written with + // % (`xor`), which every backend and z3's linear arithmetic read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Union

from argus_core.layout.inttuple import Int, LayoutError, floordiv, is_bitvec, is_concrete, mod
from argus_core.layout.layout import Layout, right_inverse, size


def xor(a: Int, b: Int, bits: int) -> Int:
    """`a ^ b` for `0 <= b < 2**bits` and `a >= 0`. Ints and z3 bit-vectors use `^`; symbolic
    Exprs and z3 Int terms get the bitwise sum of the low `bits` bits as + // % arithmetic
    (`a - a % 2**bits + sum_k ((a // 2**k + b // 2**k) % 2) * 2**k`)."""
    if (is_concrete(a) and is_concrete(b)) or is_bitvec(a) or is_bitvec(b):
        return a ^ b
    low: Int = 0
    for k in range(bits):
        low = low + mod(floordiv(a, 2**k) + floordiv(b, 2**k), 2) * 2**k
    return a - mod(a, 2**bits) + low


@dataclass(frozen=True)
class Swizzle:
    """`y -> y ^ ((y & yyy_mask) >> shift)`; `shift` may be negative (then it shifts left)."""

    bits: int
    base: int
    shift: int

    def __post_init__(self) -> None:
        if self.bits < 0 or self.base < 0:
            raise LayoutError(f"Swizzle bits {self.bits} and base {self.base} must be >= 0")
        if abs(self.shift) < self.bits:
            raise LayoutError(
                f"Swizzle shift {self.shift} must be at least bits {self.bits} in magnitude, "
                "or the source and target bits overlap and the swizzle is not an involution"
            )

    @property
    def yyy_mask(self) -> int:
        """The source bits (the row bits, for a row-major tile)."""
        return ((1 << self.bits) - 1) << (self.base + max(0, self.shift))

    @property
    def zzz_mask(self) -> int:
        """The target bits (the chunk bits that get permuted)."""
        return ((1 << self.bits) - 1) << (self.base - min(0, self.shift))

    def __call__(self, offset: Int) -> Int:
        """The swizzled offset, for ints, z3 terms (Int or bit-vector) and Exprs."""
        if is_concrete(offset) or is_bitvec(offset):
            picked = offset & self.yyy_mask
            if self.shift < 0:
                return offset ^ (picked << -self.shift)
            if is_bitvec(offset):
                import z3

                return offset ^ z3.LShR(picked, self.shift)  # z3's >> is arithmetic
            return offset ^ (picked >> self.shift)
        source = mod(floordiv(offset, 2 ** (self.base + max(0, self.shift))), 2**self.bits)
        target = self.base - min(0, self.shift)
        return xor(offset, source * 2**target, target + self.bits)

    @property
    def atom(self) -> Layout:
        """The row-major tile the swizzle permutes in one piece: 2**shift rows of
        2**(base + bits) columns, the source bits in the row and the target bits in the column
        (CuTe's swizzle atoms: Swizzle<3,3,3> over 8x64 halves)."""
        self._require_row_source()
        width = 2 ** (self.base + self.bits)
        return Layout((2**self.shift, width), (width, 1))

    def on_tile(self, row: Int, col: Int) -> tuple[Int, Int]:
        """The swizzled coordinate of element (row, col) of a row-major tile covered by copies
        of `atom` (CuTe's `tile_to_shape` of the swizzled atom): the row stays; column bits
        [base, base + bits) are XORed with row bits [shift - bits, shift); the other column
        bits stay. That is `self` applied to the element's offset in its atom, split back into
        a coordinate, so the tile's width (symbolic, often) need not be known."""
        self._require_row_source()
        mask = mod(floordiv(row, 2 ** (self.shift - self.bits)), 2**self.bits) * 2**self.base
        return row, xor(col, mask, self.base + self.bits)

    def _require_row_source(self) -> None:
        if self.shift < 0:
            raise LayoutError(
                f"{self} takes its source bits below its target bits (shift {self.shift} < 0): "
                "it has no row-major atom; use a shift >= bits"
            )

    def inverse(self) -> Swizzle:
        return self

    def __repr__(self) -> str:
        return f"Sw<{self.bits},{self.base},{self.shift}>"


Fn = Union[Layout, Swizzle, "ComposedLayout", Callable[[Any], Any]]


@dataclass(frozen=True)
class ComposedLayout:
    """`x -> outer(offset + inner(x))`: CuTe's ComposedLayout; usually a swizzle over a layout."""

    outer: Fn
    offset: int
    inner: Fn

    def __call__(self, *crd: Any) -> Int:
        return self.outer(self.offset + self.inner(*crd))

    def inverse(self) -> ComposedLayout:
        """`y -> inner⁻¹(outer⁻¹(y) - offset)`; `inner` must be a bijective layout onto [0, size)."""
        inv_inner = _inverse(self.inner)
        return ComposedLayout(inv_inner, -self.offset, _inverse(self.outer))

    def __repr__(self) -> str:
        return f"{self.outer} o {self.offset} o {self.inner}"


def _inverse(f: Fn) -> Fn:
    if isinstance(f, Layout):
        r = right_inverse(f)
        if size(r) != size(f):
            raise LayoutError(
                f"{f} is not a bijection onto [0, {size(f)}); its right inverse is {r}"
            )
        return r
    if isinstance(f, Swizzle | ComposedLayout):
        return f.inverse()
    raise LayoutError(f"cannot invert {f!r}; invertible: Layout, Swizzle, ComposedLayout")


def bank_conflicts(
    layout_or_fn: Fn,
    elem_bytes: int,
    threads_per_phase: int,
    bank_count: int = 32,
    bank_bytes: int = 4,
    warp_size: int | None = None,
    vector: int = 1,
) -> int:
    """The worst n-way bank conflict of one warp's shared-memory access.

    `layout_or_fn(t)` is the element offset thread t reads; it reads `vector` consecutive
    elements of `elem_bytes` bytes each.
    Threads are served `threads_per_phase` at a time (32 for 4-byte accesses; fewer for
    wider ones); within a phase, threads reading the same bank word share it (a broadcast),
    and n distinct words in one bank take n passes. Returns the max over phases and banks
    (1 means conflict-free)."""
    warp_size = warp_size or threads_per_phase
    worst = 1
    for start in range(0, warp_size, threads_per_phase):
        words_per_bank: dict[int, set[int]] = {}
        for t in range(start, min(start + threads_per_phase, warp_size)):
            first = int(layout_or_fn(t)) * elem_bytes
            last = first + vector * elem_bytes - 1
            for word in range(first // bank_bytes, last // bank_bytes + 1):
                words_per_bank.setdefault(word % bank_count, set()).add(word)
        worst = max(worst, *(len(w) for w in words_per_bank.values()))
    return worst
