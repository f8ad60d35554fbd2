"""Correct variant: the two operand tiles of K step k come from a helper function."""

# ruff: noqa: F821
from argus_plugins.dsl.tile import lang as al


def k_tiles(a, b, pm, pn, k, BM, BN, BK):
    return al.load(a.tile(BM, BK)[pm, k]), al.load(b.tile(BK, BN)[k, pn])


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
        x, y = k_tiles(a, b, pm, pn, k, BM, BN, BK)
        acc = al.dot(x, y, acc)
    al.store(c.tile(BM, BN)[pm, pn], acc.to(c.dtype))
