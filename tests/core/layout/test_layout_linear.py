"""Linear layouts over F2: the laws, and agreement with Triton's own layouts.

Triton 3.6 converts its Gluon layouts to linear layouts in Python through the Gluon
builder (`GluonOpBuilder.to_linear_layout`), which needs no compile and no GPU, so each
constructor here is compared with Triton's on a grid of parameters.
"""

from __future__ import annotations

import itertools
import os
import tempfile

import pytest
import z3
from hypothesis import given, settings
from hypothesis import strategies as st

from argus_core.layout import LayoutError
from argus_core.layout.linear import (
    LinearLayout,
    amd_mfma,
    blocked,
    nvidia_mma_v2,
    nvidia_wgmma_acc,
)

os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(tempfile.gettempdir(), "argus-triton-cache"))


@pytest.fixture(scope="module")
def triton_ll():
    from triton._C.libtriton import ir
    from triton._C.libtriton.gluon_ir import GluonOpBuilder

    ctx = ir.context()
    ir.load_dialects(ctx)
    builder = GluonOpBuilder(ctx)

    def convert(layout, shape, _keep_alive=ctx) -> LinearLayout:
        # the builder does not own its MLIR context: the default argument keeps it alive
        t = builder.to_linear_layout(layout._to_ir(builder), list(shape))
        bases = {
            "register": t.reg_bases,
            "lane": t.lane_bases,
            "warp": t.warp_bases,
            "block": t.block_bases,
        }
        return LinearLayout(bases, {f"dim{d}": n for d, n in enumerate(t.shape)})

    return convert


def _pow2(lo: int, hi: int) -> list[int]:
    return [1 << k for k in range(lo, hi + 1)]


BLOCKED_2D = [
    (shape, spt, tpw, wpc, order)
    for shape in [(4, 4), (16, 64), (64, 128), (128, 32)]
    for spt in [(1, 1), (1, 4), (2, 2), (8, 1)]
    for tpw in [(8, 4), (4, 8), (1, 32), (2, 32)]
    for wpc in [(1, 1), (2, 2), (4, 1), (1, 8)]
    for order in [(1, 0), (0, 1)]
]


def test_blocked_matches_triton(triton_ll):
    from triton.experimental.gluon import language as ttgl

    for shape, spt, tpw, wpc, order in BLOCKED_2D:
        ours = blocked(shape, spt, tpw, wpc, order)
        theirs = triton_ll(ttgl.BlockedLayout(list(spt), list(tpw), list(wpc), list(order)), shape)
        assert ours == theirs, (shape, spt, tpw, wpc, order)


def test_blocked_3d_matches_triton(triton_ll):
    from triton.experimental.gluon import language as ttgl

    for order in itertools.permutations(range(3)):
        for shape in [(8, 16, 32), (2, 4, 64)]:
            args = ((1, 1, 4), (2, 4, 4), (1, 2, 2), order)
            theirs = triton_ll(ttgl.BlockedLayout(*[list(a) for a in args]), shape)
            assert blocked(shape, *args) == theirs, (shape, order)


def test_amd_mfma_matches_triton(triton_ll):
    from triton.experimental.gluon.language import amd as ttgla

    for version, (m, k), transposed, wpc, shape in itertools.product(
        (2, 3, 4),
        ((32, 8), (16, 16)),
        (False, True),
        ((1, 1), (2, 2), (4, 1), (1, 4), (2, 4)),
        ((16, 16), (32, 64), (64, 64), (128, 256), (256, 32)),
    ):
        theirs = triton_ll(ttgla.AMDMFMALayout(version, [m, m, k], transposed, list(wpc)), shape)
        ours = amd_mfma(shape, wpc, version=version, instr=(m, m), is_transposed=transposed)
        assert ours == theirs, (version, m, transposed, wpc, shape)


def test_nvidia_mma_v2_matches_triton(triton_ll):
    from triton.experimental.gluon import language as ttgl

    for wpc, shape in itertools.product(
        ((1, 1), (2, 2), (4, 1), (1, 4), (2, 4)), ((16, 8), (32, 32), (64, 128), (256, 16))
    ):
        theirs = triton_ll(ttgl.NVMMADistributedLayout([2, 0], list(wpc), [16, 8]), shape)
        assert nvidia_mma_v2(shape, wpc) == theirs, (wpc, shape)


