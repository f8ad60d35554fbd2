"""FLOP and byte counts of a task graph, and the cost-model estimate of its eager PyTorch run.

Our candidate is one fused kernel: it must read each input and parameter once and write
the output once (`fused_bytes`). Eager PyTorch launches one kernel per op, each reading its
operands from and writing its result to device memory; `eager_estimate_ms` sums the
roofline time of every op at the target's sustained rates plus a launch each, the same
model (`costmodel.estimate_time`, untiled) our kernels' estimates use. Every figure here is
an estimate; on a GPU the worker measures both sides instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from argus_core.evaluate.costmodel import estimate_time
from argus_core.evaluate.dtypes import element_bytes
from argus_core.types import Policy


@dataclass
class _Work:
    """The counts of one op, in the shape `estimate_time` expects of a family."""

    f: float
    b: float

    def flops(self, shape: dict[str, int]) -> float:
        return self.f

    def bytes(self, shape: dict[str, int], dtype: str) -> float:
        return self.b

    def gemm_problems(self, shape: dict[str, int], tiles: dict[str, int]) -> list[dict[str, int]]:
        return []  # one op at the roofline, never tiled


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def _shape(x: Any) -> tuple[int, ...]:
    meta = getattr(x, "meta", {}).get("tensor_meta") if hasattr(x, "meta") else None
    if meta is not None and not hasattr(meta, "shape"):  # max/min over a dim: (values, indices)
        meta = meta[0] if meta else None
    return tuple(meta.shape) if meta is not None else ()


def op_counts(gm: Any, dtype: str) -> list[tuple[str, float, float]]:
    """(op, flops, bytes moved when run alone) of every compute node of a traced graph."""
    e = element_bytes(dtype)
    out = []
    for n in gm.graph.nodes:
        if n.op not in ("call_function", "call_method", "call_module"):
            continue
        res = _numel(_shape(n))
        operands = [a for a in n.args if hasattr(a, "meta")]
        moved = res + sum(_numel(_shape(a)) for a in operands)
        flops = float(res)
        if n.op == "call_module":
            mod = gm.get_submodule(n.target)
            params = sum(p.numel() for p in mod.parameters())
            moved += params
            if type(mod).__name__ == "Linear":
                flops = 2.0 * res * mod.in_features
            elif params:
                flops = 2.0 * res * max(1, params // max(1, res))
        elif operands and len(_shape(operands[0])) >= 2 and str(n.target) in (
            "matmul", "mm", "<built-in function matmul>", "bmm",
        ):  # fmt: skip
            flops = 2.0 * res * _shape(operands[0])[-1]
        elif getattr(n.target, "__name__", "") in ("matmul", "mm", "linear"):
            flops = 2.0 * res * (_shape(operands[0])[-1] if operands else 1)
        out.append((str(n.target), flops, float(moved * e)))
    return out


def fused_bytes(gm: Any, dtype: str) -> float:
    """Bytes a single fused kernel must move: every input and parameter once, the output once."""
    e = element_bytes(dtype)
    total = sum(_numel(_shape(n)) for n in gm.graph.nodes if n.op == "placeholder")
    total += sum(p.numel() for p in gm.parameters())
    out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    total += _numel(_shape(out)) if hasattr(out, "meta") else 0
    return float(total * e)


def eager_estimate_ms(spec: Any, gm: Any, dtype: str) -> float:
    """Estimated ms of the eager Model forward on `spec`: one launch per op."""
    return sum(
        estimate_time(spec, _Work(f, b), {}, dtype, Policy()).ms for _, f, b in op_counts(gm, dtype)
    )
