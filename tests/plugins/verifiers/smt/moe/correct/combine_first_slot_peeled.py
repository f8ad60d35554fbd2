"""Correct: the combine peels the first slot (acc starts as slot 0, the loop adds slots 1
to K - 1); still each slot exactly once."""

# ruff: noqa: F821
# kept line for line like kernel.py (counterexamples cite lines): not formatted
# fmt: off
from argus_plugins.dsl.tile import lang as al

KERNEL = "moe_combine"


@al.kernel
def moe_combine(y: al.Tensor["K", "T", "H"], out: al.Tensor["T", "H"],
                BT: al.constexpr, BH: al.constexpr):
    pt, ph = al.program_ids((al.cdiv(out.shape[0], BT), al.cdiv(out.shape[1], BH)))
    acc = al.summand(al.load(y[0].tile(BT, BH)[pt, ph]), 0).to(al.f32)
    for s in al.range(1, y.shape[0]):
        acc = acc + al.summand(al.load(y[s].tile(BT, BH)[pt, ph]), 0).to(al.f32)
    al.store(out.tile(BT, BH)[pt, ph], acc.to(out.dtype))
