"""Planted bug (square B tiles, BN = BK): B's tile is read through a transposed (permuted) layout and used without the inverse permutation."""

# ruff: noqa: F821
from argus_plugins.dsl.tile import lang as al


@al.kernel
def gemm(
    a: al.Tensor["M", "K"],
    b: al.Tensor["K", "N"],
    c: al.Tensor["M", "N"],
    BM: al.constexpr,
    BK: al.constexpr,
    GROUP: al.constexpr,
):
    pm, pn = al.program_ids(al.cdiv(c.shape, (BM, BK)), order=al.grouped(GROUP))
    acc = al.zeros((BM, BK), al.f32)
    for k in al.range(al.cdiv(a.shape[1], BK)):
        x = al.load(a.tile(BM, BK)[pm, k])
        y = al.load(
            al.permute(b.tile(BK, BK)[k, pn], (1, 0))
        )  # root cause: needs a second permute (1, 0)
        acc = al.dot(x, y, acc)  # <- violated: dot_contract
    al.store(c.tile(BM, BK)[pm, pn], acc.to(c.dtype))
