"""Planted bug: split-K with n // SPLIT tiles per split and the remainder dropped."""

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
    SPLIT: al.constexpr,
):
    pm, pn, ps = al.program_ids((al.cdiv(c.shape[0], BM), al.cdiv(c.shape[1], BN), SPLIT))
    n = al.cdiv(a.shape[1], BK)
    per = n // SPLIT  # whole tiles per split; the last split also takes the remainder
    lo = ps * per
    hi = (ps + 1) * per  # root cause: the last split must take the remainder
    acc = al.zeros((BM, BN), al.f32)
    for k in al.range(lo, hi):
        x = al.load(a.tile(BM, BK)[pm, k])
        y = al.load(b.tile(BK, BN)[k, pn])
        acc = al.dot(x, y, acc)
    al.atomic_add(c.tile(BM, BN)[pm, pn], acc)  # <- violated: contraction_start
