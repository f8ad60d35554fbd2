"""Planted bug: the K loop split in three, the middle loop starting one tile early: tile
n // 3 - 1 is summed twice."""

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
    n = al.cdiv(a.shape[1], BK)
    for k in al.range(n // 3):
        x = al.load(a.tile(BM, BK)[pm, k])
        y = al.load(b.tile(BK, BN)[k, pn])
        acc = al.dot(x, y, acc)
    for k2 in al.range(n // 3 - 1, 2 * n // 3):  # root cause
        x2 = al.load(a.tile(BM, BK)[pm, k2])
        y2 = al.load(b.tile(BK, BN)[k2, pn])
        acc = al.dot(x2, y2, acc)
    for k3 in al.range(2 * n // 3, n):
        x3 = al.load(a.tile(BM, BK)[pm, k3])
        y3 = al.load(b.tile(BK, BN)[k3, pn])
        acc = al.dot(x3, y3, acc)
    al.store(c.tile(BM, BN)[pm, pn], acc.to(c.dtype))  # <- violated: contraction_once
