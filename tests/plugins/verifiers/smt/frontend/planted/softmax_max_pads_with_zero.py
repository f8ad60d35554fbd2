# Planted bug (softmax template, emitted by match.match for tests/kernelbench_tasks/level1/5): the row tile is loaded without other=-inf: columns past N read 0 and enter the row max
# tiles: ROWS=4, BN=128
# ruff: noqa: F821, F841, B023
"""KernelBench task level1/5: softmax(x, dim=-1) (template `softmax`, emitted by argus).

y[M, N] = softmax of each row of x (the launcher passes [rows, N] views). One program
holds ROWS whole rows (BN >= N is fixed by the task), so the row max and sum need no loop.
"""

from argus_plugins.dsl.tile import lang as al


@al.kernel
def kb_kernel(x: al.Tensor["M", "N"], y: al.Tensor["M", "N"], ROWS: al.constexpr, BN: al.constexpr):
    (pm,) = al.program_ids((al.cdiv(x.shape[0], ROWS),))
    al.requires(x.shape[1] <= BN)  # one tile spans a row: the family fixes BN >= N
    t = al.load(x.tile(ROWS, BN)[pm, 0]).to(al.f32)  # root cause
    e = al.exp(t - al.max(t, 1)[:, None])  # <- violated: reduce_masked
    out = e / al.sum(e, 1)[:, None]
    al.store(y.tile(ROWS, BN)[pm, 0], out.to(y.dtype))
