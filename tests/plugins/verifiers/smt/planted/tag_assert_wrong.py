"""Planted bug: the user's output tag uses BN for the row stride of tiles."""

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
    pm, pn = al.program_ids(al.cdiv(c.shape, (BM, BN)), order=al.grouped(GROUP))
    acc = al.zeros((BM, BN), al.f32)
    for k in al.range(al.cdiv(a.shape[1], BK)):
        x = al.load(a.tile(BM, BK)[pm, k])
        y = al.load(b.tile(BK, BN)[k, pn])
        al.assert_tag(lambda r, kk: r < a.shape[0] + BM, x)
        acc = al.dot(x, y, acc)
    al.tag(acc, lambda i, j: (pm * BN + i, pn * BN + j), "out")  # root cause: pm * BM
    al.assert_tag_eq(acc, acc, name="coord", name_b="out")  # <- violated: assert_tag_eq
    al.store(c.tile(BM, BN)[pm, pn], acc.to(c.dtype))
