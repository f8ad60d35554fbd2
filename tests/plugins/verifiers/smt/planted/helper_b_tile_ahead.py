"""Planted bug: a helper returns the operand tiles of K step k, with b's tile one step ahead."""

# ruff: noqa: F821
from argus_plugins.dsl.tile import lang as al


def k_tiles(a, b, pm, pn, k, BM, BN, BK):
    return al.load(a.tile(BM, BK)[pm, k]), al.load(b.tile(BK, BN)[k + 1, pn])  # root cause


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
    pm, pn = al.program_ids(al.cdiv(c.shape, (BM, BN)), order=al.grouped(GROUP))
    acc = al.zeros((BM, BN), al.f32)
    for k in al.range(al.cdiv(a.shape[1], BK)):
        x, y = k_tiles(a, b, pm, pn, k, BM, BN, BK)
        acc = al.dot(x, y, acc)  # <- violated: dot_contract
    al.store(c.tile(BM, BN)[pm, pn], acc.to(c.dtype))
