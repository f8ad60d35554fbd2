# Planted bug (elementwise template, emitted by match.match for tests/kernelbench_tasks/level1/8): the second operand's tile indices are swapped
# tiles: BR=16, BC=32
# ruff: noqa: F821, F841, B023
"""KernelBench task level1/8: add -> mul (template `elementwise`, emitted by argus).

y = f(x0, x1, ...) elementwise over same-shaped tensors seen as [R, C] (the launcher passes
row-major 2-D views), one BR x BC tile per program.
"""

from argus_plugins.dsl.tile import lang as al


@al.kernel
def kb_kernel(
    x0: al.Tensor["R", "C"],
    x1: al.Tensor["R", "C"],
    x2: al.Tensor["R", "C"],
    y: al.Tensor["R", "C"],
    BR: al.constexpr,
    BC: al.constexpr,
):
    pr, pc = al.program_ids(al.cdiv(y.shape, (BR, BC)))
    v0 = al.load(x0.tile(BR, BC)[pr, pc]).to(al.f32)
    v1 = al.load(x1.tile(BR, BC)[pc, pr]).to(al.f32)  # root cause
    v2 = al.load(x2.tile(BR, BC)[pr, pc]).to(al.f32)
    e0 = v0 + v1  # <- violated: elementwise_tag
    e1 = e0 * v2
    out = e1
    al.store(y.tile(BR, BC)[pr, pc], out.to(y.dtype))
