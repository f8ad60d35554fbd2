"""The GEMM kernel family, a plugin (`kernel=gemm`): `family.py` (reference side) and
`kernel.py` (the DSL kernel)."""

from __future__ import annotations

from typing import Any

from argus_core.hookspecs import hookimpl
from argus_plugins.kernels.gemm.family import GemmFamily

__all__ = ["GemmFamily", "argus_register_kernels"]


@hookimpl
def argus_register_kernels() -> list[Any]:
    return [GemmFamily()]
