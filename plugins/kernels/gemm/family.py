"""The GEMM kernel family's reference side: inputs, PyTorch reference, FLOPs, bytes, tolerance.

The DSL kernel itself lives beside this file in `kernel.py`; `source()` returns its text.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from argus_core.errors import ConfigError, choices_error
from argus_core.evaluate.dtypes import element_bytes, torch_dtype
from argus_core.family import DSLKernelFamily
from argus_core.ir.explicit import explicit_knobs
from argus_plugins.kernels.gemm import kernel_explicit

# (atol, rtol) per output dtype. Inputs are scaled so that every output element has unit
# variance whatever K is (see make_inputs), so one pair serves every shape: a correct
# fp32-accumulating kernel differs from the reference only by accumulation order and the
# final rounding (<= 2^-8 relative for bf16), while a wrong tile or a lost K-block moves
# elements by O(1).
TOLERANCES: dict[str, tuple[float, float]] = {
    "bf16": (1e-2, 1e-2),
    "fp16": (1e-2, 1e-2),
    # fp32 assumes an IEEE fp32 dot; a TF32 dot (NVIDIA's default) is ~1e-3 off
    "fp32": (1e-4, 1e-4),
}


class GemmFamily(DSLKernelFamily):
    """C[M, N] = A[M, K] @ B[K, N], accumulated in fp32, stored in the inputs' dtype."""

    name = "gemm"
    dtypes = tuple(TOLERANCES)
    shape_dims = (("M", 1), ("N", 1), ("K", 1))
    entry = "gemm"
    outputs: tuple[str, ...] = ("c",)

    @staticmethod
    def _dims(shape: dict[str, int]) -> tuple[int, int, int]:
        missing = [k for k in ("M", "N", "K") if k not in shape]
        if missing:
            raise ConfigError(f"gemm shape {shape} lacks {missing}; a gemm shape has M, N, K")
        return int(shape["M"]), int(shape["N"]), int(shape["K"])

    def make_inputs(
        self, shape: dict[str, int], dtype: str, seed: int, device: str
    ) -> dict[str, Any]:
        """a [M,K] and b [K,N] random normal in `dtype`, c [M,N] uninitialized.

        Drawn on the CPU from `seed` (the same numbers on every device), then moved. b is
        scaled by 1/sqrt(K) so outputs have unit variance at any K. Exact zeros, which
        would hide a kernel that skips elements, are replaced by 1.
        """
        import torch

        m, n, k = self._dims(shape)
        tdt = torch_dtype(dtype)
        gen = torch.Generator(device="cpu").manual_seed(int(seed))
        a = torch.randn(m, k, generator=gen, dtype=torch.float32)
        b = torch.randn(k, n, generator=gen, dtype=torch.float32) / math.sqrt(k)
        a, b = (torch.where(x == 0, torch.ones_like(x), x).to(tdt) for x in (a, b))
        c = torch.empty(m, n, dtype=tdt)
        return {"a": a.to(device), "b": b.to(device), "c": c.to(device)}

    def reference(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """torch.matmul of the fp32 upcasts, cast to c's dtype."""
        import torch

        a, b, c = inputs["a"], inputs["b"], inputs["c"]
        return {"c": torch.matmul(a.float(), b.float()).to(c.dtype)}

    def reference_specs(self, entry: str) -> list[tuple[dict[str, int], Any]]:
        """The data-flow spec of each kernel, derived from the reference's graph (C = A @ B,
        captured on meta tensors): split-K's workspace is that product; `gemm_cast` copies
        the workspace into C."""
        return [({}, _specs()[entry])] if entry in _specs() else []

    def explicit_spec(self, kernel: Any, consts: dict[str, int]) -> Any:
        """C = A @ B bound to the explicit-level GEMM: a [M, K], b [K, N] as the kernel's
        scalars name them."""
        from argus_core.ir import Sym
        from argus_core.spec.explicit import ExplicitSpec

        M, N, K = (Sym(n, "shape", 1) for n in ("M", "N", "K"))
        dims = {"a_0": M, "a_1": K, "b_0": K, "b_1": N}
        return ExplicitSpec(_specs()["gemm"], dims, {}, source="gemm reference (C = A @ B)")

    def baselines(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """The library to beat, as callables over these inputs: cuBLAS through torch."""
        import torch

        a, b = inputs["a"], inputs["b"]
        return {"cuBLAS (torch.matmul)": lambda: torch.matmul(a, b)}

    def entries_for(self, tiles: dict[str, int]) -> tuple[str, ...]:
        """The kernels a policy runs: split-K (a SPLIT tile) is two, otherwise `gemm`."""
        return ("gemm_splitk", "gemm_cast") if "SPLIT" in tiles else (self.entry,)

    def tensor_dtypes(self, dtype: str) -> dict[str, str]:
        """Split-K's workspace accumulates in fp32 whatever C's dtype."""
        return {"ws": "fp32"}

    def program(self, launch: Any, inputs: dict[str, Any], tiles: dict[str, int]) -> None:
        """Split-K: zero an fp32 workspace (a fill, not arithmetic), add every K range's
        partial tile into it (`gemm_splitk`), round it into C (`gemm_cast`)."""
        import torch

        if "SPLIT" not in tiles:
            launch(self.entry, inputs)
            return
        a, c = inputs["a"], inputs["c"]
        ws = torch.zeros(c.shape, dtype=torch.float32, device=c.device)
        launch("gemm_splitk", {"a": a, "b": inputs["b"], "ws": ws})
        launch("gemm_cast", {"ws": ws, "c": c})

    def tile_extents(self, shape: dict[str, int]) -> dict[str, int]:
        """BM, BN and BK cut M, N and K."""
        m, n, k = self._dims(shape)
        return {"BM": m, "BN": n, "BK": k}

    def gemm_problems(self, shape: dict[str, int], tiles: dict[str, int]) -> list[dict[str, int]]:
        """For the cost model: split-K runs SPLIT programs per output tile, each over K/SPLIT."""
        m, n, k = self._dims(shape)
        split = int(tiles.get("SPLIT", 1))
        return [{"M": m, "N": n, "K": k, "SPLIT": split}]

    def flops(self, shape: dict[str, int]) -> float:
        m, n, k = self._dims(shape)
        return 2.0 * m * n * k

    def bytes(self, shape: dict[str, int], dtype: str) -> float:
        """A and B read once, C written once: the least any GEMM must move."""
        m, n, k = self._dims(shape)
        return float((m * k + k * n + m * n) * element_bytes(dtype))

    def tolerance(self, dtype: str) -> tuple[float, float]:
        if dtype not in TOLERANCES:
            raise ConfigError(choices_error("gemm dtype", dtype, TOLERANCES))
        return TOLERANCES[dtype]

    # ------------------------------------------------------------------ the explicit level
    def explicit_kernel(self, policy: Any, target: str, shape: dict[str, int]) -> Any:
        """The explicit-level kernel (`kernel_explicit.py`) of a `level: explicit` policy."""
        return kernel_explicit.for_policy(explicit_knobs(policy), dict(policy.tiles), target)

    def explicit_launcher(self, kernel: Any, lowered: Any) -> Any:
        """Runs the lowered explicit kernel on this family's GPU inputs."""
        return kernel_explicit.launcher(kernel, lowered.source)


@functools.cache
def _specs() -> dict[str, Any]:
    import torch

    from argus_core.spec import spec_of_module

    class Matmul(torch.nn.Module):  # the reference: torch.matmul of the upcasts
        def forward(self, a, b):
            return torch.matmul(a.float(), b.float())

    class Cast(torch.nn.Module):
        def forward(self, ws):
            return ws.float()

    def mm(out: str) -> Any:
        return spec_of_module(
            Matmul,
            lambda: [torch.randn(64, 32), torch.randn(32, 48)],
            ["a", "b"],
            [out],
            name="gemm",
        )

    cast = spec_of_module(Cast, lambda: [torch.randn(64, 48)], ["ws"], ["c"], name="gemm_cast")
    return {"gemm": mm("c"), "gemm_splitk": mm("ws"), "gemm_cast": cast}
