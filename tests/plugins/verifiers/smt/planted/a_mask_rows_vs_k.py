"""Planted bug: a's load mask compares the row coordinate with K instead of M."""

# ruff: noqa: F821
from argus_plugins.dsl.tile import lang as al


@al.kernel
def gemm(
    a: al.Tensor["M", "K"],
    b: al.Tensor["K", "N"],
    c: al.Tensor["M", "N"],
    BM: al.constexpr,
    BN: al.constexpr,
    BK: al.constexpr,
    GROUP: al.constexpr,
):
    pm, pn = al.program_ids(al.cdiv(c.shape, (BM, BN)), order=al.grouped(GROUP))
    acc = al.zeros((BM, BN), al.f32)
    for k in al.range(al.cdiv(a.shape[1], BK)):
        av, bv = a.tile(BM, BK)[pm, k], b.tile(BK, BN)[k, pn]
        x = al.load(  # <- violated: bounds
            av, mask=(av.coord(0) < a.shape[1]) & (av.coord(1) < a.shape[1]), boundary=False
        )
        y = al.load(
            bv, mask=(bv.coord(0) < b.shape[0]) & (bv.coord(1) < b.shape[1]), boundary=False
        )
        acc = al.dot(x, y, acc)
    al.store(c.tile(BM, BN)[pm, pn], acc.to(c.dtype))
