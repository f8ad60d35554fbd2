# Planted bug (matmul_rows template, emitted by match.match for tests/kernelbench_tasks/level2/8): the group norm's affine weight is read from the next block of channels (masked: 0)
# tiles: BM=16, BN=64, BK=16
# ruff: noqa: F821, F841, B023
"""KernelBench task level2/8: linear -> group_norm -> hardtanh (template `matmul_rows`, emitted by argus).

C = epilogue(A[M, K] @ B + bias) where the epilogue reduces or normalizes whole rows of the
product (softmax, logsumexp, sum, max over N): one program computes BM whole rows (BN >= N
is fixed by the task), fp32 accumulation, reductions read only the live columns.
"""

from argus_plugins.dsl.tile import lang as al


@al.kernel
def kb_kernel(
    a: al.Tensor["M", "K"],
    w: al.Tensor["N", "K"],
    vec0: al.Tensor["N"],
    vec1: al.Tensor["N"],
    vec2: al.Tensor["N"],
    c: al.Tensor["M", "N"],
    BM: al.constexpr,
    BN: al.constexpr,
    BK: al.constexpr,
):
    (pm,) = al.program_ids((al.cdiv(a.shape[0], BM),))
    al.requires(w.shape[0] <= BN)  # one tile spans a row: the family fixes BN >= N
    pn = 0
    acc = al.zeros((BM, BN), al.f32)
    for k in al.range(al.cdiv(a.shape[1], BK)):
        x = al.load(a.tile(BM, BK)[pm, k])
        y = al.load(al.permute(w.tile(BN, BK)[0, k], (1, 0)))
        acc = al.dot(x, y, acc)
    _, col = al.indices((BM, BN))
    live = col < w.shape[0]
    ncols = w.shape[0]
    vec0_t = al.load(vec0.tile(BN)[0]).to(al.f32)[None, :]
    acc = acc + vec0_t
    vec1_t = al.load(vec1.tile(BN)[1]).to(al.f32)[None, :]  # root cause
    vec2_t = al.load(vec2.tile(BN)[0]).to(al.f32)[None, :]
    e0_m0 = al.sum(al.where(col >= 0, al.where(col < 12, acc, 0.0), 0.0), 1) / 12.0
    e0_m1 = al.sum(al.where(col >= 12, al.where(col < 24, acc, 0.0), 0.0), 1) / 12.0
    e0_m2 = al.sum(al.where(col >= 24, al.where(col < 36, acc, 0.0), 0.0), 1) / 12.0
    e0_m3 = al.sum(al.where(col >= 36, al.where(col < 48, acc, 0.0), 0.0), 1) / 12.0
    e0_d = acc - al.where(
        col < 12,
        e0_m0[:, None],
        al.where(col < 24, e0_m1[:, None], al.where(col < 36, e0_m2[:, None], e0_m3[:, None])),
    )
    e0_v0 = al.sum(al.where(col >= 0, al.where(col < 12, e0_d * e0_d, 0.0), 0.0), 1) / 12.0
    e0_v1 = al.sum(al.where(col >= 12, al.where(col < 24, e0_d * e0_d, 0.0), 0.0), 1) / 12.0
    e0_v2 = al.sum(al.where(col >= 24, al.where(col < 36, e0_d * e0_d, 0.0), 0.0), 1) / 12.0
    e0_v3 = al.sum(al.where(col >= 36, al.where(col < 48, e0_d * e0_d, 0.0), 0.0), 1) / 12.0
    e0 = (
        e0_d
        / al.sqrt(
            al.where(
                col < 12,
                e0_v0[:, None],
                al.where(
                    col < 24, e0_v1[:, None], al.where(col < 36, e0_v2[:, None], e0_v3[:, None])
                ),
            )
            + 1e-05
        )
        * vec1_t
        + vec2_t
    )
    e1 = al.minimum(al.maximum(e0, -1.5), 1.5)
    out = e1
    al.store(c.tile(BM, BN)[pm, 0], out.to(c.dtype))  # <- violated: store_valid
