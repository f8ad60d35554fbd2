"""Correct twin: B stored transposed (N, K), read through a permuted view; and a permutation undone by its inverse."""

# ruff: noqa: F821
from argus_plugins.dsl.tile import lang as al


@al.kernel
def gemm(
    a: al.Tensor["M", "K"],
    bt: al.Tensor["N", "K"],
    c: al.Tensor["M", "N"],
    BM: al.constexpr,
    BN: al.constexpr,
    BK: al.constexpr,
    GROUP: al.constexpr,
):
    pm, pn = al.program_ids(al.cdiv(c.shape, (BM, BN)), order=al.grouped(GROUP))
    acc = al.zeros((BM, BN), al.f32)
    for k in al.range(al.cdiv(a.shape[1], BK)):
        x = al.load(al.permute(al.permute(a.tile(BM, BK)[pm, k], (1, 0)), (1, 0)))
        y = al.load(al.permute(bt.tile(BN, BK)[pn, k], (1, 0)))
        acc = al.dot(x, y, acc)
    al.store(c.tile(BM, BN)[pm, pn], acc.to(c.dtype))
