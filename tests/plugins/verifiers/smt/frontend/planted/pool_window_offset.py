# Planted bug (pool template, emitted by match.match for tests/kernelbench_tasks/level1/21): the max pool's window ignores the padding (t1 * 2 for t1 * 2 - 1)
# tiles: BP=32, BC=16
# ruff: noqa: F821, F841, B023
"""KernelBench task level1/21: max_pool -> mul (template `pool`, emitted by argus).

MaxPool2d over the channels-last view [N, 1, S, C] of an [N, C, *S] input (S the flattened
positions): one BP x BC block of output positions x channels per program, one loop over the
window's taps (k3 s2 p1 d2, k3 s2 p1 d2). Each tap gathers the input row of every output position;
rows outside the input (padding) are masked and read -inf. The ghost `rows_for`
lets the verifier check each gathered row is the input row of the output position it is
combined into. Epilogue ops are fused on the fp32 block.
"""

from argus_plugins.dsl.tile import lang as al


@al.kernel
def kb_kernel(
    x: al.Tensor["N", "G", "S", "OCG"],
    y: al.Tensor["N", "G", "P", "OCG"],
    xs: al.Tensor["N", "C", "I0", "I1"],
    ys: al.Tensor["N", "OC", "O0", "O1"],
    BP: al.constexpr,
    BC: al.constexpr,
):
    P = ys.shape[2] * ys.shape[3]
    pz, pp, pc = al.program_ids((ys.shape[0], al.cdiv(P, BP), al.cdiv(5, BC)))
    (i,) = al.indices((BP,))
    p = al.zeros((BP,), al.i32) + (pp * BP + i)
    inrow = p < P
    al.requires(x.shape[1].eq(1))
    al.requires(x.shape[3].eq(5))
    al.requires(xs.shape[1].eq(5))
    al.requires(ys.shape[1].eq(5))
    al.requires(x.shape[0].eq(ys.shape[0]))
    al.requires(y.shape[1].eq(1))
    al.requires(y.shape[3].eq(5))
    al.requires(y.shape[2].eq(P))
    al.requires(y.shape[0].eq(ys.shape[0]))
    o0 = p // (ys.shape[3])
    o1 = p % ys.shape[3]
    acc = al.full((BP, BC), float("-inf"), al.f32)
    for kk in al.range(9):
        t0 = kk // 3
        s0 = o0 * 2 + (t0 * 2 - 1)
        t1 = (kk) % 3
        s1 = o1 * 2 + (t1 * 2)  # root cause
        ok = inrow & (s0 >= 0) & (s0 < xs.shape[2]) & (s1 >= 0) & (s1 < xs.shape[3])
        src = (s0) * xs.shape[3] + s1
        a = al.rows_for(  # <- violated: rows_for
            al.load(x[pz, 0].rows(src).tile(BC)[pc], mask=ok, other=float("-inf")).to(al.f32),
            p,
            lambda q: (
                ((q // (ys.shape[3])) * 2 + (t0 * 2 - 1)) * xs.shape[3]
                + ((q % ys.shape[3]) * 2 + (t1 * 2 - 1))
            ),
        )
        acc = al.maximum(acc, a)

    e0 = acc * 2.0
    out = e0
    al.store(y[pz // 1, pz % 1].tile(BP, BC)[pp, pc], out.to(y.dtype))
