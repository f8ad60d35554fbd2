"""Linear layouts over F2, as Triton uses for distributed and shared layouts.

A linear layout maps named inputs (`register`, `lane`, `warp`, `block`) to named outputs
(`dim0`, `dim1`, ...): each input bit that is set contributes its basis vector, and the
contributions are combined with XOR. All sizes are powers of two. The constructors build
the layouts Triton gives its blocked, AMD MFMA and NVIDIA MMA encodings, fitted to a tensor
shape the way Triton fits them (bases past the shape are zeroed, which means broadcast;
missing extent is made up with more registers, the fastest-varying dimension first).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from argus_core.errors import choices_error
from argus_core.layout.inttuple import LayoutError

IN_DIMS = ("register", "lane", "warp", "block")
Basis = tuple[int, ...]


def _log2(n: int, what: str) -> int:
    if not isinstance(n, int) or n < 1 or n & (n - 1):
        raise LayoutError(f"{what} must be a power of two, got {n!r}")
    return n.bit_length() - 1


class LinearLayout:
    """`bases[in_dim][k]` is the output (one value per out dim) of input bit k of `in_dim`."""

    def __init__(self, bases: Mapping[str, Sequence[Sequence[int]]], out_dims: Mapping[str, int]):
        self.out_dims: dict[str, int] = dict(out_dims)
        self._out_bits = {d: _log2(n, f"size of output {d!r}") for d, n in self.out_dims.items()}
        self.bases: dict[str, tuple[Basis, ...]] = {}
        for name, vecs in bases.items():
            vecs = tuple(tuple(int(x) for x in v) for v in vecs)
            for v in vecs:
                if len(v) != len(self.out_dims) or any(
                    not 0 <= x < n for x, n in zip(v, self.out_dims.values())
                ):
                    raise LayoutError(f"basis {v} of {name!r} is not a point of {self.out_dims}")
            self.bases[name] = vecs

    # ---------------------------------------------------------------- sizes
    @property
    def in_dims(self) -> tuple[str, ...]:
        return tuple(self.bases)

    def in_size(self, name: str) -> int:
        return 1 << len(self._in(name))

    def out_size(self, name: str) -> int:
        return self.out_dims[name]

    def _in(self, name: str) -> tuple[Basis, ...]:
        if name not in self.bases:
            raise LayoutError(choices_error("input dimension", name, self.in_dims))
        return self.bases[name]

    # ---------------------------------------------------------------- evaluation
    def apply(self, **inputs: int) -> tuple[int, ...]:
        """The output coordinates (one per out dim) of the given inputs (missing ones are 0)."""
        out = [0] * len(self.out_dims)
        for name, value in inputs.items():
            vecs = self._in(name)
            if not 0 <= value < (1 << len(vecs)):
                raise LayoutError(f"{name}={value} is out of range [0, {1 << len(vecs)})")
            for k, v in enumerate(vecs):
                if value >> k & 1:
                    out = [a ^ b for a, b in zip(out, v)]
        return tuple(out)

    def apply_symbolic(self, **inputs: Any) -> tuple[Any, ...]:
        """The outputs as z3 terms of z3 inputs (Int or bit-vector terms; missing inputs are 0).

        Only the low bits of each input that the layout has bases for are read, so bound the
        inputs to their sizes. Bit-vector inputs give bit-vector outputs (as wide as the widest
        input, or the output); Int inputs give Int outputs."""
        import z3

        bitvec = any(z3.is_bv(x) for x in inputs.values())
        width = max(
            [x.size() for x in inputs.values() if z3.is_bv(x)] + list(self._out_bits.values()) + [1]
        )
        bits: list[tuple[Any, Basis]] = []
        for name, x in inputs.items():
            for k, v in enumerate(self._in(name)):
                bit = z3.Extract(k, k, x) == 1 if z3.is_bv(x) else (x / (1 << k)) % 2 == 1
                bits.append((bit, v))
        outs = []
        for j, nbits in enumerate(self._out_bits.values()):
            total = z3.BitVecVal(0, width) if bitvec else z3.IntVal(0)
            for k in range(nbits):
                terms = [b for b, v in bits if v[j] >> k & 1]
                if not terms:
                    continue
                parity = terms[0]
                for t in terms[1:]:
                    parity = z3.Xor(parity, t)
                one = z3.BitVecVal(1 << k, width) if bitvec else z3.IntVal(1 << k)
                zero = z3.BitVecVal(0, width) if bitvec else z3.IntVal(0)
                total = total + z3.If(parity, one, zero)
            outs.append(total)
        return tuple(outs)

    # ---------------------------------------------------------------- as an F2 matrix
    def _encode(self, v: Basis) -> int:
        code, shift = 0, 0
        for x, nbits in zip(v, self._out_bits.values()):
            code |= x << shift
            shift += nbits
        return code

    def _columns(self) -> list[int]:
        return [self._encode(v) for name in self.in_dims for v in self.bases[name]]

    def _pivots(self) -> dict[int, tuple[int, int]]:
        # row echelon form by leading bit: leading bit -> (vector, which columns XOR to it)
        pivots: dict[int, tuple[int, int]] = {}
        for j, v in enumerate(self._columns()):
            combo = 1 << j
            while v:
                hb = v.bit_length() - 1
                if hb not in pivots:
                    pivots[hb] = (v, combo)
                    break
                v, combo = v ^ pivots[hb][0], combo ^ pivots[hb][1]
        return pivots

    def rank(self) -> int:
        return len(self._pivots())

    def total_in_bits(self) -> int:
        return sum(len(v) for v in self.bases.values())

    def total_out_bits(self) -> int:
        return sum(self._out_bits.values())

    def is_injective(self) -> bool:
        return self.rank() == self.total_in_bits()

    def is_surjective(self) -> bool:
        return self.rank() == self.total_out_bits()

    def is_bijective(self) -> bool:
        return self.is_injective() and self.is_surjective()

    # ---------------------------------------------------------------- algebra
    def compose(self, other: LinearLayout) -> LinearLayout:
        """`x -> other(self(x))` (Triton's order): `other`'s inputs are this layout's outputs."""
        for d, n in self.out_dims.items():
            if d not in other.bases or other.in_size(d) < n:
                raise LayoutError(
                    f"compose: output {d!r} (size {n}) is not an input of {other.in_dims} large enough"
                )
        names = list(self.out_dims)
        return LinearLayout(
            {
                name: [other.apply(**dict(zip(names, v))) for v in vecs]
                for name, vecs in self.bases.items()
            },
            other.out_dims,
        )

    def invert(self) -> LinearLayout:
        """The inverse map, outputs -> inputs; only for a bijective layout."""
        if not self.is_bijective():
            raise LayoutError(
                f"invert: layout is not bijective (rank {self.rank()}, {self.total_in_bits()} input bits, "
                f"{self.total_out_bits()} output bits)"
            )
        pivots = self._pivots()
        in_widths = [len(self.bases[n]) for n in self.in_dims]
        bases: dict[str, list[Basis]] = {}
        shift = 0
        for d, nbits in self._out_bits.items():
            bases[d] = [
                self._decode_inputs(_solve(pivots, 1 << (shift + k)), in_widths)
                for k in range(nbits)
            ]
            shift += nbits
        return LinearLayout(bases, {n: self.in_size(n) for n in self.in_dims})

    @staticmethod
    def _decode_inputs(combo: int, widths: list[int]) -> Basis:
        out = []
        for w in widths:
            out.append(combo & ((1 << w) - 1))
            combo >>= w
        return tuple(out)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LinearLayout) and (self.bases, self.out_dims) == (
            other.bases,
            other.out_dims,
        )

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={[list(v) for v in vs]}" for k, vs in self.bases.items())
        return f"LinearLayout({inner}; out={self.out_dims})"


