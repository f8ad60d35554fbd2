"""LLM-style batched GEMM, no tags: every batch multiplies by b[0] instead of b[batch]."""
# spec: bmm

# ruff: noqa: F821
from argus_plugins.dsl.tile import lang as al


@al.kernel
def bmm(
    a: al.Tensor["B", "M", "K"],
    b: al.Tensor["B", "K", "N"],
    c: al.Tensor["B", "M", "N"],
    BM: al.constexpr,
    BN: al.constexpr,
    BK: al.constexpr,
):
    pm, pn, pb = al.program_ids((al.cdiv(c.shape[1], BM), al.cdiv(c.shape[2], BN), c.shape[0]))
    acc = al.zeros((BM, BN), al.f32)
    for k in al.range(al.cdiv(a.shape[2], BK)):
        x = al.load(a[pb].tile(BM, BK)[pm, k])
        y = al.load(b[0].tile(BK, BN)[k, pn])  # <- synth
        acc = al.dot(x, y, acc)
    al.store(c[pb].tile(BM, BN)[pm, pn], acc.to(c.dtype))
