# Planted bug (rowreduce template, emitted by match.match for tests/kernelbench_tasks/level1/7): the row means are stored one row block down
# tiles: ROWS=4, BN=64
# ruff: noqa: F821, F841, B023
"""KernelBench task level1/7: mean(x, dim=-1) (template `rowreduce`, emitted by argus).

y[M] = mean of each row of x[M, N] (the launcher passes [rows, N] views). One program
reduces ROWS whole rows (BN >= N is fixed by the task); masked elements read 0.
"""

from argus_plugins.dsl.tile import lang as al


@al.kernel
def kb_kernel(x: al.Tensor["M", "N"], y: al.Tensor["M"], ROWS: al.constexpr, BN: al.constexpr):
    (pm,) = al.program_ids((al.cdiv(x.shape[0], ROWS),))
    al.requires(x.shape[1] <= BN)  # one tile spans a row: the family fixes BN >= N
    t = al.load(x.tile(ROWS, BN)[pm, 0]).to(al.f32)
    out = al.sum(t, 1) / x.shape[1]
    al.store(y.tile(ROWS)[pm + 1], out.to(y.dtype))  # <- violated: store_tag
