"""Row softmax in the Argus tile DSL: y[r, :] = softmax(x[r, :]), computed in fp32.

One program owns BM whole rows: a row fits in one BN-wide tile (`al.requires(N <= BN)`),
so the max and the sum need no loop. Columns past N load as -inf, so they add exp(-inf) = 0
to the sum; rows past M are masked at the store. The verifier proves that every output
element lands at its own coordinate, once, and that the grid covers every row.
"""

# ruff: noqa: F821  (tensor annotations name shape symbols, not Python names)

from argus_plugins.dsl.tile import lang as al


@al.kernel
def row_softmax(x: al.Tensor["M", "N"], y: al.Tensor["M", "N"], BM: al.constexpr, BN: al.constexpr):
    (pm,) = al.program_ids((al.cdiv(x.shape[0], BM),))
    al.requires(x.shape[1] <= BN)  # one tile spans a row
    t = al.load(x.tile(BM, BN)[pm, 0], other=float("-inf")).to(al.f32)
    m = al.max(t, 1)
    e = al.exp(t - m[:, None])
    s = al.sum(e, 1)
    al.store(y.tile(BM, BN)[pm, 0], (e / s[:, None]).to(y.dtype))
