"""The GEMM kernel family: `family.py` (reference side) and `kernel.py` (the DSL kernel)."""

from argus_core.kernels.gemm.family import GemmFamily

__all__ = ["GemmFamily"]
