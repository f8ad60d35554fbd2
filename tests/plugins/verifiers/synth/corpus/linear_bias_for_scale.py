"""LLM-style fused linear, no tags: y = (x @ w.T + bias) * scale, but the scale vector is
loaded from bias."""
# spec: linear_scale

# ruff: noqa: F821
from argus_plugins.dsl.tile import lang as al


@al.kernel
def kb_kernel(
    a: al.Tensor["M", "K"],
    w: al.Tensor["N", "K"],
    bias: al.Tensor["N"],
    scale: al.Tensor["N"],
    c: al.Tensor["M", "N"],
    BM: al.constexpr,
    BN: al.constexpr,
    BK: al.constexpr,
):
    pm, pn = al.program_ids(al.cdiv(c.shape, (BM, BN)))
    acc = al.zeros((BM, BN), al.f32)
    for k in al.range(al.cdiv(a.shape[1], BK)):
        x = al.load(a.tile(BM, BK)[pm, k])
        y = al.load(al.permute(w.tile(BN, BK)[pn, k], (1, 0)))
        acc = al.dot(x, y, acc)
    b0 = al.load(bias.tile(BN)[pn])[None, :]
    s0 = al.load(bias.tile(BN)[pn])[None, :]  # <- synth
    al.store(c.tile(BM, BN)[pm, pn], ((acc + b0) * s0).to(c.dtype))
