"""Capture a PyTorch module as a shape-annotated torch.fx graph, on meta tensors.

The module is built and its example inputs are drawn under `torch.device("meta")`, so
parameters and inputs have shapes and dtypes but no storage: capturing KernelBench's
level1/36 (7.5 GB of inputs at full size) allocates nothing. `torch.fx.symbolic_trace`
records the forward; `ShapeProp` runs it once on the meta inputs, which fills every node's
`meta["tensor_meta"]` (shape, dtype, strides) through PyTorch's meta kernels.

A forward whose control flow depends on tensor values (`if x.sum() > 0`) cannot be traced
symbolically, and an op with no meta kernel cannot be shape-propagated; both raise
`CaptureError` naming the module and the cause.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from argus_core.errors import ConfigError


class CaptureError(ConfigError):
    """The module could not be captured as a graph (tracing or shape propagation failed)."""

    stage = "capture"


def _meta(x: Any) -> Any:
    import torch

    if isinstance(x, torch.Tensor) and x.device.type != "meta":
        return torch.empty_like(x, device="meta")
    return x


def capture(
    build: Callable[[], Any], make_inputs: Callable[[], Sequence[Any]], name: str = "module"
) -> tuple[Any, list[Any]]:
    """(graph module, meta inputs): `build()` and `make_inputs()` run under the meta device,
    the module is put in eval mode, traced with torch.fx and shape-propagated. Raises
    CaptureError naming `name` and why when it cannot be."""
    import torch
    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp

    try:
        with torch.device("meta"):
            model = build()
            inputs = [_meta(x) for x in make_inputs()]
    except Exception as exc:
        raise CaptureError(f"{name}: building on the meta device failed: {_why(exc)}") from exc
    if isinstance(model, torch.nn.Module):
        model = model.eval()
    try:
        gm = torch.fx.symbolic_trace(model)
    except Exception as exc:
        raise CaptureError(f"{name}: torch.fx cannot trace the forward: {_why(exc)}") from exc
    try:
        with torch.no_grad():
            ShapeProp(gm).propagate(*inputs)
    except Exception as exc:
        raise CaptureError(
            f"{name}: shape propagation on meta tensors failed: {_why(exc)}"
        ) from exc
    return gm, inputs


def capture_task(module: Any, name: str = "task") -> tuple[Any, list[Any]]:
    """`capture` of a KernelBench-format module: `Model(*get_init_inputs())` run on
    `get_inputs()`."""
    return capture(
        lambda: module.Model(*list(module.get_init_inputs())),
        lambda: list(module.get_inputs()),
        name,
    )


def _why(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]
