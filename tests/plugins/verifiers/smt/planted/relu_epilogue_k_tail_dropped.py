"""Planted bug: the K loop of a GEMM with a bias + ReLU epilogue drops the ragged last tile
(the non-linear epilogue must not hide the contraction from the store)."""

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
    for k in al.range(a.shape[1] // BK):  # root cause
        x = al.load(a.tile(BM, BK)[pm, k])
        y = al.load(b.tile(BK, BN)[k, pn])
        acc = al.dot(x, y, acc)
    out = al.maximum(acc + al.load(bias.tile(BN)[pn])[None, :], 0.0)
    al.store(c.tile(BM, BN)[pm, pn], out.to(c.dtype))  # <- violated: contraction_gap
