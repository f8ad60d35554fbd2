"""The fused MoE family, a plugin (`kernel=moe`): `family.py` (reference side),
`routing.py` (routing and block alignment, the contract of the grouped GEMM) and `kernel.py`
(the DSL kernels)."""

from __future__ import annotations

from typing import Any

from argus_core.hookspecs import hookimpl
from argus_plugins.kernels.moe.family import MoEFamily

__all__ = ["MoEFamily", "argus_register_kernels"]


@hookimpl
def argus_register_kernels() -> list[Any]:
    return [MoEFamily()]
