"""The defaults of every optional kernel-family capability, in one base class.

`protocols.KernelFamily` declares every member the pipeline, the evaluator, the cost model,
the planners and the knowledge base call on a family. A family states its reference side
(name, entry, outputs, source, inputs, reference, FLOPs, bytes, tolerance); `FamilyBase`
gives every other member its plain meaning (one kernel, the run's dtype everywhere, no
library baseline, DSL candidates checked by the generic correctness worker), so a family
overrides only what it does differently and nobody probes for a member with `hasattr`.

`DSLKernelFamily` adds the common case: the DSL kernel is the file `kernel.py` beside the
family's module, replaceable per run with `kernel.source=PATH`.
"""

from __future__ import annotations

import copy
import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from argus_core.errors import ConfigError, PolicyError
from argus_core.evaluate.check import CandidateKind, CheckRun
from argus_core.evaluate.correctness import check_correctness
from argus_core.evaluate.explicit_check import check_on_device

if TYPE_CHECKING:
    from argus_core.protocols import DSLFrontend
    from argus_core.spec import Spec
    from argus_core.target import TargetSpec
    from argus_core.types import (
        Candidate,
        CorrectnessReport,
        LoweredKernel,
        Policy,
        TimingReport,
    )


class FamilyBase:
    """Every optional member of `protocols.KernelFamily`, with its default meaning.

    Subclasses set `name`, `entry`, `outputs` and implement `source`, `make_inputs`,
    `reference`, `flops`, `bytes` and `tolerance`; they override the rest where they differ.
    """

    name: str = "family"
    entry: str = ""
    outputs: tuple[str, ...] = ()
    # the file `source()` reads, named in parse errors; None for a source made in memory
    source_path: Path | None = None
    # what a run may ask of it, checked before any candidate (argus_core.config
    # .check_kernel): the run's dtypes it supports, and each dim of its shape with the least
    # value that dim may take (a size 1, a 0/1 flag 0); empty: not declared, not checked
    dtypes: tuple[str, ...] = ()
    shape_dims: tuple[tuple[str, int], ...] = ()
    # its kernels compute offsets in 64 bits (a tensor it binds holds 2^31 elements or more,
    # past int32 offsets); the lowering reads it as the run fact "offsets": "i64"
    wide_offsets: bool = False
    # compiler options the family's first policy wants first in the backend's policy grid
    # where the grid offers them ({"num_warps": 8} beside a 128 x 128 tile): Stages puts them
    # first, so `planner=baseline`'s first candidate and the planners' start use them
    compiler_first: dict[str, Any] = {}

    # ------------------------------------------------------------------ its kernels
    @property
    def entries(self) -> tuple[str, ...]:
        """Every @kernel the family's program is made of (an LLM writes them all): `entry`."""
        return (self.entry,)

    def entries_for(self, tiles: dict[str, int]) -> tuple[str, ...]:
        """The kernels a policy with these tile constants runs, in launch order: `entries`.
        A family whose policy picks its program (GEMM's split-K) says so here."""
        return tuple(self.entries)

    def tensor_dtypes(self, dtype: str) -> dict[str, str]:
        """Element dtypes of kernel tensors that do not follow the run's dtype: none."""
        return {}

    def unit_strides(self, entry: str) -> dict[str, int | None]:
        """Kernel `entry`'s tensors bound with their stride-1 dim elsewhere than last (a
        permuted view), tensor -> that dim (None: none has stride 1): none, every tensor
        is contiguous. A cross-compile specializes strides by it (`LoweredKernel.unit_stride`)."""
        return {}

    def program(
        self,
        launch: Callable[[str, dict[str, Any]], None],
        inputs: dict[str, Any],
        tiles: dict[str, int],
    ) -> None:
        """Run the program on `inputs`: each kernel of `entries_for(tiles)` in order, on the
        inputs by name. A family whose kernels need intermediates allocates them here."""
        for name in self.entries_for(tiles):
            launch(name, inputs)

    def baselines(self, inputs: dict[str, Any]) -> dict[str, Callable[[], Any]]:
        """The libraries to beat, as callables over `inputs`, timed beside the kernel: none."""
        return {}

    def reference_specs(self, entry: str) -> list[tuple[dict[str, int], Spec]]:
        """The data-flow specification of kernel `entry` per mode: none by default (the
        kernel is checked against its implied and hand-written assertions only)."""
        return []

    def explicit_spec(self, kernel: Any, consts: dict[str, int]) -> Any:
        """The reference's spec bound to explicit-level `kernel` at constexprs `consts`
        (`argus_core.spec.explicit.ExplicitSpec`: over the kernel's 2-D tensor views, the
        reference's dims as kernel expressions, the launch's facts), or None: the kernel is
        checked against its implied thread-level invariants only."""
        return None

    # ------------------------------------------------------------------ cost model
    def tile_extents(self, shape: dict[str, int]) -> dict[str, int]:
        """The extent each tile constant cuts at `shape` (GEMM's BM cuts M), from which the
        planners derive the tile values (`argus_core.planning.space`): none, so every tile
        keeps the kernel config's list."""
        return {}

    def pipelined_smem(self, tiles: dict[str, int], stages: int, elem_bytes: int) -> int | None:
        """Shared memory a software-pipelined main loop holds at `stages` buffers, where the
        family's tiles say it differently from GEMM's (BM + BN) x BK per stage: None."""
        return None

    def gemm_problems(self, shape: dict[str, int], tiles: dict[str, int]) -> list[dict[str, int]]:
        """The GEMM-shaped problems (M, N, K, optional SPLIT) the cost model times one by one
        for `shape` under these tiles: none, so the shape itself is timed (tiled when it has
        M, N, K, else at the roofline)."""
        return []

    def baseline_estimate(self, timing: TimingReport, spec: TargetSpec) -> TimingReport:
        """An estimated `timing` with the baseline's estimate on `spec` added: unchanged."""
        return timing

    # ------------------------------------------------------------------ one run
    def bind(self, kernel_cfg: Any, dsl: DSLFrontend) -> FamilyBase:
        """The family as this run's `kernel` config uses it (`dsl` parses any DSL text the
        binding needs). ConfigError for a `kernel.source`, which this family does not read."""
        if kernel_cfg.get("source"):
            raise ConfigError(f"kernel family {self.name!r} does not take kernel.source")
        return self

    def candidate_kind(self, cand: Candidate) -> CandidateKind:
        """Whether `cand` is DSL (the pipeline's stages) or a program this family checks
        itself (`check_program`): DSL."""
        return "dsl"

    def check(
        self, lowered: list[LoweredKernel], policy: Policy, run: CheckRun
    ) -> CorrectnessReport:
        """The lowered kernels of a DSL candidate checked against `reference` on fresh inputs
        (and timed with `baselines` on a GPU runner), in a child process. Never raises for
        the candidate's failure: the report says ok=False and why."""
        return check_correctness(
            lowered if len(lowered) > 1 else lowered[0],
            self.name,
            [dict(s) for s in run.shapes],
            run.dtype,
            trials=run.trials,
            seed=run.seed,
            runner=run.runner,
            timeout_s=run.timeout_s,
            constexprs=dict(policy.tiles),
            compiler=dict(policy.compiler),
            timing={"shape": dict(run.timed_shape)} if run.timed_shape is not None else None,
        )

    def check_program(self, cand: Candidate, run: CheckRun) -> CorrectnessReport:
        """A "program" candidate checked (and timed on a GPU runner) by the family. Only a
        family whose `candidate_kind` returns "program" has such candidates."""
        raise ConfigError(
            f"kernel family {self.name!r} checks DSL candidates only; candidate {cand.id} "
            f"is not one"
        )

    # ------------------------------------------------------------------ the explicit level
    def explicit_kernel(self, policy: Policy, target: str, shape: dict[str, int]) -> Any:
        """The explicit-level kernel (`argus_core.ir.explicit.ExplicitKernel`) a policy with
        `level: explicit` selects for the Gluon target `target` at `shape`: none here."""
        raise PolicyError(
            f"kernel family {self.name!r} has no explicit-level kernel (policy "
            f"{policy.key()!r} asks for level=explicit)"
        )

    def explicit_launcher(self, kernel: Any, lowered: LoweredKernel) -> Callable[[Any], None]:
        """A callable running the lowered explicit kernel on the family's inputs (a GPU's
        tensors); raises `argus_core.evaluate.explicit_check.UnsupportedShape` for inputs
        the kernel does not handle. Only families with explicit kernels have one."""
        raise PolicyError(f"kernel family {self.name!r} has no explicit-level kernel to launch")

    def check_explicit(
        self, kernel: Any, lowered: LoweredKernel, run: CheckRun
    ) -> CorrectnessReport:
        """The explicit kernel checked against `reference` (and timed beside `baselines`)
        on the GPU of `run` through `explicit_launcher`; on the CPU it fails, saying why
        (Gluon does not run in the interpreter). Never raises for the kernel's failure."""
        return check_on_device(self, lambda: self.explicit_launcher(kernel, lowered), run)


class DSLKernelFamily(FamilyBase):
    """A family whose kernel is the DSL module `kernel.py` next to the family's own module,
    or the file given as `source_path` (`kernel.source=PATH` in a run)."""

    def __init__(self, source_path: str | Path | None = None):
        here = Path(inspect.getfile(type(self)))
        self.source_path = Path(source_path) if source_path else here.with_name("kernel.py")

    def source(self) -> str:
        """The DSL text of the kernel module."""
        if self.source_path is None or not self.source_path.is_file():
            raise FileNotFoundError(f"{self.name} DSL source not found at {self.source_path}")
        return self.source_path.read_text()

    def bind(self, kernel_cfg: Any, dsl: DSLFrontend) -> DSLKernelFamily:
        """The family reading its DSL kernel from `kernel.source` when the run gives one:
        users bring their own version of a family's kernel and keep its reference.
        ConfigError when that file does not exist."""
        source = kernel_cfg.get("source")
        if not source:
            return self
        path = Path(os.path.abspath(source))
        if not path.is_file():
            raise ConfigError(f"kernel.source={source!r}: no such file")
        bound = copy.copy(self)
        bound.source_path = path
        return bound
