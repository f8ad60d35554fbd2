"""Correct twin: hand-written grouped ordering."""

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
    pid = al.program_ids((al.cdiv(c.shape[0], BM) * al.cdiv(c.shape[1], BN),))[0]
    num_m, num_n = al.cdiv(c.shape[0], BM), al.cdiv(c.shape[1], BN)
    in_group = GROUP * num_n
    first = (pid // in_group) * GROUP
    size = al.minimum(num_m - first, GROUP)

    pm = first + (pid % in_group) % size
    pn = (pid % in_group) // size

    acc = al.zeros((BM, BN), al.f32)
    for k in al.range(al.cdiv(a.shape[1], BK)):
        x = al.load(a.tile(BM, BK)[pm, k])
        y = al.load(b.tile(BK, BN)[k, pn])
        acc = al.dot(x, y, acc)

    al.store(c.tile(BM, BN)[pm, pn], acc.to(c.dtype))
