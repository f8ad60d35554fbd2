"""Coordinate layouts: identity layouts, slices, symbolic tile division, gathers. What the
DSL's views are made of, checked concretely (properties) and on symbolic values."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from argus_core.ir.expr import Sym
from argus_core.layout import (
    ArithTuple,
    CustomStride,
    Layout,
    LayoutError,
    basis,
    elem_less,
    identity_layout,
    make_layout,
    slice_and_offset,
    tile_at,
    tile_divide,
    zero,
)

M, K, SM, SK, BM, BK, PM, KK = (Sym(n) for n in ("M", "K", "sM", "sK", "BM", "BK", "pm", "k"))
EI, EJ = Sym("i"), Sym("j")


def _env(rng: random.Random) -> dict[str, int]:
    return {
        "M": rng.randint(1, 500),
        "K": rng.randint(1, 500),
        "sM": rng.randint(1, 600),
        "sK": rng.randint(1, 600),
        "BM": rng.choice([16, 32, 64, 128]),
        "BK": rng.choice([8, 16, 32]),
        "pm": rng.randint(0, 9),
        "k": rng.randint(0, 17),
    }


# ------------------------------------------------------------------ coordinates as values


def test_arith_tuples_add_componentwise_and_scale_keeping_operand_order():
    t, u = ArithTuple((1, EI)), ArithTuple((EJ, 0))
    assert 0 + t is t and t + 0 is t
    assert t + u == ArithTuple((1 + EJ, EI))  # operand order kept: prints `1 + j`
    assert list(PM * basis(1, 2, BM)) == [0, PM * BM]
    assert str((PM * basis(0, 1, BM))[0]) == "pm * BM"  # the index first, as written by hand
    with pytest.raises(LayoutError, match="ranks 2 and 3"):
        t + zero(3)
    with pytest.raises(TypeError):
        t + 1


def test_a_float_is_still_refused_by_symbolic_arithmetic():
    with pytest.raises(TypeError, match="expected an int or a symbolic expression, got float"):
        EI * 0.5


@given(st.lists(st.integers(1, 6), min_size=1, max_size=4), st.data())
def test_identity_layout_maps_each_coordinate_to_itself(shape, data):
    ident = identity_layout(tuple(shape))
    crd = tuple(data.draw(st.integers(0, s - 1)) for s in shape)
    assert tuple(ident(crd)) == crd
    flat = data.draw(st.integers(0, max(1, len(shape)) - 1))
    assert ident[flat].stride == basis(flat, len(shape))


def test_identity_layout_of_a_hierarchical_shape_has_one_entry_per_leaf():
    ident = identity_layout(((2, 3), 4))
    assert tuple(ident(((1, 2), 3))) == (1, 2, 3)
    assert tuple(ident(5)) == (1, 2, 0)  # a flat index, column-major over the leaves


# ------------------------------------------------------------------ slicing


@st.composite
def sliced(draw):
    """A flat layout with random strides and a coordinate with some modes left None."""
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=4)))
    stride = tuple(draw(st.integers(0, 30)) for _ in shape)
    full = tuple(draw(st.integers(0, s - 1)) for s in shape)
    free = tuple(draw(st.booleans()) for _ in shape)
    return Layout(shape, stride), full, free


@given(sliced())
def test_slice_offset_plus_the_kept_layout_is_the_layout(case):
    layout, full, free = case
    crd = tuple(None if f else c for c, f in zip(full, free))
    kept, offset = slice_and_offset(crd, layout)
    rest = tuple(c for c, f in zip(full, free) if f)
    assert offset + (kept(rest) if rest else 0) == layout(full)
    assert kept.shape == tuple(s for s, f in zip(layout.shape, free) if f)


def test_slice_of_a_symbolic_identity_layout_fixes_leading_coordinates():
    b, h, B, H = Sym("b"), Sym("h"), Sym("B"), Sym("H")
    kept, origin = slice_and_offset((b, h, None, None), identity_layout((B, H, M, K)))
    assert origin == ArithTuple((b, h, 0, 0))
    assert kept == Layout((M, K), (basis(2, 4), basis(3, 4)))
    assert tuple(origin + kept((EI, EJ))) == (b, h, EI, EJ)
    with pytest.raises(LayoutError, match="3 modes"):
        slice_and_offset((b, None, None), identity_layout((B, H, M, K)))


# ------------------------------------------------------------------ symbolic tile division


def test_symbolic_tile_sizes_divide_the_identity_layout_into_coordinates():
    offset, inner = tile_at(tile_divide(identity_layout((M, K)), (BM, BK)), (PM, KK))
    coords = tuple(offset + inner((EI, EJ)))
    assert [str(c) for c in coords] == ["pm * BM + i", "k * BK + j"]
    assert inner.shape == (BM, BK)
    rng = random.Random(3)
    for _ in range(100):
        env = _env(rng) | {"i": rng.randrange(16), "j": rng.randrange(8)}
        got = [c.evaluate(env) for c in coords]
        assert got == [env["pm"] * env["BM"] + env["i"], env["k"] * env["BK"] + env["j"]]


def test_offsets_of_the_coordinates_are_the_divided_offset_layout():
    # two routes to a tile element's offset agree: the tensor's layout applied to the
    # coordinates the divided identity layout gives, and the divided offset layout itself
    tensor = Layout((M, K), (SM, SK))
    c_off, c_inner = tile_at(tile_divide(identity_layout((M, K)), (BM, BK)), (PM, KK))
    o_off, o_inner = tile_at(tile_divide(tensor, (BM, BK)), (PM, KK))
    via_coords = tensor(tuple(c_off + c_inner((EI, EJ))))
    direct = o_off + o_inner((EI, EJ))
    rng = random.Random(4)
    for _ in range(100):
        env = _env(rng) | {"i": rng.randrange(16), "j": rng.randrange(8)}
        assert via_coords.evaluate(env) == direct.evaluate(env)


def test_rest_modes_count_partial_symbolic_tiles():
    divided = tile_divide(identity_layout((M, K)), (BM, 32))
    rng = random.Random(5)
    for _ in range(50):
        env = _env(rng)
        assert divided.shape[0][1].evaluate(env) == -(-env["M"] // env["BM"])
        assert divided.shape[1][1].evaluate(env) == -(-env["K"] // 32)


def test_elem_less_is_constant_when_concrete_and_a_conjunction_otherwise():
    assert elem_less((3, 4), (5, 5)).value == 1
    assert elem_less((3, 7), (5, 5)).value == 0
    pred = elem_less((PM * BM + EI, EJ), (M, K))
    assert str(pred) == "((pm * BM + i < M) & (j < K))"
    with pytest.raises(LayoutError, match="differ in rank"):
        elem_less((EI,), (M, K))


# ------------------------------------------------------------------ gathers


def test_a_custom_stride_gathers_rows_by_a_table():
    table = [7, 2, 5, 0]
    rows = Layout(4, CustomStride(lambda r: table[r], basis(0, 2), "rows"))
    gather = make_layout(rows, Layout(3, basis(1, 2)))
    assert [tuple(gather((r, c))) for r in range(4) for c in (0, 2)] == [
        (t, c) for t in table for c in (0, 2)
    ]
    assert "rows*<1,0>" in repr(gather)


def test_a_custom_stride_passes_symbolic_coordinates_to_its_function():
    seen = []
    rows = Layout(BM, CustomStride(lambda r: seen.append(r) or Sym("row"), basis(0, 2)))
    assert tuple(rows(EI)) == (Sym("row"), 0) and seen == [EI]
