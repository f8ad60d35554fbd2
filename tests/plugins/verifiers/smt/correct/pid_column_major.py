"""Correct variant: programs walk the tile grid column-major, from a flat program id split
by hand (pm = pid % grid_m, pn = pid // grid_m)."""

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
    gm = al.cdiv(c.shape[0], BM)
    (pid,) = al.program_ids((gm * al.cdiv(c.shape[1], BN),))
    pm = pid % gm
    pn = pid // gm
    acc = al.zeros((BM, BN), al.f32)
    for k in al.range(al.cdiv(a.shape[1], BK)):
        x = al.load(a.tile(BM, BK)[pm, k])
        y = al.load(b.tile(BK, BN)[k, pn])
        acc = al.dot(x, y, acc)
    al.store(c.tile(BM, BN)[pm, pn], acc.to(c.dtype))
