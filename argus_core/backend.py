"""The plain meaning of the `protocols.Backend` members most targets share, in one base.

A backend states what is its own (name, spec, lowering, policy space and checks, compile,
device detection); `BackendBase` gives the rest their usual meaning: the backend resolves to
itself with its configured policy grid, lowers with its `lowering`, hands every policy
option to Triton's compiler and launcher, and estimates with the roofline-occupancy cost
model on its spec. A target whose lowering reads some policy options (Hopper's `tma`)
overrides `compiler_options` so Triton never sees them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from argus_core.errors import PolicyError
from argus_core.evaluate.costmodel import estimate_time
from argus_core.lowering.gluon import lowered_kernel
from argus_core.types import CompileReport

if TYPE_CHECKING:
    from argus_core.ir import KernelIR
    from argus_core.ir.explicit import ExplicitKernel
    from argus_core.lowering.gluon import GluonTarget
    from argus_core.lowering.rules import Lowering
    from argus_core.protocols import KernelFamily
    from argus_core.target import TargetSpec
    from argus_core.types import LoweredKernel, Policy, TimingReport


class BackendBase:
    """Defaults for a backend that lowers with `self.lowering` on the target `self.spec`."""

    name: str
    spec: TargetSpec
    lowering: Lowering

    def resolve(self, registry: Any, cfg: Any) -> tuple[BackendBase, Any]:
        """This backend, with the policy grid its config gives (`backend.policy_grid`)."""
        return self, cfg.get("policy_grid") or {}

    def lower(self, ir: KernelIR, policy: Policy, options: Mapping[str, Any]) -> LoweredKernel:
        """`ir` lowered by this target's rules; `options` holds run facts ({"dtype": ...})."""
        return self.lowering.lower(ir, policy, options)

    def compiler_options(self, policy: Policy) -> dict[str, Any]:
        """The policy's options Triton's compile and launch take: all of them."""
        return dict(policy.compiler)

    # the explicit level (argus_core.ir.explicit): the Gluon target that lowers and
    # compiles this backend's explicit-level kernels, or None, with the reason why not
    explicit_target: GluonTarget | None = None
    explicit_unavailable: str = (
        "explicit-level kernels need a GPU target with a Gluon lowering "
        "(backend=h100/h200: Hopper, backend=mi300x: CDNA3); the CPU interpreter cannot run "
        "Gluon"
    )

    def check_explicit_level(self) -> GluonTarget:
        """This backend's Gluon target; PolicyError naming the backend and why when it has
        none (a policy with `level: explicit` cannot run here)."""
        if self.explicit_target is None:
            raise PolicyError(
                f"backend {self.name!r} has no explicit level: {self.explicit_unavailable}"
            )
        return self.explicit_target

    def lower_explicit(self, kernel: ExplicitKernel) -> LoweredKernel:
        """`kernel` (its constexprs bound) lowered to Gluon source by this backend's target."""
        return lowered_kernel(kernel, self.check_explicit_level())

    def compile_explicit(self, kernel: ExplicitKernel) -> CompileReport:
        """`kernel` cross-compiled by this backend's Gluon target (no GPU needed); never raises
        for a kernel that fails to compile (ok=False and why)."""
        target = self.check_explicit_level()
        if target.compile is None:
            return CompileReport(
                target=target.name, ok=False, error=f"{target.name} cannot compile"
            )
        return target.compile(kernel, dict(kernel.consts))

    def estimate(
        self,
        family: KernelFamily,
        shape: dict[str, int],
        dtype: str,
        policy: Policy,
        report: CompileReport | None,
    ) -> TimingReport:
        """The roofline-occupancy cost model on this backend's spec (docs/cost_model.md)."""
        return estimate_time(self.spec, family, shape, dtype, policy, report)


__all__ = ["BackendBase"]
