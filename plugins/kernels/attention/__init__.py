"""The flash-attention family, a plugin (`kernel=attention`): `family.py` (reference side)
and `kernel.py` (the DSL kernel)."""

from __future__ import annotations

from typing import Any

from argus_core.hookspecs import hookimpl
from argus_plugins.kernels.attention.family import AttentionFamily

__all__ = ["AttentionFamily", "argus_register_kernels"]


@hookimpl
def argus_register_kernels() -> list[Any]:
    return [AttentionFamily()]
