"""Int tuples and layout evaluation on ints, Exprs and z3 terms alike."""

from __future__ import annotations

import pytest
import z3

from argus_core.ir.expr import Sym, to_z3
from argus_core.layout import (
    Layout,
    LayoutError,
    crd2idx,
    elem_scale,
    floordiv,
    idx2crd,
    inner_product,
    prefix_product,
    shape_div,
)


def test_int_tuple_helpers():
    assert prefix_product((2, (3, 4), 5)) == (1, (2, 6), 24)
    assert shape_div((6, 2), 2) == (3, 2)
    assert shape_div((6, 2), 12) == (1, 1)
    assert shape_div((4, 6), (2, 3)) == (2, 2)
    assert elem_scale((2, 3), (4, (2, 2))) == (8, 12)
    assert inner_product((2, (3, 4)), (5, (6, 7))) == 10 + 18 + 28
    assert idx2crd(17, (2, (3, 4))) == (1, (2, 2))
    with pytest.raises(LayoutError, match="neither of 6 and 4"):
        shape_div(6, 4)
    with pytest.raises(LayoutError, match="cannot decide symbolically"):
        shape_div(Sym("M"), 4)


def test_floordiv_dispatch():
    x, b = z3.Int("x"), z3.BitVec("b", 8)
    assert floordiv(7, 2) == 3
    assert repr(floordiv(Sym("M"), 4)) == "M // 4"
    assert z3.simplify(z3.substitute(floordiv(x, 4), (x, z3.IntVal(11)))).as_long() == 2
    assert z3.simplify(z3.substitute(floordiv(b, 4), (b, z3.BitVecVal(200, 8)))).as_long() == 50


def test_layout_evaluates_ints_exprs_and_z3_the_same():
    layout = Layout(((4, 8), (2, 16)), ((2, 64), (1, 8)))
    i = Sym("i")
    sym = layout(i)
    zi = z3.Int("i")
    zt = layout(zi)
    via_expr = to_z3(sym, {"i": zi})
    for v in (0, 1, 5, 31, 32, 100, 1023):
        concrete = layout(v)
        assert sym.evaluate({"i": v}) == concrete
        assert z3.simplify(z3.substitute(zt, (zi, z3.IntVal(v)))).as_long() == concrete
        assert z3.simplify(z3.substitute(via_expr, (zi, z3.IntVal(v)))).as_long() == concrete
    # and the solver can run the map backwards: which index lands on offset 521?
    s = z3.Solver()
    s.add(zi >= 0, zi < 1024, zt == 521)
    assert s.check() == z3.sat
    assert layout(s.model()[zi].as_long()) == 521


def test_crd2idx_hierarchical_and_flat_agree():
    shape, stride = (3, (2, 4)), (1, (3, 6))
    for i in range(24):
        assert crd2idx(i, shape, stride) == crd2idx(idx2crd(i, shape), shape, stride)
