"""The flash-attention family: `family.py` (reference side) and `kernel.py` (the DSL kernel)."""

from argus_core.kernels.attention.family import AttentionFamily

__all__ = ["AttentionFamily"]
