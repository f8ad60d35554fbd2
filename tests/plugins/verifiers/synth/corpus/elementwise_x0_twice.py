"""LLM-style elementwise kernel, no tags: y = relu(x0) + 2 * x1, but x1's tile is loaded
from x0 (a copy-paste slip)."""
# spec: elementwise

# ruff: noqa: F821
from argus_plugins.dsl.tile import lang as al


@al.kernel
def kb_kernel(
    x0: al.Tensor["R", "C"],
    x1: al.Tensor["R", "C"],
    y: al.Tensor["R", "C"],
    BR: al.constexpr,
    BC: al.constexpr,
):
    pr, pc = al.program_ids(al.cdiv(y.shape, (BR, BC)))
    v0 = al.load(x0.tile(BR, BC)[pr, pc]).to(al.f32)
    v1 = al.load(x0.tile(BR, BC)[pr, pc]).to(al.f32)  # <- synth
    al.store(y.tile(BR, BC)[pr, pc], (al.maximum(v0, 0.0) + v1 * 2.0).to(y.dtype))
