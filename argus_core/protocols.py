"""What each kind of plugin promises. Collector hooks return objects that follow these.

These are typing.Protocols: a plugin need not inherit from them, only provide the members.
Every plugin has a `name`, the same string as its config option and registry key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from omegaconf import DictConfig

    from argus_core.evaluate.check import CandidateKind, CheckRun
    from argus_core.ir import KernelIR
    from argus_core.ir.explicit import ExplicitKernel
    from argus_core.lowering.gluon import GluonTarget
    from argus_core.lowering.rules import Lowering
    from argus_core.spec import Spec
    from argus_core.target import TargetSpec
    from argus_core.types import (
        Candidate,
        CandidateResult,
        CompileReport,
        CorrectnessReport,
        LoweredKernel,
        Policy,
        TimingReport,
        VerifyReport,
    )


@runtime_checkable
class DSLFrontend(Protocol):
    name: str
    # What DSL code may import (the sandbox's allowlist, argus_core.sandbox): module -> the
    # names `from module import ...` may take, or None for a module `import module` may take
    # whole (any public name).
    allowed_imports: Mapping[str, frozenset[str] | None]
    # The same as code, for error messages and prompts: the imports a DSL module starts
    # with ("from argus_plugins.dsl.tile import lang as al; import math").
    allowed_imports_text: str
    # How DSL code marks a kernel, named through `allowed_imports_text` ("al.kernel").
    kernel_decorator: str

    def parse(self, source: str, entry: str, filename: str = "<dsl>") -> KernelIR:
        """Trace the @kernel `entry` of `source` into the IR without running it.
        Raises DSLError naming the file and line of a malformed program."""

    def kernels(self, source: str, filename: str = "<dsl>") -> list[str]:
        """Names of the kernels `source` defines, in definition order. Loads the module as
        `parse` does (trusted source only: untrusted code goes through the sandbox);
        raises DSLError naming the file and line of a malformed program."""

    def default_policy(self, source: str, filename: str = "<dsl>") -> dict[str, int] | None:
        """The tile constants the module declares for tools that run it without a policy
        (`python -m argus_core.verify`), or None when it declares none."""


@runtime_checkable
class Verifier(Protocol):
    name: str

    def verify(
        self,
        ir: KernelIR | ExplicitKernel,
        policy: Policy,
        options: dict[str, Any],
        target: TargetSpec,
    ) -> VerifyReport:
        """Prove the kernel's assertions for this policy on `target` (the backend's spec),
        or return counterexamples, whose threads are warps and lanes of `target`. An
        explicit-level kernel gets its thread-level invariants proved (ring stages and
        phases, releases, fragment tags, shared-memory races)."""


@runtime_checkable
class Backend(Protocol):
    """A target: its spec, its lowering (the language parses, the target lowers), its
    policy space, compilation, and time (measured on its device, else estimated).
    `argus_core.backend.BackendBase` gives `resolve`, `lower`, `compiler_options` and
    `estimate` their plain meaning. (`backend=auto` only resolves: it is never run.)"""

    name: str
    # what the verifier, cost model and planners read of the target: warp size, SMs/CUs,
    # shared memory, registers, matrix instructions
    spec: TargetSpec
    # the per-op rules `lower` runs; a runner of this target's code elsewhere (the
    # interpreter) extends them with its own (`argus_core.lowering.rules.Lowering`)
    lowering: Lowering

    def resolve(self, registry: Any, cfg: DictConfig) -> tuple[Backend, Any]:
        """(the backend this run uses, its policy grid) for the backend config `cfg`: a
        backend returns itself and `cfg.policy_grid`; `auto` picks the GPU present; the
        interpreter binds the target it emulates. The pipeline always calls it."""

    def lower(self, ir: KernelIR, policy: Policy, options: dict[str, Any]) -> LoweredKernel:
        """Source for `ir` under `policy` (tags and assertions erased). `options` holds run
        facts only ({"dtype": the run's dtype}: an fp32 run gets IEEE fp32 dots); which of
        the policy's options the lowering reads is the backend's business."""

    def compiler_options(self, policy: Policy) -> dict[str, Any]:
        """The policy's options Triton's compile and launch take: every option but those
        the lowering read (Hopper's tma, warp_specialize, persistent)."""

    def policy_space(self) -> dict[str, list[Any]]:
        """Valid policy options of this target (compiler and lowering) and their values."""

    def validate_policy(self, policy: Policy) -> None:
        """Raise PolicyError naming the bad option or value and the valid ones."""

    def compile(
        self, lowered: LoweredKernel, dtypes: dict[str, str], policy: Policy
    ) -> CompileReport:
        """Compile for the target; never raises for a kernel that fails to compile
        (the report says ok=False and why)."""

    def device_available(self) -> bool:
        """True when kernels can run and be timed on this machine."""

    # the explicit level (argus_core.ir.explicit; `BackendBase` gives the plain meaning):
    # the Gluon target lowering this backend's explicit-level kernels, or None and why not
    explicit_target: GluonTarget | None
    explicit_unavailable: str

    def check_explicit_level(self) -> GluonTarget:
        """`explicit_target`; PolicyError naming the backend and why when it is None."""

    def lower_explicit(self, kernel: ExplicitKernel) -> LoweredKernel:
        """The Gluon source of `kernel` (constexprs bound) as a `LoweredKernel`."""

    def compile_explicit(self, kernel: ExplicitKernel) -> CompileReport:
        """Cross-compile `kernel` for the target; never raises for the kernel."""

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
    """A task: its DSL kernel(s) and the reference side they are checked against.

    The first block every family states; the rest have their plain meaning in
    `argus_core.family.FamilyBase` (one kernel, the run's dtype, no baseline, DSL
    candidates), which a family subclasses and overrides where it differs.
    """

    name: str
    entry: str  # the @kernel function in `source()`
    outputs: tuple[str, ...]
    source_path: Path | None  # the file `source()` reads (named in parse errors), or None
    dtypes: tuple[str, ...]  # the run's dtypes it supports (empty: not checked)
    shape_dims: tuple[tuple[str, int], ...]  # (dim, least value) of its shape (empty: any)
    wide_offsets: bool  # its kernels compute offsets in 64 bits (a tensor of >= 2^31 elements)

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

    # ------------------------------------------------------------ its kernels
    @property
    def entries(self) -> tuple[str, ...]:
        """Every @kernel of the family's program (an LLM candidate defines them all)."""

    def entries_for(self, tiles: dict[str, int]) -> tuple[str, ...]:
        """The kernels a policy with these tile constants runs, in launch order (GEMM:
        split-K's two kernels when the policy has SPLIT)."""

    def tensor_dtypes(self, dtype: str) -> dict[str, str]:
        """Element dtypes of the kernels' tensors that do not follow the run's dtype."""

    def unit_strides(self, entry: str) -> dict[str, int | None]:
        """Kernel `entry`'s tensors whose stride-1 dim is not their last, tensor -> that dim
        (None: no dim has stride 1); empty where every tensor is contiguous."""

    def program(
        self,
        launch: Callable[[str, dict[str, Any]], None],
        inputs: dict[str, Any],
        tiles: dict[str, int],
    ) -> None:
        """Run the program's kernels on `inputs` through `launch(name, tensors)`, allocating
        any intermediates; no arithmetic outside the kernels."""

    def baselines(self, inputs: dict[str, Any]) -> dict[str, Callable[[], Any]]:
        """The libraries to beat, as callables over `inputs` (timed beside the kernel)."""

    def reference_specs(self, entry: str) -> list[tuple[dict[str, int], Spec]]:
        """The data-flow specification of kernel `entry`, derived from the reference's
        graph (`argus_core.spec`), per mode: (scalar values the mode fixes, its spec);
        empty when the reference has none (the `smt` verifier's `synth` checks against it)."""

    # ------------------------------------------------------------ cost model
    def tile_extents(self, shape: dict[str, int]) -> dict[str, int]:
        """The shape extent each tile constant cuts (the planners' derived space)."""

    def pipelined_smem(self, tiles: dict[str, int], stages: int, elem_bytes: int) -> int | None:
        """Shared memory of the main loop at `stages` buffers, where not GEMM's formula."""

    def gemm_problems(self, shape: dict[str, int], tiles: dict[str, int]) -> list[dict[str, int]]:
        """The GEMM-shaped problems (M, N, K, optional SPLIT) the cost model times for
        `shape`; empty when the shape itself is what is timed."""

    def baseline_estimate(self, timing: TimingReport, spec: TargetSpec) -> TimingReport:
        """An estimated `timing` with the library baseline's estimate on `spec` and the
        speedup over it, where the family can estimate its baseline."""

    # ------------------------------------------------------------ one run
    def bind(self, kernel_cfg: DictConfig, dsl: DSLFrontend) -> KernelFamily:
        """The family as this run's `kernel` config uses it (`kernel.source`, a task...);
        may fill the config's tiles and shapes. ConfigError names a bad value."""

    def candidate_kind(self, cand: Candidate) -> CandidateKind:
        """What `cand` is: "dsl" goes through parse, verify, lower, compile and `check`;
        "program" the family checks whole (`check_program`)."""

    def check(
        self, lowered: list[LoweredKernel], policy: Policy, run: CheckRun
    ) -> CorrectnessReport:
        """A DSL candidate's lowered kernels checked against the reference (and timed on
        a GPU runner); never raises for the candidate's failure."""

    def check_program(self, cand: Candidate, run: CheckRun) -> CorrectnessReport:
        """A "program" candidate checked (and timed on a GPU runner). An error that starts
        "static: " or "guard: " was rejected before or while running, not compared."""

    # ------------------------------------------------------------ the explicit level
    def explicit_kernel(self, policy: Policy, target: str, shape: dict[str, int]) -> ExplicitKernel:
        """The explicit-level kernel a policy with `level: explicit` selects, built for the
        Gluon target named `target` ("hopper-gluon", "cdna3-gluon") and the run's `shape`,
        its constexprs bound from `policy.tiles`. PolicyError naming a bad knob, a target or
        a shape the family has no explicit kernel for."""

    def explicit_launcher(
        self, kernel: ExplicitKernel, lowered: LoweredKernel
    ) -> Callable[[dict[str, Any]], None]:
        """A callable running the lowered kernel on the family's (GPU) inputs; raises
        `argus_core.evaluate.explicit_check.UnsupportedShape` for inputs it cannot take."""

    def check_explicit(
        self, kernel: ExplicitKernel, lowered: LoweredKernel, run: CheckRun
    ) -> CorrectnessReport:
        """The explicit kernel run against the reference (and timed) on the GPU of `run`;
        never raises for the kernel's failure."""


class PlannerSession(Protocol):
    """One invocation's search. A session that subclasses this protocol inherits `state`."""

    def propose(self, n: int) -> list[Candidate]:
        """Up to n new candidates; an empty list ends the search."""

    def observe(self, result: CandidateResult) -> None:
        """Learn from a finished candidate."""

    def state(self) -> dict[str, Any]:
        """What the session has learned so far, as plain data (value estimates, counts, the
        best candidate); its numeric leaves are logged per candidate. Nothing by default."""
        return {}


@runtime_checkable
class Planner(Protocol):
    name: str

    def create(self, cfg: DictConfig, ctx: dict[str, Any]) -> PlannerSession:
        """A session for one invocation. `ctx` holds the run's "family", "dsl", "backend",
        "kernel_cfg", "backend_cfg", "seed", "budget" and "llm" (a client, or None)."""


class TrackerListener(Protocol):
    """A tracker's listener for one invocation: registered with the plugin manager, it
    implements whichever event hooks (`argus_on_*`) it records. A listener that subclasses
    this protocol inherits `summary_lines`."""

    def summary_lines(self) -> list[str]:
        """Lines printed after the run's table (where the run was recorded). None by default."""
        return []

    def failure(self) -> str | None:
        """Why recording failed ('stage: reason'), or None. The pipeline reads it after each
        event: a failure at start stops the run, a later one makes its exit non-zero."""
        return None


@runtime_checkable
class TrackerFactory(Protocol):
    name: str

    def create(self, cfg: DictConfig, run_dir: str) -> TrackerListener:
        """A listener for one invocation, registered for its events."""
