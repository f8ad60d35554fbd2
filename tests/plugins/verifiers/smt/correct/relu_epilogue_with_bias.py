"""Correct variant: a bias row and a ReLU applied to the accumulator before the store (the
contraction is still checked through the epilogue)."""

# ruff: noqa: F821
from argus_plugins.dsl.tile import lang as al


@al.kernel
def gemm(
    a: al.Tensor["M", "K"],
    b: al.Tensor["K", "N"],
    bias: al.Tensor["N"],
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
    out = al.maximum(acc + al.load(bias.tile(BN)[pn])[None, :], 0.0)
    al.store(c.tile(BM, BN)[pm, pn], out.to(c.dtype))
