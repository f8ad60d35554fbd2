"""Planted bug: the store mask drops the last row (< M - 1)."""

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
        x = al.load(a.tile(BM, BK)[pm, k])
        y = al.load(b.tile(BK, BN)[k, pn])
        acc = al.dot(x, y, acc)

    cv = c.tile(BM, BN)[pm, pn]
    last_row = cv.coord(0) < c.shape[0] - 1  # root cause: should be < M
    mask = last_row & (cv.coord(1) < c.shape[1])
    al.store(cv, acc.to(c.dtype), mask=mask, boundary=False)  # <- violated: store_cover
