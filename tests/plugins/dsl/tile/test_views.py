"""Views made by the layout algebra: permuted, swizzled (and back), re-strided and gathered
views evaluate to the elements they name; misuse fails with the line."""

from __future__ import annotations

import random
import textwrap

import pytest

from argus_core.errors import DSLError
from argus_core.ir import Load, TileElem
from argus_plugins.dsl.tile.frontend import TileFrontend

HEAD = """
from argus_plugins.dsl.tile import lang as al
@al.kernel
def k(b: al.Tensor["K", "N"], c: al.Tensor["N", "K"], BK: al.constexpr, BN: al.constexpr):
    kk, pn = al.program_ids((al.cdiv(b.shape[0], BK), al.cdiv(b.shape[1], BN)))
"""


def loads(body: str):
    src = textwrap.dedent(HEAD) + textwrap.indent(textwrap.dedent(body).strip() + "\n", "    ")
    src += "    al.store(c.tile(BN, BK)[pn, kk], al.zeros((BN, BK)))\n"
    ir = TileFrontend().parse(src, "k", "/virtual/k.py")
    return [op for op in ir.walk() if isinstance(op, Load)]


def _envs(n: int = 40):
    rng = random.Random(7)
    for _ in range(n):
        yield {
            "K": rng.randint(1, 300),
            "N": rng.randint(1, 300),
            "BK": 16,
            "BN": 32,
            "pid_0": rng.randint(0, 9),
            "pid_1": rng.randint(0, 9),
            "b_stride0": rng.randint(1, 400),
            "b_stride1": rng.randint(1, 3),
            "_i0": rng.randrange(16),
            "_i1": rng.randrange(32),
        }


def _eval(view, env):
    return tuple(c.evaluate(env) for c in view.coords), view.offset.evaluate(env)


def test_a_swizzled_view_reads_the_element_its_swizzle_names():
    plain, sw = loads(
        """
        x = al.load(b.tile(BK, BN)[kk, pn])
        y = al.load(al.swizzle(b.tile(BK, BN)[kk, pn], 2, 1, 1))
        """
    )
    for env in _envs():
        i, j = env["_i0"], env["_i1"]
        moved = env | {"_i1": j ^ (((i >> 1) % 4) << 1)}
        assert _eval(sw.view, env) == _eval(plain.view, moved)
        assert bool(sw.view.in_bounds.evaluate(env)) == bool(plain.view.in_bounds.evaluate(moved))
    assert sw.view.desc == "swizzle(b.tile(BK, BN)[pid_0, pid_1], 2, 1, 1)"


def test_a_swizzle_composed_with_its_inverse_is_the_view_it_came_from():
    plain, back, twice = loads(
        """
        v = b.tile(BK, BN)[kk, pn]
        x = al.load(v)
        y = al.load(al.unswizzle(al.swizzle(v, 3), 3))
        z = al.load(al.swizzle(al.swizzle(v, 3), 3, 1))
        """
    )
    assert back.view is plain.view  # the same view, desc and all: nothing to lower
    assert twice.view.desc == "swizzle(swizzle(b.tile(BK, BN)[pid_0, pid_1], 3, 0, 0), 3, 1, 0)"


def test_a_permuted_view_swaps_element_axes():
    plain, perm = loads(
        """
        x = al.load(b.tile(BK, BN)[kk, pn])
        y = al.load(al.permute(b.tile(BK, BN)[kk, pn], (1, 0)))
        """
    )
    assert perm.view.shape == (plain.view.shape[1], plain.view.shape[0])
    for env in _envs():
        swapped = env | {"_i0": env["_i1"], "_i1": env["_i0"]}
        assert _eval(perm.view, swapped) == _eval(plain.view, env)
    assert perm.view.desc == "permute(b.tile(BK, BN)[pid_0, pid_1], (1, 0))"


def test_with_strides_keeps_coordinates_and_recomputes_offsets():
    plain, strided = loads(
        """
        x = al.load(b.tile(BK, BN)[kk, pn])
        y = al.load(al.with_strides(b, 7, 1).tile(BK, BN)[kk, pn])
        """
    )
    assert strided.view.coords == plain.view.coords
    for env in _envs(10):
        (r, col), _ = _eval(strided.view, env)
        assert strided.view.offset.evaluate(env) == r * 7 + col


GATHER = """
from argus_plugins.dsl.tile import lang as al
@al.kernel
def k(x: al.Tensor["T", "H"], ids: al.Tensor["N"], y: al.Tensor["H", "N"],
      BM: al.constexpr, BK: al.constexpr):
    pb, pk = al.program_ids((al.cdiv(ids.shape[0], BM), al.cdiv(x.shape[1], BK)))
    rows = al.load(ids.tile(BM)[pb], other=-1)
    t = al.load(VIEW)
    al.store(y.tile(BK, BM)[pk, pb], t)
"""


def test_a_permuted_gather_indexes_rows_along_the_permuted_axis():
    src = GATHER.replace("VIEW", "al.permute(x.rows(rows).tile(BK)[pk], (1, 0))")
    ir = TileFrontend().parse(src, "k", "/virtual/k.py")
    gather = [op for op in ir.walk() if isinstance(op, Load)][1]
    row = gather.view.coords[0]
    assert isinstance(row, TileElem) and row.axis == 1  # the rows now run along axis 1


def test_a_gathered_row_cannot_be_computed_by_a_swizzle():
    view = "al.swizzle(al.permute(x.rows(rows).tile(BK)[pk], (1, 0)), 2)"
    with pytest.raises(DSLError, match="indexed by data"):
        TileFrontend().parse(GATHER.replace("VIEW", view), "k", "/virtual/k.py")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("t = al.load(al.swizzle(b[0].tile(BN)[pn], 2))", "2-D view"),
        ("t = al.load(b.tile(BK, 0)[kk, pn])", "positive ints or constexprs"),
        ("t = al.load(b.tile(BK, BN)[kk, 1.5])", "not an int or a program value"),
        ("t = al.load(al.with_strides(b[0], 1).tile(BK)[kk])", "whole kernel tensor"),
        ("t = al.load(al.swizzle(b.tile(BK, BN)[kk, pn], -1))", "must be >= 0"),
    ],
)
def test_view_misuse_names_the_problem(body, message):
    with pytest.raises(DSLError, match=message) as info:
        loads(body)
    assert info.value.where.startswith("/virtual/k.py:")
