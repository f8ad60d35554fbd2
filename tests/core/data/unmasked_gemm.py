"""A GEMM without boundary masks: right only where the tiles divide the shape.

Proved for every shape it is right for when the run declares that domain
(`kernel.domain={M: {multiple_of: 64}, N: {multiple_of: 64}, K: {multiple_of: 32}}` with
BM=64, BN=64, BK=32); without it the verifier gives a counterexample (a read past K).
A row-major grid: the grouped order's program-id arithmetic over symbolic tile counts is
more than z3 settles within the verifier's time limit.
"""

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
):
    pm, pn = al.program_ids(al.cdiv(c.shape, (BM, BN)))
    acc = al.zeros((BM, BN), al.f32)
    for k in al.range(al.cdiv(a.shape[1], BK)):
        x = al.load(a.tile(BM, BK)[pm, k], boundary=False)
        y = al.load(b.tile(BK, BN)[k, pn], boundary=False)
        acc = al.dot(x, y, acc)
    al.store(c.tile(BM, BN)[pm, pn], acc.to(c.dtype), boundary=False)
