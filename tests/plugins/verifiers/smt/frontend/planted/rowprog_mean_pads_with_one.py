# Planted bug (rowprog template, emitted by match.match for tests/kernelbench_tasks/level1/12): the RMS norm's sum of squares pads the dead columns with 1, not 0
# tiles: ROWS=4, BN=64
# ruff: noqa: F821, F841, B023
"""KernelBench task level1/12: pow -> mean -> add -> sqrt -> div (template `rowprog`, emitted by argus).

A row program over [M, N] rows (the launcher passes row-major [rows, N] views; [N] vectors
broadcast along the rows): elementwise ops, reductions over the last dim and whole-row ops.
One program holds ROWS whole rows (BN >= N is fixed by the task); reductions read only the
live columns, reduced values broadcast back as [ROWS, 1].
"""

from argus_plugins.dsl.tile import lang as al


@al.kernel
def kb_kernel(
    x0: al.Tensor["M", "N"], y: al.Tensor["M", "N"], ROWS: al.constexpr, BN: al.constexpr
):
    (pm,) = al.program_ids((al.cdiv(x0.shape[0], ROWS),))
    al.requires(x0.shape[1] <= BN)  # one tile spans a row: the family fixes BN >= N
    _, col = al.indices((ROWS, BN))
    live = col < x0.shape[1]
    ncols = x0.shape[1]
    x0_t = al.load(x0.tile(ROWS, BN)[pm, 0]).to(al.f32)
    e0 = x0_t * x0_t
    e1 = al.sum(al.where(live, e0, 1.0), 1) / ncols  # <- violated: reduce_masked
    e2 = e1 + 1e-05
    e3 = al.sqrt(e2)
    e4 = x0_t / e3[:, None]
    out = e4
    al.store(y.tile(ROWS, BN)[pm, 0], out.to(y.dtype))
