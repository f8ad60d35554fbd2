"""The `row_softmax` kernel family's reference side: inputs, PyTorch reference, FLOPs,
bytes, tolerance, baseline. The DSL kernel is `kernel.py` beside this file.

`DSLKernelFamily` (argus_core.family) reads that file and gives every optional member of
`protocols.KernelFamily` its default (one kernel, the run's dtype, DSL candidates checked
by the generic worker); this family overrides `baselines` only."""

from __future__ import annotations

from typing import Any

from argus_core.errors import ConfigError, choices_error
from argus_core.evaluate.dtypes import element_bytes, torch_dtype
from argus_core.family import DSLKernelFamily

# (atol, rtol) per output dtype. Outputs lie in [0, 1]; a correct kernel differs from the
# fp32 reference by the final rounding (2^-8 relative for bf16, 2^-11 for fp16) and by
# exp's last bits, while a lost column or a row normalized by another row's sum moves
# elements by far more than these.
TOLERANCES: dict[str, tuple[float, float]] = {
    "bf16": (1e-2, 1e-2),
    "fp16": (2e-3, 1e-2),
    "fp32": (1e-5, 1e-4),
}

# per element: max, subtract, exp, sum, divide (exp counted as one operation)
FLOPS_PER_ELEMENT = 5.0


class RowSoftmaxFamily(DSLKernelFamily):
    """y[M, N] = softmax(x[M, N], dim=-1), in fp32, stored in x's dtype."""

    name = "row_softmax"
    entry = "row_softmax"
    outputs: tuple[str, ...] = ("y",)

    @staticmethod
    def _dims(shape: dict[str, int]) -> tuple[int, int]:
        missing = [k for k in ("M", "N") if k not in shape]
        if missing:
            raise ConfigError(f"row_softmax shape {shape} lacks {missing}; its shape has M, N")
        return int(shape["M"]), int(shape["N"])

    def make_inputs(
        self, shape: dict[str, int], dtype: str, seed: int, device: str
    ) -> dict[str, Any]:
        """x [M, N] random normal times 4 (so exp spans many octaves and a missing max
        shift overflows in bf16), y [M, N] uninitialized. Drawn on the CPU from `seed`."""
        import torch

        m, n = self._dims(shape)
        gen = torch.Generator(device="cpu").manual_seed(int(seed))
        x = 4.0 * torch.randn(m, n, generator=gen, dtype=torch.float32)
        x = x.to(torch_dtype(dtype))
        y = torch.empty(m, n, dtype=x.dtype)
        return {"x": x.to(device), "y": y.to(device)}

    def reference(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """torch.softmax of the fp32 upcast along the last dim, cast to y's dtype."""
        import torch

        x, y = inputs["x"], inputs["y"]
        return {"y": torch.softmax(x.float(), dim=-1).to(y.dtype)}

    def baselines(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """The library to beat: PyTorch's fused softmax kernel."""
        import torch

        x = inputs["x"]
        return {"torch.softmax": lambda: torch.softmax(x, dim=-1)}

    def flops(self, shape: dict[str, int]) -> float:
        m, n = self._dims(shape)
        return FLOPS_PER_ELEMENT * m * n

    def bytes(self, shape: dict[str, int], dtype: str) -> float:
        """x read once, y written once: the least a row softmax must move."""
        m, n = self._dims(shape)
        return float(2 * m * n * element_bytes(dtype))

    def tolerance(self, dtype: str) -> tuple[float, float]:
        if dtype not in TOLERANCES:
            raise ConfigError(choices_error("row_softmax dtype", dtype, TOLERANCES))
        return TOLERANCES[dtype]
