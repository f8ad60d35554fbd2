# Planted bug (conv template, emitted by match.match for tests/kernelbench_tasks/level1/17): the flat input position multiplies the row by the height, not the width
# tiles: BP=128, BC=16, BK=16
# ruff: noqa: F821, F841, B023
"""KernelBench task level1/17: conv (template `conv`, emitted by argus).

Conv2d as an implicit GEMM per channel group: the output [N, G, P, OC/G] (the launcher
passes the channels-last view of the [N, OC, *out] result, P the flattened output
positions) is a GEMM of the gathered input rows and the weight, one BP x BC block of
positions x output channels per program. For each kernel tap the input position of every
output position is computed (k3 s2 p1 d1, k2 s1 p2 d2, groups 1); rows whose position falls outside the input
(padding) are masked and read 0. The input is read through its channels-last
view [N, G, S, C/G], the weight as [taps, G, C/G, OC/G] (`xs` and `ys` are the input and
output as the Model sees them: only their extents are read). Epilogue ops are fused on
the fp32 block; reductions over the channels (one block spans them all) store [N, 1, P].
"""

from argus_plugins.dsl.tile import lang as al


@al.kernel
def kb_kernel(
    x: al.Tensor["N", "G", "S", "CG"],
    w: al.Tensor["T", "G", "CG", "OCG"],
    vec0: al.Tensor["G", "OCG"],
    y: al.Tensor["N", "G", "P", "OCG"],
    xs: al.Tensor["N", "C", "I0", "I1"],
    ys: al.Tensor["N", "OC", "O0", "O1"],
    BP: al.constexpr,
    BC: al.constexpr,
    BK: al.constexpr,
):
    P = ys.shape[2] * ys.shape[3]
    pz, pp, pc = al.program_ids((ys.shape[0] * 1, al.cdiv(P, BP), al.cdiv(12, BC)))
    (i,) = al.indices((BP,))
    p = al.zeros((BP,), al.i32) + (pp * BP + i)
    inrow = p < P
    al.requires(x.shape[1].eq(1))
    al.requires(x.shape[3].eq(5))
    al.requires(xs.shape[1].eq(5))
    al.requires(ys.shape[1].eq(12))
    al.requires(w.shape[0].eq(6))
    al.requires(w.shape[1].eq(1))
    al.requires(w.shape[2].eq(5))
    al.requires(w.shape[3].eq(12))
    al.requires(y.shape[1].eq(1))
    al.requires(y.shape[3].eq(12))
    al.requires(y.shape[2].eq(P))
    al.requires(y.shape[0].eq(ys.shape[0]))
    o0 = p // (ys.shape[3])
    o1 = p % ys.shape[3]
    acc = al.zeros((BP, BC), al.f32)
    for kk in al.range(6):
        k = 0
        t0 = (kk) // 2
        t1 = (kk) % 2
        s0 = o0 * 2 + (t0 * 1 - 1)
        s1 = o1 * 1 + (t1 * 2 - 2)
        ok = inrow & (s0 >= 0) & (s0 < xs.shape[2]) & (s1 >= 0) & (s1 < xs.shape[3])
        src = (s0) * xs.shape[2] + s1  # root cause
        a = al.rows_for(  # <- violated: rows_for
            al.load(x[pz // 1, pz % 1].rows(src).tile(BK)[k], mask=ok),
            p,
            lambda q: (
                ((q // (ys.shape[3])) * 2 + (t0 * 1 - 1)) * xs.shape[3]
                + ((q % ys.shape[3]) * 1 + (t1 * 2 - 2))
            ),
        )
        b = al.load(w[kk, pz % 1].tile(BK, BC)[k, pc])
        acc = al.dot(a.to(al.f32), b.to(al.f32), acc)

    vec0_t = al.load(vec0[pz % 1].tile(BC)[pc]).to(al.f32)[None, :]
    acc = acc + vec0_t
    out = acc
    al.store(y[pz // 1, pz % 1].tile(BP, BC)[pp, pc], out.to(y.dtype))
