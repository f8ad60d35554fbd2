# Planted bug (matmul template, emitted by match.match for tests/kernelbench_tasks/level1/3): the bias tile follows the row program id, not the column one
# tiles: BM=32, BN=32, BK=16, GROUP=4
# ruff: noqa: F821, F841, B023
"""KernelBench task level1/3: matmul -> add -> relu (template `matmul`, emitted by argus).

C[M, N] = epilogue(A[M, K] @ B + bias), fp32 accumulation; B is [K, N], or the [N, K]
weight of a Linear (or a transposed operand) read through a permuted view; an A of more
than two dims is passed as its [rows, K] view. Tiles mask the ragged edges.
"""

from argus_plugins.dsl.tile import lang as al


@al.kernel
def kb_kernel(
    a: al.Tensor["M", "K"],
    b: al.Tensor["K", "N"],
    vec0: al.Tensor["N"],
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
        acc = al.dot(x, y, acc)
    r0 = al.load(vec0.tile(BN)[pm])[None, :]  # root cause
    e0 = acc + r0  # <- violated: elementwise_tag
    e1 = al.maximum(e0, 0.0)
    out = e1
    al.store(c.tile(BM, BN)[pm, pn], out.to(c.dtype))
