"""Planted bug: even K tiles summed into one accumulator and "odd" ones into another, but
the odd loop starts at 0: tile 0 is summed twice."""

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
    even = al.zeros((BM, BN), al.f32)
    odd = al.zeros((BM, BN), al.f32)
    n = al.cdiv(a.shape[1], BK)
    for k in al.range(0, n, 2):
        x = al.load(a.tile(BM, BK)[pm, k])
        y = al.load(b.tile(BK, BN)[k, pn])
        even = al.dot(x, y, even)
    for k2 in al.range(0, n, 2):  # root cause
        x2 = al.load(a.tile(BM, BK)[pm, k2])
        y2 = al.load(b.tile(BK, BN)[k2, pn])
        odd = al.dot(x2, y2, odd)
    al.store(c.tile(BM, BN)[pm, pn], (even + odd).to(c.dtype))  # <- violated: contraction_once