def _solve(pivots: dict[int, tuple[int, int]], target: int) -> int:
    combo = 0
    while target:
        hb = target.bit_length() - 1
        vec, c = pivots[hb]  # present: the caller checked surjectivity
        target, combo = target ^ vec, combo ^ c
    return combo


# -------------------------------------------------------------------- constructors


def _unit(dim: int, value: int, rank: int) -> list[int]:
    v = [0] * rank
    v[dim] = value
    return v


def _identity(extent: list[int], dim: int, count: int, rank: int) -> list[list[int]]:
    """Bases that step `count` times along `dim`, starting where `extent[dim]` ends (updated)."""
    out = []
    for _ in range(_log2(count, f"count along dim{dim}")):
        out.append(_unit(dim, extent[dim], rank))
        extent[dim] *= 2
    return out


def _fit(
    bases: dict[str, list[list[int]]], extent: list[int], shape: Sequence[int], order: Sequence[int]
) -> LinearLayout:
    # Triton's fitting of a CTA tile to a tensor shape: steps past the shape broadcast
    # (become zero); a tile smaller than the shape repeats in registers, minor dim first
    rank = len(shape)
    for d in range(rank):
        _log2(shape[d], f"shape[{d}]")
    for vecs in bases.values():
        for v in vecs:
            for d in range(rank):
                if v[d] >= shape[d]:
                    v[d] = 0
    for d in order:
        while extent[d] < shape[d]:
            bases["register"].append(_unit(d, extent[d], rank))
            extent[d] *= 2
    bases.setdefault("block", [])
    return LinearLayout(
        {k: bases.get(k, []) for k in IN_DIMS}, {f"dim{d}": shape[d] for d in range(rank)}
    )


def _check_rank(what: str, rank: int, **vals: Sequence[int]) -> None:
    for name, v in vals.items():
        if len(v) != rank:
            raise LayoutError(
                f"{what}: {name}={list(v)} must have {rank} entries (one per dimension)"
            )


