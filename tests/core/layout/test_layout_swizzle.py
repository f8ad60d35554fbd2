"""Swizzles are involutions, composed layouts invert, swizzling removes bank conflicts, and
swizzles of symbolic offsets and tile coordinates agree with the int ones."""

from __future__ import annotations

import pytest
import z3
from hypothesis import given
from hypothesis import strategies as st

from argus_core.ir.expr import Sym
from argus_core.layout import Layout, LayoutError
from argus_core.layout.swizzle import ComposedLayout, Swizzle, bank_conflicts, xor

TILE = Layout((64, 64), (64, 1))  # 64x64 fp16, row-major
PADDED = Layout((64, 64), (66, 1))  # rows padded by 2 halves (4 bytes)
SWIZZLED = ComposedLayout(Swizzle(3, 3, 3), 0, TILE)  # 16-byte chunks XOR row % 8


@st.composite
def swizzles(draw):
    bits = draw(st.integers(0, 4))
    shift = draw(st.integers(bits, 6)) * draw(st.sampled_from([1, -1]))
    return Swizzle(bits, draw(st.integers(0, 4)), shift)


@given(swizzles(), st.integers(0, 1 << 14))
def test_swizzle_is_an_involution(sw, y):
    assert sw(sw(y)) == y
    assert sw.inverse()(sw(y)) == y


@given(swizzles())
def test_swizzle_permutes_each_aligned_block(sw):
    span = 1 << (sw.base + abs(sw.shift) + sw.bits)
    assert sorted(sw(y) for y in range(span)) == list(range(span))


def test_swizzle_moves_row_bits_into_chunk_bits():
    sw = Swizzle(3, 3, 3)
    assert (sw.yyy_mask, sw.zzz_mask) == (0b111_000_000, 0b111_000)
    for row in range(8):
        assert sw(row * 64) == row * 64 + row * 8  # chunk 0 of row r lands in chunk r


def test_swizzle_on_z3_bitvectors_matches_ints():
    sw, y = Swizzle(3, 4, 3), z3.BitVec("y", 16)
    term = sw(y)
    for v in (0, 1, 0x1F0, 0x3FF, 0xABC):
        assert z3.simplify(z3.substitute(term, (y, z3.BitVecVal(v, 16)))).as_long() == sw(v)


def test_composed_layout_inverse():
    inv = SWIZZLED.inverse()
    assert all(inv(SWIZZLED(i)) == i for i in range(64 * 64))
    assert sorted(SWIZZLED(i) for i in range(64 * 64)) == list(range(64 * 64))
    with pytest.raises(LayoutError, match="not a bijection"):
        ComposedLayout(Swizzle(1, 0, 1), 0, Layout(4, 2)).inverse()


def test_invalid_swizzle_names_the_value():
    with pytest.raises(LayoutError, match="shift 1"):
        Swizzle(3, 3, 1)


def _column_read(layout, col):
    return lambda t: layout(t, col)


def test_bank_conflicts_scalar_column_reads():
    # 32 threads each read one fp16 of a column: rows 128 bytes apart all hit one bank
    worst = {
        name: max(bank_conflicts(_column_read(lay, c), 2, 32) for c in range(64))
        for name, lay in (("unpadded", TILE), ("padded", PADDED), ("swizzled", SWIZZLED))
    }
    assert worst == {"unpadded": 32, "padded": 1, "swizzled": 4}


def test_bank_conflicts_vector_column_reads():
    # 16-byte reads (8 halves) down a column of chunks, 8 threads per phase (ldmatrix-like):
    # the swizzle is designed for exactly this and removes every conflict
    def chunks(layout, chunk):
        return lambda t: layout(t % 64, chunk * 8)

    for lay, expected in ((TILE, 8), (SWIZZLED, 1)):
        assert (
            max(bank_conflicts(chunks(lay, c), 2, 8, warp_size=32, vector=8) for c in range(8))
            == expected
        )


def test_bank_conflicts_broadcast_is_free():
    assert bank_conflicts(lambda t: 0, 4, 32) == 1  # every thread reads the same word
    assert bank_conflicts(lambda t: t, 4, 32) == 1  # consecutive words
    assert bank_conflicts(lambda t: 2 * t, 4, 32) == 2  # stride 2 words: 2-way


# ------------------------------------------------------------------ symbolic swizzles


@given(swizzles(), st.integers(0, 1 << 14))
def test_swizzle_of_an_expr_evaluates_to_the_int_swizzle(sw, y):
    assert sw(Sym("y")).evaluate({"y": y}) == sw(y)


@given(swizzles(), st.integers(0, 1 << 14))
def test_swizzle_on_z3_ints_matches_ints(sw, y):
    term = sw(z3.Int("y"))
    assert z3.simplify(z3.substitute(term, (z3.Int("y"), z3.IntVal(y)))).as_long() == sw(y)


@given(st.integers(0, 1 << 12), st.integers(0, 255), st.integers(0, 31))
def test_xor_of_exprs_is_bitwise_xor(a, b, extra):
    bits = max(b.bit_length(), 1) + extra % 3
    expr = xor(Sym("a"), Sym("b"), bits)
    assert expr.evaluate({"a": a, "b": b}) == a ^ b == xor(a, b, bits)


@st.composite
def row_swizzles(draw):
    bits = draw(st.integers(0, 3))
    return Swizzle(bits, draw(st.integers(0, 3)), bits + draw(st.integers(0, 3)))


@given(row_swizzles(), st.integers(0, 200), st.integers(0, 300))
def test_on_tile_is_the_swizzle_of_the_offset_in_the_atom(sw, row, col):
    rows, width = sw.atom.shape
    corner = col - col % width
    swizzled = sw(sw.atom(row % rows, col % width))
    assert sw.on_tile(row, col) == (row, corner + swizzled % width)
    assert swizzled // width == row % rows  # the swizzle stays in the element's atom row


@given(row_swizzles(), st.integers(0, 200), st.integers(0, 300))
def test_on_tile_of_exprs_evaluates_to_the_int_result(sw, row, col):
    r, c = sw.on_tile(Sym("r"), Sym("c"))
    env = {"r": row, "c": col}
    assert (r.evaluate(env), c.evaluate(env)) == sw.on_tile(row, col)


def test_on_tile_needs_the_source_bits_in_the_row():
    assert Swizzle(3, 3, 3).atom == Layout((8, 64), (64, 1))
    with pytest.raises(LayoutError, match="no row-major atom"):
        Swizzle(2, 3, -2).on_tile(1, 1)
