# Planted bug (chanprog template, emitted by match.match for tests/kernelbench_tasks/level1/20): the batch norm's scale is read for the next channel block (past the channels: masked, 0)
# tiles: BP=64, BC=16
# ruff: noqa: F821, F841, B023
"""KernelBench task level1/20: pow -> mean -> add -> sqrt -> div -> batch_norm (template `chanprog`, emitted by argus).

A channel program over an [N, C, *S] input read through its channels-last view [N, 1, P, C]
(P the flattened positions): one BP x BC block of positions x channels per program (BC
spans every channel), elementwise ops, per-channel vectors broadcast along the positions,
BatchNorm in eval, and reductions or softmax over the channels (dim 1, the block's
columns); a reduced result is stored as [N, 1, P].
"""

from argus_plugins.dsl.tile import lang as al


@al.kernel
def kb_kernel(
    x: al.Tensor["N", "G", "P", "OCG"],
    vec0: al.Tensor["G", "OCG"],
    vec1: al.Tensor["G", "OCG"],
    vec2: al.Tensor["G", "OCG"],
    vec3: al.Tensor["G", "OCG"],
    y: al.Tensor["N", "G", "P", "OCG"],
    ys: al.Tensor["N", "OC", "O0", "O1"],
    BP: al.constexpr,
    BC: al.constexpr,
):
    P = ys.shape[2] * ys.shape[3]
    pz, pp, pc = al.program_ids((ys.shape[0], al.cdiv(P, BP), al.cdiv(12, BC)))
    al.requires(x.shape[1].eq(1))
    al.requires(x.shape[3].eq(12))
    al.requires(ys.shape[1].eq(12))
    al.requires(x.shape[0].eq(ys.shape[0]))
    al.requires(x.shape[2].eq(P))
    al.requires(y.shape[1].eq(1))
    al.requires(y.shape[3].eq(12))
    al.requires(y.shape[2].eq(P))
    al.requires(y.shape[0].eq(ys.shape[0]))
    _, col = al.indices((BP, BC))
    clive = col < 12
    acc = al.load(x[pz, 0].tile(BP, BC)[pp, pc]).to(al.f32)
    vec0_t = al.load(vec0[pz % 1].tile(BC)[pc]).to(al.f32)[None, :]
    vec1_t = al.load(vec1[pz % 1].tile(BC)[pc]).to(al.f32)[None, :]
    vec2_t = al.load(vec2[pz % 1].tile(BC)[pc + 1]).to(al.f32)[None, :]  # root cause
    vec3_t = al.load(vec3[pz % 1].tile(BC)[pc]).to(al.f32)[None, :]
    e0 = acc * acc
    e1 = al.sum(al.where(clive, e0, 0.0), 1) / 12.0
    e2 = e1 + 1e-05
    e3 = al.sqrt(e2)
    e4 = acc / e3[:, None]
    e5 = ((e4 - vec0_t) / al.sqrt(vec1_t + 1e-05)) * vec2_t + vec3_t
    out = e5
    al.store(y[pz // 1, pz % 1].tile(BP, BC)[pp, pc], out.to(y.dtype))  # <- violated: store_valid