def test_nvidia_wgmma_acc_matches_triton(triton_ll):
    from triton.experimental.gluon import language as ttgl

    for n, wpc, shape in itertools.product(
        (8, 32, 64, 128, 256), ((4, 1), (8, 1), (4, 2)), ((64, 64), (128, 256), (256, 128))
    ):
        theirs = triton_ll(ttgl.NVMMADistributedLayout([3, 0], list(wpc), [16, n, 16]), shape)
        assert nvidia_wgmma_acc(shape, wpc, (16, n, 16)) == theirs, (n, wpc, shape)


def test_mfma_32x32_accumulator_isa_facts():
    # CDNA3 ISA, v_mfma_f32_32x32x8f16: lane l, accumulator register r hold
    # D[8*(r//4) + 4*(l//32) + r%4][l%32]
    acc = amd_mfma((32, 32), (1, 1), instr=(32, 32))
    for lane in range(64):
        for reg in range(16):
            assert acc.apply(register=reg, lane=lane) == (
                8 * (reg // 4) + 4 * (lane // 32) + reg % 4,
                lane % 32,
            )
    acc16 = amd_mfma((16, 16), (1, 1), instr=(16, 16))  # D[4*(l//16) + r][l%16]
    for lane in range(64):
        for reg in range(4):
            assert acc16.apply(register=reg, lane=lane) == (4 * (lane // 16) + reg, lane % 16)


# --------------------------------------------------------------------- laws


@st.composite
def blocked_params(draw):
    rank = draw(st.integers(1, 3))
    spt = [draw(st.sampled_from(_pow2(0, 2))) for _ in range(rank)]
    tpw = [1] * rank
    for _ in range(5):  # 32 threads per warp
        tpw[draw(st.integers(0, rank - 1))] *= 2
    wpc = [1] * rank
    for _ in range(draw(st.integers(0, 2))):
        wpc[draw(st.integers(0, rank - 1))] *= 2
    order = draw(st.permutations(range(rank)))
    shape = [draw(st.sampled_from(_pow2(0, 5))) for _ in range(rank)]
    return shape, spt, tpw, wpc, order


@settings(max_examples=40, deadline=None)
@given(blocked_params())
def test_blocked_covers_the_shape_once_per_replica(params):
    shape, spt, tpw, wpc, order = params
    ll = blocked(shape, spt, tpw, wpc, order)
    assert ll.is_surjective()
    n_reg, n_lane, n_warp = (ll.in_size(d) for d in ("register", "lane", "warp"))
    counts: dict[tuple[int, ...], int] = {}
    for r, ln, w in itertools.product(range(n_reg), range(n_lane), range(n_warp)):
        c = ll.apply(register=r, lane=ln, warp=w)
        assert all(0 <= x < n for x, n in zip(c, shape))
        counts[c] = counts.get(c, 0) + 1
    total = 1
    for n in shape:
        total *= n
    assert len(counts) == total  # every element is held
    assert len(set(counts.values())) == 1  # and each the same number of times (replicas)
    assert next(iter(counts.values())) == n_reg * n_lane * n_warp // total


@st.composite
def bijective_layouts(draw):
    """Random invertible F2 matrices split into inputs and outputs."""
    out_bits = [draw(st.integers(0, 3)) for _ in range(2)]
    n = sum(out_bits)
    # start from a permutation matrix and add random column operations: stays invertible
    cols = [1 << i for i in draw(st.permutations(range(n)))]
    for _ in range(draw(st.integers(0, 8))):
        if n > 1:
            i, j = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
            if i != j:
                cols[i] ^= cols[j]
    cut1 = draw(st.integers(0, n))
    cut2 = draw(st.integers(cut1, n))
    mask0 = (1 << out_bits[0]) - 1

    def vec(c):
        return (c & mask0, c >> out_bits[0])

    bases = {
        "register": [vec(c) for c in cols[:cut1]],
        "lane": [vec(c) for c in cols[cut1:cut2]],
        "warp": [vec(c) for c in cols[cut2:]],
    }
    return LinearLayout(bases, {"dim0": 1 << out_bits[0], "dim1": 1 << out_bits[1]})


def _inputs(ll: LinearLayout):
    names = ll.in_dims
    for values in itertools.product(*(range(ll.in_size(d)) for d in names)):
        yield dict(zip(names, values))


@settings(max_examples=80, deadline=None)
@given(bijective_layouts())
def test_bijective_layouts_invert(ll):
    assert ll.is_bijective()
    inv = ll.invert()
    for x in _inputs(ll):
        y = ll.apply(**x)
        assert inv.apply(**dict(zip(ll.out_dims, y))) == tuple(x[d] for d in ll.in_dims)
    # the composition with the inverse is the identity
    ident = ll.compose(inv)
    for x in _inputs(ll):
        assert ident.apply(**x) == tuple(x[d] for d in ll.in_dims)


def test_broadcast_layout_is_not_injective():
    ll = blocked((4, 4), (1, 1), (8, 4), (1, 1), (1, 0))  # 32 lanes over 16 elements
    assert ll.is_surjective() and not ll.is_injective()
    with pytest.raises(LayoutError, match="not bijective"):
        ll.invert()


def test_compose_checks_dims_and_applies_in_order():
    a = blocked((16, 16), (1, 1), (4, 8), (2, 1), (1, 0))
    swap = LinearLayout(
        {"dim0": [(0, 1), (0, 2), (0, 4), (0, 8)], "dim1": [(1, 0), (2, 0), (4, 0), (8, 0)]},
        {"dim0": 16, "dim1": 16},
    )
    t = a.compose(swap)
    for x in _inputs(a):
        r, c = a.apply(**x)
        assert t.apply(**x) == (c, r)
    with pytest.raises(LayoutError, match="dim0"):
        swap.compose(blocked((4, 4), (1, 1), (4, 8), (1, 1), (1, 0)))


def test_apply_rejects_unknown_inputs():
    ll = nvidia_mma_v2((16, 8), (1, 1))
    with pytest.raises(LayoutError, match="valid choices: register, lane, warp, block"):
        ll.apply(thread=3)
    with pytest.raises(LayoutError, match="lane=32"):
        ll.apply(lane=32)


# --------------------------------------------------------------------- symbolic


@pytest.mark.parametrize("kind", ["bv", "int"])
def test_apply_symbolic_matches_apply(kind):
    ll = amd_mfma((64, 64), (2, 2), instr=(32, 32))
    if kind == "bv":
        r, ln, w = z3.BitVecs("r l w", 16)
    else:
        r, ln, w = z3.Ints("r l w")
    row, col = ll.apply_symbolic(register=r, lane=ln, warp=w)

    def val(v):
        return z3.BitVecVal(v, 16) if kind == "bv" else z3.IntVal(v)

    for reg, lane, warp in [(0, 0, 0), (5, 33, 1), (15, 63, 3), (7, 12, 2), (10, 40, 0)]:
        sub = [(r, val(reg)), (ln, val(lane)), (w, val(warp))]
        got = tuple(z3.simplify(z3.substitute(t, *sub)).as_long() for t in (row, col))
        assert got == ll.apply(register=reg, lane=lane, warp=warp)


def test_apply_symbolic_names_the_thread_of_an_element():
    # the verifier's use: which (warp, lane, register) holds element (37, 50)?
    ll = nvidia_wgmma_acc((128, 128), (4, 1), (16, 64, 16))
    r, ln, w = z3.BitVecs("r l w", 8)
    row, col = ll.apply_symbolic(register=r, lane=ln, warp=w)
    s = z3.Solver()
    s.add(z3.ULT(r, ll.in_size("register")), z3.ULT(ln, 32), z3.ULT(w, 4), row == 37, col == 50)
    assert s.check() == z3.sat
    m = s.model()
    reg, lane, warp = (m.eval(v).as_long() for v in (r, ln, w))
    assert ll.apply(register=reg, lane=lane, warp=warp) == (37, 50)
    s.add(z3.Or(r != reg, ln != lane, w != warp))
    assert s.check() == z3.unsat  # the accumulator holds each element exactly once
