"""The fused MoE family: `family.py` (reference side), `routing.py` (routing and block
alignment, the contract of the grouped GEMM) and `kernel.py` (the DSL kernels)."""

from argus_core.kernels.moe.family import MoEFamily

__all__ = ["MoEFamily"]
