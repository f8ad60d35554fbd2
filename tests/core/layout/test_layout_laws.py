"""The laws of the layout algebra, as hypothesis properties over small layouts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from argus_core.layout import (
    Layout,
    blocked_product,
    coalesce,
    complement,
    composition,
    cosize,
    crd2idx,
    flatten,
    idx2crd,
    left_inverse,
    logical_divide,
    logical_product,
    make_layout,
    raked_product,
    right_inverse,
    size,
    tiled_divide,
    zipped_divide,
)

settings.register_profile("layout", max_examples=150, deadline=None)
settings.load_profile("layout")

SHAPES = st.recursive(
    st.integers(min_value=1, max_value=5),
    lambda kids: st.lists(kids, min_size=1, max_size=3).map(tuple),
    max_leaves=4,
)


def _rebuild(shape, leaves):
    if isinstance(shape, tuple):
        return tuple(_rebuild(v, leaves) for v in shape)
    return next(leaves)


@st.composite
def layouts(draw) -> Layout:
    """Any small layout: hierarchical shape, arbitrary non-negative strides."""
    shape = draw(SHAPES)
    strides = [draw(st.integers(0, 12)) for _ in flatten(shape)]
    return Layout(shape, _rebuild(shape, iter(strides)))


@st.composite
def injective_layouts(draw, gaps: bool = True) -> Layout:
    """Modes in a random order, each stride a multiple (by a gap, or 1 when `gaps` is off)
    of the extent of the modes below it: injective and complementable. Without gaps the
    layout is a bijection onto [0, size)."""
    shape = draw(SHAPES)
    flat = flatten(shape)
    order = draw(st.permutations(range(len(flat))))
    strides = [0] * len(flat)
    current = 1
    for i in order:
        current *= draw(st.integers(1, 3)) if gaps else 1
        strides[i] = current
        current *= flat[i]
    return Layout(shape, _rebuild(shape, iter(strides)))


def _image(layout: Layout) -> list[int]:
    return [layout(i) for i in range(size(layout))]


@given(layouts())
def test_coalesce_preserves_the_function(a):
    c = coalesce(a)
    assert size(c) == size(a)
    assert _image(c) == _image(a)
    assert len(flatten(c.shape)) <= len(flatten(a.shape))


@given(layouts())
def test_coalesce_by_mode_keeps_rank(a):
    profile = tuple(1 for _ in range(len(a)))
    c = coalesce(a, profile)
    assert len(c) == len(a)
    assert _image(c) == _image(a)


@given(layouts())
def test_idx2crd_inverts_crd2idx_for_column_major(a):
    for i in range(size(a)):
        crd = idx2crd(i, a.shape)
        assert crd2idx(crd, a.shape) == i
        assert crd2idx(crd, a.shape, a.stride) == a(i)


@st.composite
def mode_subsets(draw, a: Layout) -> Layout:
    """A layout over a's domain that picks a subset of a's flat modes in any order, with
    their column-major weights as strides: the tilers composition and divide admit."""
    flat = flatten(a.shape)
    weights = [1]
    for s in flat[:-1]:
        weights.append(weights[-1] * s)
    picked = draw(st.lists(st.sampled_from(range(len(flat))), min_size=1, unique=True))
    return Layout(tuple(flat[i] for i in picked), tuple(weights[i] for i in picked))


@given(layouts(), st.data())
def test_composition_is_function_composition(a, data):
    b = data.draw(mode_subsets(a))
    r = composition(a, b)
    assert size(r) == size(b)
    for i in range(size(b)):
        assert r(i) == a(b(i))


@given(layouts(), st.integers(1, 6), st.integers(0, 4))
def test_composition_with_strided_vector(a, n, d):
    flat = flatten(a.shape)
    prefixes = [1]
    for s in flat:
        prefixes.append(prefixes[-1] * s)
    d = prefixes[d % len(prefixes)]  # a stride that steps over whole modes of a
    if (n - 1) * d >= size(a):
        return  # b's image must lie in a's domain
    try:
        r = composition(a, Layout(n, d))
    except ValueError as e:
        assert "do not divide" in str(e)  # n cuts a mode of a: composition is undefined
        return
    assert [r(i) for i in range(n)] == [a(i * d) for i in range(n)]


@given(injective_layouts(), st.integers(1, 4))
def test_complement_is_disjoint_and_covers(a, extra):
    cotarget = cosize(a) * extra
    c = complement(a, cotarget)
    both = make_layout(a, c)
    image = _image(both)
    assert len(set(image)) == len(image), "the layout and its complement overlap"
    assert size(both) >= cotarget // max(1, max(_image(a)) + 1)
    # the complement's images are ordered and it fills exactly the holes of a
    if all(s != 1 for s in flatten(a.shape)):
        gaps = set(range(cosize(both))) - set(image)
        assert not gaps, f"{a} with complement {c} misses {sorted(gaps)[:5]}"


@given(injective_layouts(gaps=False))
def test_complement_of_compact_is_trivial(a):
    assert size(complement(a, size(a))) == 1


@given(layouts())
def test_right_inverse(a):
    r = right_inverse(a)
    for i in range(size(r)):
        assert a(r(i)) == i


@given(injective_layouts(gaps=False))
def test_right_inverse_of_bijection_is_two_sided(a):
    r = right_inverse(a)
    assert size(r) == size(a)
    for i in range(size(a)):
        assert r(a(i)) == i and a(r(i)) == i


@given(injective_layouts())
def test_left_inverse(a):
    inv = left_inverse(a)
    for i in range(size(a)):
        assert inv(a(i)) == i


@given(layouts(), st.data())
def test_logical_divide_is_composition_with_complement(a, data):
    t = data.draw(mode_subsets(a))
    d = logical_divide(a, t)
    ref = composition(a, make_layout(t, complement(t, size(a))))
    assert _image(d) == _image(ref)
    assert size(d) == size(a)
    # the tile mode is a composed with the tiler
    assert [d[0](i) for i in range(size(t))] == [a(t(i)) for i in range(size(t))]
    # the divide is a rearrangement of a's domain: same multiset of offsets
    assert sorted(_image(d)) == sorted(_image(a))
    # zipped and tiled divides are regroupings of the same function
    assert _image(zipped_divide(a, t)) == _image(d)
    assert _image(tiled_divide(a, t)) == _image(d)


@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 3), st.integers(1, 3))
def test_by_mode_divide_tiles_a_matrix(tm, tn, rm, rn):
    a = Layout((tm * rm, tn * rn), (tn * rn, 1))  # row-major matrix
    z = zipped_divide(a, (tm, tn))
    for i in range(tm):
        for j in range(tn):
            for bi in range(rm):
                for bj in range(rn):
                    assert z((i, j), (bi, bj)) == a(bi * tm + i, bj * tn + j)


@given(injective_layouts(gaps=False), injective_layouts())
def test_logical_product_definition(a, b):
    p = logical_product(a, b)
    c = complement(a, size(a) * cosize(b))
    assert size(p) == size(a) * size(b)
    for i in range(size(a)):
        for j in range(size(b)):
            assert p(i, j) == a(i) + c(b(j))
    image = _image(p)
    assert len(set(image)) == len(image)  # copies of a never collide


@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.integers(1, 3))
def test_blocked_and_raked_products_tile_a_matrix(am, an, bm, bn):
    a = Layout((am, an), (an, 1))  # a row-major block
    b = Layout((bm, bn))  # column-major arrangement of blocks
    blocked, raked = blocked_product(a, b), raked_product(a, b)
    m, n = am * bm, an * bn
    for r in range(m):
        for c in range(n):
            # blocked: element (r, c) is element (r % am, c % an) of block (r // am, c // an)
            blk = b(r // am, c // an)
            assert blocked(r, c) == a(r % am, c % an) + blk * size(a)
            # raked: the same with the roles of inside and outside swapped
            assert raked(r, c) == a(r // bm, c // bn) + b(r % bm, c % bn) * size(a)
    assert sorted(_image(blocked)) == list(range(m * n)) == sorted(_image(raked))


def test_known_examples():
    # from the CuTe documentation
    assert composition(Layout((6, 2), (8, 2)), Layout((4, 3), (3, 1))) == Layout(
        ((2, 2), 3), ((24, 2), 8)
    )
    assert complement(Layout(4, 2), 24) == Layout((2, 3), (1, 8))
    assert str(Layout((2, (3, 4)), (1, (2, 6)))) == "(2,(3,4)):(1,(2,6))"
    assert str(Layout(8)) == "8:1"
