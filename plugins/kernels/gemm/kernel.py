"""GEMM in the Argus tile DSL: C[M, N] = A[M, K] @ B[K, N], fp32 accumulation.

Tiles are views made by dividing each tensor's layout; loads outside the tensor are masked
by the views themselves, so M, N and K need not be multiples of the tile.
"""

from argus_plugins.dsl.tile import lang as al


@al.kernel
def gemm(a: al.Tensor["M", "K"], b: al.Tensor["K", "N"], c: al.Tensor["M", "N"],
         BM: al.constexpr, BN: al.constexpr, BK: al.constexpr, GROUP: al.constexpr):
    pm, pn = al.program_ids(al.cdiv(c.shape, (BM, BN)), order=al.grouped(GROUP))
    acc = al.zeros((BM, BN), al.f32)
    for k in al.range(al.cdiv(a.shape[1], BK)):
        x = al.load(a.tile(BM, BK)[pm, k])
        y = al.load(b.tile(BK, BN)[k, pn])
        acc = al.dot(x, y, acc)
    al.store(c.tile(BM, BN)[pm, pn], acc.to(c.dtype))


# Split-K (policy constant SPLIT): for skinny GEMMs (M <= 128) the output has too few tiles
# to fill the GPU, so the K loop is cut into SPLIT ranges run by separate programs. Each adds
# its fp32 partial tile into the zero-filled workspace `ws` atomically (the verifier proves
# every k lands in every output element exactly once across the splits); `gemm_cast` then
# rounds the workspace to C's dtype. The family's `program` runs the two in order.
@al.kernel
def gemm_splitk(a: al.Tensor["M", "K"], b: al.Tensor["K", "N"], ws: al.Tensor["M", "N"],
                BM: al.constexpr, BN: al.constexpr, BK: al.constexpr, SPLIT: al.constexpr):
    pm, pn, ps = al.program_ids((al.cdiv(ws.shape[0], BM), al.cdiv(ws.shape[1], BN), SPLIT))
    lo, hi = al.split_range(al.cdiv(a.shape[1], BK), SPLIT, ps)
    acc = al.zeros((BM, BN), al.f32)
    for k in al.range(lo, hi):
        x = al.load(a.tile(BM, BK)[pm, k])
        y = al.load(b.tile(BK, BN)[k, pn])
        acc = al.dot(x, y, acc)
    al.atomic_add(ws.tile(BM, BN)[pm, pn], acc)


@al.kernel
def gemm_cast(ws: al.Tensor["M", "N"], c: al.Tensor["M", "N"], BM: al.constexpr, BN: al.constexpr):
    pm, pn = al.program_ids(al.cdiv(c.shape, (BM, BN)))
    al.store(c.tile(BM, BN)[pm, pn], al.load(ws.tile(BM, BN)[pm, pn]).to(c.dtype))
