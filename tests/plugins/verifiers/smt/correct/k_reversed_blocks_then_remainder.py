"""Correct variant: the whole K tiles summed in reverse order, then the ragged remainder
tile (if any) in a loop of its own."""

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
    full = a.shape[1] // BK
    for r in al.range(full):
        k = full - 1 - r
        x = al.load(a.tile(BM, BK)[pm, k])
        y = al.load(b.tile(BK, BN)[k, pn])
        acc = al.dot(x, y, acc)
    for k2 in al.range(full, al.cdiv(a.shape[1], BK)):
        xr = al.load(a.tile(BM, BK)[pm, k2])
        yr = al.load(b.tile(BK, BN)[k2, pn])
        acc = al.dot(xr, yr, acc)
    al.store(c.tile(BM, BN)[pm, pn], acc.to(c.dtype))
