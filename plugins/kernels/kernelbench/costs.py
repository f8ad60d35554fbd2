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
    name: str = "kernelbench-op"  # the calibrated models key their features by family name

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


def _metas(node: Any) -> list[Any]:
    """A node's tensor_meta entries: one per tensor of its value (max(x, dim) gives two:
    values and indices); none for a node without one."""
    meta = getattr(node, "meta", {}).get("tensor_meta")
    if meta is None:
        return []
    metas = [meta] if hasattr(meta, "shape") else list(meta)
    return [m for m in metas if hasattr(m, "shape")]


def _bytes_of(node: Any) -> int:
    """Bytes of a node's value from its tensor_meta (a tuple of tensors: all of them)."""
    return sum(
        _numel(tuple(m.shape)) * int(getattr(m.dtype, "itemsize", 4))
        for m in _metas(node)
        if hasattr(m, "dtype")
    )


def largest_numel(gm: Any) -> int:
    """Elements of the largest tensor a meta-captured graph holds: an input, a parameter or
    buffer, an intermediate or the output (what decides 32- or 64-bit offsets)."""
    sizes = [int(t.numel()) for t in [*gm.parameters(), *gm.buffers()]]
    sizes += [_numel(tuple(m.shape)) for n in gm.graph.nodes for m in _metas(n)]
    return max(sizes, default=0)


def memory_estimate(gm: Any) -> dict[str, int]:
    """Device bytes the eager Model needs on one input set, from a meta-captured graph
    (`argus_core.frontend.capture`): its inputs, parameters and buffers, its output, and
    the peak of the intermediates alive at once (each freed after its last use, as fx's
    generated forward frees them). {"inputs", "params", "output", "intermediates", "peak"}:
    "peak" is inputs + params + the largest live set (which holds the output last)."""
    nodes = list(gm.graph.nodes)
    last: dict[Any, int] = {}
    for i, n in enumerate(nodes):
        for a in n.all_input_nodes:
            last[a] = i
    inputs = sum(_bytes_of(n) for n in nodes if n.op == "placeholder")
    params = sum(int(p.numel() * p.element_size()) for p in gm.parameters())
    params += sum(int(b.numel() * b.element_size()) for b in gm.buffers())
    out_node = next(n for n in nodes if n.op == "output")
    outs = out_node.args[0]
    outs = list(outs) if isinstance(outs, list | tuple) else [outs]
    output = sum(_bytes_of(o) for o in outs if hasattr(o, "meta"))
    live: dict[Any, int] = {}
    peak = 0
    for i, n in enumerate(nodes):
        if n.op in ("call_function", "call_method", "call_module"):
            live[n] = _bytes_of(n)
            peak = max(peak, sum(live.values()))
        for a in [a for a in live if last.get(a, -1) <= i and a not in outs]:
            del live[a]
    return {"inputs": inputs, "params": params, "output": output, "intermediates": peak,
            "peak": inputs + params + peak}  # fmt: skip
