"""Built-in kernel families, registered with the plugin manager."""

from __future__ import annotations

from typing import Any

from argus_core.hookspecs import hookimpl
from argus_core.kernels.attention import AttentionFamily
from argus_core.kernels.gemm import GemmFamily
from argus_core.kernels.kernelbench import KernelBenchFamily
from argus_core.kernels.moe import MoEFamily


@hookimpl
def argus_register_kernels() -> list[Any]:
    return [GemmFamily(), AttentionFamily(), MoEFamily(), KernelBenchFamily()]
