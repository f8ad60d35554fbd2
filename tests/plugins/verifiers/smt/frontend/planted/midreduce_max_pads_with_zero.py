# Planted bug (midreduce template, emitted by match.match for tests/kernelbench_tasks/level1/15): the max over the middle dim reads 0 past R (no other=-inf)
# tiles: BR=32, BC=32
# ruff: noqa: F821, F841, B023
"""KernelBench task level1/15: amax(x, dim=1, keepdim=False) (template `midreduce`, emitted by argus).

y = amax of x[A, R, C] over its middle dim R. One program reduces a 1 x BR x BC block
holding whole columns (BR >= R is fixed by the task); elements outside x read the
reduction's neutral value.
"""

from argus_plugins.dsl.tile import lang as al


@al.kernel
def kb_kernel(
    x: al.Tensor["A", "R", "C"], y: al.Tensor["A", "C"], BR: al.constexpr, BC: al.constexpr
):
    pa, pc = al.program_ids((x.shape[0], al.cdiv(x.shape[2], BC)))
    al.requires(x.shape[1] <= BR)  # one tile spans the reduced dim: the family fixes BR >= R
    t = al.load(x.tile(1, BR, BC)[pa, 0, pc]).to(al.f32)  # root cause
    # the reduced dim's index at every element (argmax, argmin)
    r = (
        al.zeros((1, BR, BC), al.i32)
        + (al.zeros((1, BR), al.i32) + al.indices((1, BR))[1])[:, :, None]
    )
    out = al.max(t, 1)  # <- violated: reduce_masked
    al.store(y.tile(1, BC)[pa, pc], out.to(y.dtype))
