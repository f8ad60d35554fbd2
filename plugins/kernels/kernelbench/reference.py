"""The reference side of a KernelBench task, evaluated as KernelBench does.

The model is built once per candidate under a fixed seed (`init_seed`), so a candidate
`ModelNew` built under the same seed gets the same weights. Each trial draws fresh inputs
from its own seed; one more trial reuses the first trial's inputs permuted and rescaled, so
an answer computed ahead of time (a constant, or a tensor cached from the first inputs)
cannot pass. Tolerances follow KernelBench: fp32 1e-4, fp16/bf16 1e-2 (atol = rtol).
"""

from __future__ import annotations

import random
from typing import Any

from argus_core.errors import ConfigError, choices_error

TOLERANCES: dict[str, tuple[float, float]] = {
    "fp32": (1e-4, 1e-4),
    "fp16": (1e-2, 1e-2),
    "bf16": (1e-2, 1e-2),
}


def tolerance(dtype: str) -> tuple[float, float]:
    """(atol, rtol) for a task run in `dtype`; ConfigError for another dtype."""
    if dtype not in TOLERANCES:
        raise ConfigError(choices_error("kernelbench dtype", dtype, TOLERANCES))
    return TOLERANCES[dtype]


def set_seed(seed: int) -> None:
    import torch

    random.seed(seed)
    torch.manual_seed(seed)


def _cast(x: Any, dtype: str, device: str) -> Any:
    import torch

    from argus_core.evaluate.dtypes import torch_dtype

    if isinstance(x, torch.Tensor):
        x = x.to(device)
        return x.to(torch_dtype(dtype)) if x.is_floating_point() else x
    return x


def build_model(module: Any, init_seed: int, dtype: str, device: str) -> Any:
    """`Model(*get_init_inputs())` built under `init_seed`, in eval mode, cast and moved."""
    import torch

    from argus_core.evaluate.dtypes import torch_dtype

    set_seed(init_seed)
    model = module.Model(*list(module.get_init_inputs()))
    return (
        model.to(device=device, dtype=torch_dtype(dtype)).eval()
        if isinstance(model, torch.nn.Module)
        else model
    )


def make_inputs(module: Any, seed: int, dtype: str, device: str) -> list[Any]:
    """`get_inputs()` drawn under `seed` on `device` itself (a full-size input is never
    drawn on the host for a GPU check; "meta": shapes only), floating tensors cast to
    `dtype`."""
    import torch

    set_seed(seed)
    with torch.device(device):
        drawn = list(module.get_inputs())
    return [_cast(x, dtype, device) for x in drawn]


def perturbed(inputs: list[Any], seed: int) -> list[Any]:
    """The same inputs with every floating tensor's rows permuted and its values scaled by
    1.5: a kernel that computes rather than recalls must follow them."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point() and x.dim() >= 1:
            perm = torch.randperm(x.shape[0], generator=gen).to(x.device)
            x = (x[perm] * 1.5).contiguous()
        out.append(x)
    return out


def run_model(model: Any, inputs: list[Any]) -> Any:
    """The model's output on copies of `inputs` (a model that writes into them changes
    nothing the candidate sees), without autograd."""
    import torch

    with torch.no_grad():
        return model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
