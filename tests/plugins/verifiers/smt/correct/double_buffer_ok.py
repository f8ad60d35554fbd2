"""Correct twin: register double buffer (tile k + 1 prefetched at iteration k)."""

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
    cur = al.load(b.tile(BK, BN)[0, pn])
    for k in al.range(al.cdiv(a.shape[1], BK)):
        nxt = al.load(b.tile(BK, BN)[k + 1, pn])
        x = al.load(a.tile(BM, BK)[pm, k])
        acc = al.dot(x, cur, acc)
        cur = nxt
    al.store(c.tile(BM, BN)[pm, pn], acc.to(c.dtype))
