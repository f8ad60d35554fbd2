"""XOR swizzles of shared-memory offsets, composed layouts, and bank-conflict counting.

`Swizzle(bits, base, shift)` is CuTe's Swizzle<B, M, S>: it XORs the `bits` bits at
position `base + shift` into the bits at position `base`, i.e. `y ^ ((y & mask) >> shift)`.
Rows of a tile (the high bits) so permute the 16-byte chunks (the low bits) that a column
access touches, spreading it over the banks. It is an involution, so its own inverse.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Union

from argus_core.ir.expr import Expr
from argus_core.layout.inttuple import Int, LayoutError
from argus_core.layout.layout import Layout, right_inverse, size


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
        """The swizzled offset; works on ints and on z3 bit-vectors (not on Exprs)."""
        if isinstance(offset, Expr):
            raise TypeError(
                f"Swizzle needs an int or a z3 bit-vector, not the symbolic Expr {offset!r}"
            )
        picked = offset & self.yyy_mask
        if self.shift < 0:
            return offset ^ (picked << -self.shift)
        if type(offset).__module__.startswith("z3"):
            import z3

            return offset ^ z3.LShR(picked, self.shift)  # z3's >> is arithmetic
        return offset ^ (picked >> self.shift)

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
