"""KernelBench-format tasks (`kernel=kernelbench`): task files, their reference, candidate
checks, the template front, and fast_p (docs/kernelbench.md)."""

from argus_core.kernels.kernelbench.family import KernelBenchFamily

__all__ = ["KernelBenchFamily"]
