"""KernelBench-format tasks, a plugin (`kernel=kernelbench`): task files, their reference,
candidate checks, the template front, and fast_p (docs/kernelbench.md)."""

from __future__ import annotations

from typing import Any

from argus_core.hookspecs import hookimpl
from argus_plugins.kernels.kernelbench import lower_more  # noqa: F401  (registers its lowerings with match)
from argus_plugins.kernels.kernelbench.family import KernelBenchFamily

__all__ = ["KernelBenchFamily", "argus_register_kernels"]


@hookimpl
def argus_register_kernels() -> list[Any]:
    return [KernelBenchFamily()]
