"""Planted bug: the K loop unrolled by two without its remainder loop: an odd last tile is never summed."""

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
    for r in al.range(n // 2):  # root cause: no remainder loop after it
        x0 = al.load(a.tile(BM, BK)[pm, 2 * r])
        y0 = al.load(b.tile(BK, BN)[2 * r, pn])
        acc = al.dot(x0, y0, acc)
        x1 = al.load(a.tile(BM, BK)[pm, 2 * r + 1])
        y1 = al.load(b.tile(BK, BN)[2 * r + 1, pn])
        acc = al.dot(x1, y1, acc)
    al.store(c.tile(BM, BN)[pm, pn], acc.to(c.dtype))  # <- violated: contraction_start
