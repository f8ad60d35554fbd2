"""The `interpret` backend: Triton's interpreter on the CPU, for correctness at small shapes.

Nothing is compiled: `compile` only checks that the lowered source imports and defines the
kernel with the promised parameters. Kernels run in a child process with
TRITON_INTERPRET=1 (`argus_core.evaluate.correctness`), never in this one, because that
variable must not be set where `triton.compile` runs.

Estimates: the interpreter's own speed says nothing about a GPU kernel, so `estimate`
returns the MI300X cost model's figure (the project's default target). An offline run
then still ranks policies by what they would do on the hardware it optimizes for.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from argus_core.evaluate.costmodel import MI300X, estimate_time
from argus_core.evaluate.launch import load_kernel
from argus_core.types import CompileReport, LoweredKernel, Policy, TimingReport
from argus_plugins.backends._triton_build import check_compiler_options, check_tiles, error_text

# accepted so that a policy written for a GPU also runs here; the interpreter ignores them
POLICY_SPACE: dict[str, list[Any]] = {
    "num_warps": [1, 2, 4, 8, 16],
    "num_stages": [1, 2, 3, 4],
}
MIN_TILE = 16  # tl.dot needs every operand extent >= 16, in the interpreter too


class InterpretBackend:
    name = "interpret"
    lowering = "triton"
    # bf16 tl.dot is wrong in Triton 3.6's interpreter; the lowering upcasts operands
    lowering_options: dict[str, Any] = {"dot_upcast_fp32": True}
    spec = MI300X  # the target whose cost model `estimate` uses

    def __init__(self, workdir: str | Path | None = None):
        self.workdir = workdir

    def policy_space(self) -> dict[str, list[Any]]:
        return {k: list(v) for k, v in POLICY_SPACE.items()}

    def validate_policy(self, policy: Policy) -> None:
        """PolicyError for an option other than num_warps/num_stages, a value outside their
        lists, or a tile extent that is not a power of two >= 16."""
        check_compiler_options(self.name, POLICY_SPACE, policy)
        check_tiles(self.name, policy, MIN_TILE)

    def compile(
        self, lowered: LoweredKernel, dtypes: dict[str, str], policy: Policy
    ) -> CompileReport:
        """ok=True when the source imports and defines the kernel; no static numbers."""
        start = time.perf_counter()
        report = CompileReport(target="interpret", ok=False)
        try:
            load_kernel(lowered, self.workdir)
        except Exception as exc:  # includes SyntaxError and NameError at import
            report.error = error_text(exc)
        else:
            report.ok = True
        report.seconds = time.perf_counter() - start
        return report

    def device_available(self) -> bool:
        """Always: the interpreter runs on the CPU."""
        return True

    def estimate(
        self,
        family: Any,
        shape: dict[str, int],
        dtype: str,
        policy: Policy,
        report: CompileReport | None,
    ) -> TimingReport:
        """The MI300X roofline-occupancy estimate (see the module docstring for why)."""
        return estimate_time(self.spec, family, shape, dtype, policy, report)