def blocked(
    shape: Sequence[int],
    size_per_thread: Sequence[int],
    threads_per_warp: Sequence[int],
    warps_per_cta: Sequence[int],
    order: Sequence[int],
) -> LinearLayout:
    """Triton's BlockedLayout: each thread holds a `size_per_thread` block, threads of a
    warp and warps of a CTA tile the tensor, all fastest along `order[0]`."""
    rank = len(shape)
    _check_rank(
        "blocked",
        rank,
        size_per_thread=size_per_thread,
        threads_per_warp=threads_per_warp,
        warps_per_cta=warps_per_cta,
        order=order,
    )
    if sorted(order) != list(range(rank)):
        raise LayoutError(
            f"blocked: order {list(order)} is not a permutation of {list(range(rank))}"
        )
    extent = [1] * rank
    bases: dict[str, list[list[int]]] = {}
    for in_dim, counts in (
        ("register", size_per_thread),
        ("lane", threads_per_warp),
        ("warp", warps_per_cta),
    ):
        bases[in_dim] = [b for d in order for b in _identity(extent, d, counts[d], rank)]
    return _fit(bases, extent, shape, order)


def _warps(
    extent: list[int], warps_per_cta: Sequence[int], order: Sequence[int]
) -> list[list[int]]:
    return [b for d in order for b in _identity(extent, d, warps_per_cta[d], len(extent))]


def amd_mfma(
    shape: Sequence[int],
    warps_per_cta: Sequence[int],
    version: int = 3,
    instr: tuple[int, int] = (32, 32),
    is_transposed: bool = False,
) -> LinearLayout:
    """The accumulator of a CDNA MFMA (32-bit results) on a 2-D tile. For 32x32: lane l and
    register r hold row `8*(r//4) + 4*(l//32) + r%4`, column `l%32`; for 16x16: row
    `4*(l//16) + r`, column `l%16`. Transposed swaps rows and columns. Warps tile dim1 first."""
    if version not in (1, 2, 3, 4):
        raise LayoutError(choices_error("MFMA version", version, (1, 2, 3, 4)))
    if tuple(instr) not in ((32, 32), (16, 16)):
        raise LayoutError(choices_error("MFMA instr", tuple(instr), ((32, 32), (16, 16))))
    _check_rank("amd_mfma", 2, shape=shape, warps_per_cta=warps_per_cta)
    row, col = (1, 0) if is_transposed else (0, 1)
    extent = [1, 1]
    reg = _identity(extent, row, 4, 2)  # 4 consecutive rows per register group
    lane = _identity(extent, col, instr[1], 2)  # a lane per column
    lane += _identity(extent, row, 64 // instr[1], 2)  # lane groups step over register groups
    if instr[0] == 32:
        reg += _identity(extent, row, 4, 2)  # then registers step by 8 rows
    order = (1, 0)
    return _fit(
        {"register": reg, "lane": lane, "warp": _warps(extent, warps_per_cta, order)},
        extent,
        shape,
        order,
    )


def nvidia_mma_v2(
    shape: Sequence[int], warps_per_cta: Sequence[int], instr: tuple[int, int] = (16, 8)
) -> LinearLayout:
    """The accumulator of Ampere `mma.sync.m16n8k*`: lane l holds row `l//4 (+8)`, columns
    `2*(l%4) + {0,1}`; warps tile dim1 first."""
    if tuple(instr) != (16, 8):
        raise LayoutError(choices_error("mma v2 instr", tuple(instr), ((16, 8),)))
    _check_rank("nvidia_mma_v2", 2, shape=shape, warps_per_cta=warps_per_cta)
    extent = [1, 1]
    reg, lane = _mma_quad(extent)
    order = (1, 0)
    return _fit(
        {"register": reg, "lane": lane, "warp": _warps(extent, warps_per_cta, order)},
        extent,
        shape,
        order,
    )


def _mma_quad(extent: list[int]) -> tuple[list[list[int]], list[list[int]]]:
    # the 16x8 core of mma.sync and wgmma accumulators: 2 adjacent columns per register
    # pair, 4 lanes across 8 columns, 8 lanes down 8 rows, a second register half 8 rows down
    reg = _identity(extent, 1, 2, 2)
    lane = _identity(extent, 1, 4, 2) + _identity(extent, 0, 8, 2)
    reg += _identity(extent, 0, 2, 2)
    return reg, lane


def nvidia_wgmma_acc(
    shape: Sequence[int], warps_per_cta: Sequence[int], instr: tuple[int, int, int] = (16, 64, 16)
) -> LinearLayout:
    """The accumulator of Hopper `wgmma.m64nNk*`: each warp holds 16 rows by N columns as N/8
    16x8 mma cores in registers; warps tile dim0 first (a warpgroup is 4 warps down)."""
    m, n, _ = instr
    if m != 16 or n % 8 or not 8 <= n <= 256:
        raise LayoutError(
            f"wgmma instr {tuple(instr)} must be (16, N, K) with N a multiple of 8 in [8, 256]"
        )
    _check_rank("nvidia_wgmma_acc", 2, shape=shape, warps_per_cta=warps_per_cta)
    extent = [1, 1]
    reg, lane = _mma_quad(extent)
    reg += _identity(extent, 1, n // 8, 2)
    return _fit(
        {"register": reg, "lane": lane, "warp": _warps(extent, warps_per_cta, (0, 1))},
        extent,
        shape,
        (1, 0),
    )
