"""What each kind of plugin promises. Collector hooks return objects that follow these.

These are typing.Protocols: a plugin need not inherit from them, only provide the members.
Every plugin has a `name`, the same string as its config option and registry key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from argus_core.ir import KernelIR
    from argus_core.types import (
        Candidate,
        CandidateResult,
        CompileReport,
        LoweredKernel,
        Policy,
        TimingReport,
        VerifyReport,
    )


@runtime_checkable
class DSLFrontend(Protocol):
    name: str

    def parse(self, source: str, entry: str, filename: str = "<dsl>") -> KernelIR:
        """Trace the @kernel `entry` of `source` into the IR without running it.
        Raises DSLError naming the file and line of a malformed program."""

    def lower(
        self, ir: KernelIR, policy: Policy, flavor: str, options: dict[str, Any]
    ) -> LoweredKernel:
        """Lower to source of `flavor` ("triton"; "gluon" for the explicit level).
        Tags and tag assertions are erased. `options` carries target quirks such as
        {"dot_upcast_fp32": True} for the interpreter."""


@runtime_checkable
class Verifier(Protocol):
    name: str

    def verify(self, ir: KernelIR, policy: Policy, options: dict[str, Any]) -> VerifyReport:
        """Prove the kernel's assertions for this policy, or return counterexamples."""


@runtime_checkable
class Backend(Protocol):
    name: str
    lowering: str  # the DSL lowering flavor it consumes ("triton")
    lowering_options: dict[str, Any]

    def policy_space(self) -> dict[str, list[Any]]:
        """Valid compiler options of this target and their allowed values."""

    def validate_policy(self, policy: Policy) -> None:
        """Raise PolicyError naming the bad option or value and the valid ones."""

    def compile(
        self, lowered: LoweredKernel, dtypes: dict[str, str], policy: Policy
    ) -> CompileReport:
        """Compile for the target; never raises for a kernel that fails to compile
        (the report says ok=False and why)."""

    def device_available(self) -> bool:
        """True when kernels can run and be timed on this machine."""

    def estimate(
        self,
        family: KernelFamily,
        shape: dict[str, int],
        dtype: str,
        policy: Policy,
        report: CompileReport | None,
    ) -> TimingReport:
        """A cost-model time for `shape`; the report has estimated=True."""


@runtime_checkable
class KernelFamily(Protocol):
    name: str
    entry: str  # the @kernel function in `source()`
    outputs: tuple[str, ...]

    def source(self) -> str:
        """The DSL source text of the family's kernel module."""

    def make_inputs(
        self, shape: dict[str, int], dtype: str, seed: int, device: str
    ) -> dict[str, Any]:
        """Fresh random inputs (never zeros) and output buffers, by kernel parameter name."""

    def reference(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """Expected outputs, computed by PyTorch, by output name."""

    def flops(self, shape: dict[str, int]) -> float: ...

    def bytes(self, shape: dict[str, int], dtype: str) -> float:
        """Fewest bytes the kernel must move through device memory."""

    def tolerance(self, dtype: str) -> tuple[float, float]:
        """(atol, rtol) for outputs of this dtype."""


class PlannerSession(Protocol):
    def propose(self, n: int) -> list[Candidate]:
        """Up to n new candidates; an empty list ends the search."""

    def observe(self, result: CandidateResult) -> None:
        """Learn from a finished candidate."""


@runtime_checkable
class Planner(Protocol):
    name: str

    def create(self, cfg: DictConfig, ctx: dict[str, Any]) -> PlannerSession:
        """A session for one invocation. `ctx` holds the family, backend and kernel config."""


@runtime_checkable
class TrackerFactory(Protocol):
    name: str

    def create(self, cfg: DictConfig, run_dir: str) -> Any:
        """A listener object implementing the event hooks, registered for one invocation."""
