"""Planted bug: the bias tile is read one grid width to the right, wholly past N (masked,
so every element adds 0 instead of its bias)."""

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
    r = al.load(bias.tile(BN)[pn + al.cdiv(c.shape[1], BN)])[None, :]  # root cause
    out = al.maximum(acc + r, 0.0)
    al.store(c.tile(BM, BN)[pm, pn], out.to(c.dtype))  # <- violated: store_valid
