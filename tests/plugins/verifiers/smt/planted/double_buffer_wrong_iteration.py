"""Planted bug: the register double buffer prefetches two tiles ahead, so the tile consumed at iteration k is tile k + 1."""

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
        nxt = al.load(b.tile(BK, BN)[k + 2, pn])  # root cause: should be k + 1
        x = al.load(a.tile(BM, BK)[pm, k])
        acc = al.dot(x, cur, acc)  # <- violated: dot_contract
        cur = nxt
    al.store(c.tile(BM, BN)[pm, pn], acc.to(c.dtype))
