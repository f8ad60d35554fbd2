# ruff: noqa: F821  (DSL tensor annotations name shape symbols, not Python names)
"""A DSL candidate for level1/1: tensors named after the forward's arguments (A, B) and `out`."""

from argus_plugins.dsl.tile import lang as al


@al.kernel
def kb_kernel(
    A: al.Tensor["M", "K"],
    B: al.Tensor["K", "N"],
    out: al.Tensor["M", "N"],
    BM: al.constexpr,
    BN: al.constexpr,
    BK: al.constexpr,
    GROUP: al.constexpr,
):
    pm, pn = al.program_ids(al.cdiv(out.shape, (BM, BN)), order=al.grouped(GROUP))
    acc = al.zeros((BM, BN), al.f32)
    for k in al.range(al.cdiv(A.shape[1], BK)):
        acc = al.dot(al.load(A.tile(BM, BK)[pm, k]), al.load(B.tile(BK, BN)[k, pn]), acc)
    al.store(out.tile(BM, BN)[pm, pn], acc.to(out.dtype))
