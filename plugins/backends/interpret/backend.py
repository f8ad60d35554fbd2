"""The `interpret` backend: Triton's interpreter on the CPU, for correctness at small shapes.

The interpreter runs another target's code: it *emulates* a backend (`options.emulates`,
by name; MI300X, the project's default target, unless configured). `resolve(registry, cfg)`
looks that backend up and returns an interpreter bound to it, which

- lowers with the target's rules plus the interpreter's own (`lowering.py`: fp32 dot
  operands), so the kernel checked on the CPU is the target's, TMA boxes included;
- declares the target's spec and estimates with the target's cost model: the
  interpreter's own speed says nothing about a GPU kernel, and an offline run then still
  ranks policies by what they would do on the hardware it optimizes for.

The pipeline checks a GPU backend's candidates on the CPU through the same `resolve`
(`options.emulates` = that backend). Nothing is compiled: `compile` only checks that the
lowered source imports and defines the kernel with the promised parameters. Kernels run in
a child process with TRITON_INTERPRET=1 (`argus_core.evaluate.correctness`), never in this
one, because that variable must not be set where `triton.compile` runs.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from argus_core.backend import BackendBase
from argus_core.errors import ConfigError
from argus_core.evaluate.launch import load_kernel
from argus_core.lowering.triton_compile import check_compiler_options, check_tiles, error_text
from argus_core.types import CompileReport, LoweredKernel, Policy, TimingReport
from argus_plugins.backends.interpret.lowering import INTERPRETER_RULES

if TYPE_CHECKING:
    from argus_core.lowering.rules import Lowering
    from argus_core.protocols import Backend, KernelFamily
    from argus_core.target import TargetSpec

# accepted so that a policy written for a GPU also runs here; the interpreter ignores them
POLICY_SPACE: dict[str, list[Any]] = {
    "num_warps": [1, 2, 4, 8, 16],
    "num_stages": [1, 2, 3, 4],
}
MIN_TILE = 16  # tl.dot needs every operand extent >= 16, in the interpreter too
DEFAULT_EMULATES = "mi300x"  # the project's default target


class InterpretBackend(BackendBase):
    name = "interpret"

    def __init__(self, target: Backend | None = None, workdir: str | Path | None = None):
        """An interpreter running `target`'s code; the registered one (no target) is bound
        to one by `resolve`."""
        self.target, self.workdir = target, workdir

    def resolve(self, registry: Any, cfg: Any) -> tuple[InterpretBackend, Any]:
        """An interpreter bound to the backend `cfg.options.emulates` names (default
        mi300x), with the policy grid `cfg.policy_grid`."""
        options = cfg.get("options") or {}
        emulates = options.get("emulates") or DEFAULT_EMULATES
        if emulates == self.name:
            raise ConfigError(
                "backend=interpret: options.emulates must name the backend whose code the "
                f"interpreter runs (a GPU target such as {DEFAULT_EMULATES!r}), not 'interpret'"
            )
        bound = InterpretBackend(registry.get("backend", emulates), self.workdir)
        return bound, cfg.get("policy_grid") or {}

    def _target(self) -> Backend:
        if self.target is None:
            raise ConfigError(
                "the interpret backend runs another backend's code and has no target yet: "
                "use the backend its resolve(registry, cfg) returns (options.emulates names "
                f"the target, default {DEFAULT_EMULATES!r})"
            )
        return self.target

    @property
    def spec(self) -> TargetSpec:
        """The emulated target's spec (its warps and lanes, its cost model's figures)."""
        return self._target().spec

    @property
    def lowering(self) -> Lowering:
        """The emulated target's lowering with the interpreter's fp32 dot operands."""
        target = self._target()
        return target.lowering.extended(f"interpret({target.name})", INTERPRETER_RULES)

    def policy_space(self) -> dict[str, list[Any]]:
        return {k: list(v) for k, v in POLICY_SPACE.items()}

    def validate_policy(self, policy: Policy) -> None:
        """PolicyError for an option other than num_warps/num_stages, a value outside their
        lists, or a tile extent that is not a power of two >= 16."""
        check_compiler_options(self.name, POLICY_SPACE, policy)
        check_tiles(self.name, policy, MIN_TILE)

    def compiler_options(self, policy: Policy) -> dict[str, Any]:
        """What the emulated target's compiler would take (the interpreter ignores them)."""
        return self._target().compiler_options(policy)

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
        family: KernelFamily,
        shape: dict[str, int],
        dtype: str,
        policy: Policy,
        report: CompileReport | None,
    ) -> TimingReport:
        """The emulated target's estimate (see the module docstring for why)."""
        return self._target().estimate(family, shape, dtype, policy, report)
