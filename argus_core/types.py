"""The plain data that flows through the pipeline: candidates, lowered kernels, reports.

Everything here is serializable (`to_dict`) so it can be logged, sent to a child process,
and replayed. Plugins exchange these objects, never framework-specific ones.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Literal

# --------------------------------------------------------------------------- policies


@dataclass(frozen=True)
class Policy:
    """What a candidate chooses: the kernel's tile constants and the compiler's options.

    `tiles` are the DSL kernel's constexpr parameters (BM, BN, BK, GROUP, ...);
    `compiler` are the target's named options (num_warps, num_stages, waves_per_eu,
    matrix_instr_nonkdim, kpack, ...), validated by the backend that compiles them.
    """

    tiles: dict[str, int] = field(default_factory=dict)
    compiler: dict[str, Any] = field(default_factory=dict)

    def key(self) -> str:
        """A short readable identity, stable across runs: 'BM64 BN64 BK32 G8 | w4 s2 ...'."""
        short = {
            "num_warps": "w",
            "num_stages": "s",
            "waves_per_eu": "we",
            "matrix_instr_nonkdim": "nk",
            "kpack": "kp",
        }
        t = " ".join(f"{k}{v}" for k, v in self.tiles.items())
        # a word-valued option reads as name=value ('level=explicit', not 'levelexplicit')
        c = " ".join(
            f"{k}={v}" if isinstance(v, str) else f"{short.get(k, k)}{v}"
            for k, v in self.compiler.items()
        )
        return f"{t} | {c}" if c else t

    def to_dict(self) -> dict[str, Any]:
        return {"tiles": dict(self.tiles), "compiler": dict(self.compiler)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Policy:
        return cls(tiles=dict(d.get("tiles", {})), compiler=dict(d.get("compiler", {})))


@dataclass
class Candidate:
    """One point the planner proposes: DSL source text plus a policy. Plain data."""

    id: str
    kernel: str  # kernel family name, e.g. "gemm"
    source: str  # DSL source text of the module that defines the kernel
    entry: str  # name of the @kernel function in `source`
    policy: Policy
    techniques: list[str] = field(default_factory=list)
    parent: str | None = None
    note: str = ""
    origin: str = "planner"  # "llm": the source was written by an LLM (parsed in a sandbox)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["policy"] = self.policy.to_dict()
        return d


# --------------------------------------------------------------------------- lowering


@dataclass(frozen=True)
class Param:
    """One parameter of a lowered kernel and where its launch value comes from.

    binding: ("tensor", name) -> the tensor itself (a pointer);
             ("shape", name, dim) / ("stride", name, dim) -> an int from that tensor;
             ("const", name) -> a constexpr from the policy's tiles;
             ("scalar", name) -> a Python number the kernel family puts in the inputs.
    """

    name: str
    kind: Literal["ptr", "int", "float", "constexpr"]
    binding: tuple
    dtype: str = ""  # element dtype for pointers ("bf16", "fp32", ...), "i32" for ints

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "binding": list(self.binding),
            "dtype": self.dtype,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Param:
        return cls(d["name"], d["kind"], tuple(d["binding"]), d.get("dtype", ""))


@dataclass
class LoweredKernel:
    """Triton source for one kernel, with what a launcher needs to call it.

    `source` is a complete Python module (imports triton and triton.language as tl) that
    defines `@triton.jit def <name>(...)`. `grid` is a Python expression over the int and
    constexpr parameter names (and `triton.cdiv`) that evaluates to the launch grid.
    """

    name: str
    source: str
    params: list[Param]
    grid: str
    outputs: list[str]
    constexprs: dict[str, int] = field(default_factory=dict)
    # tensors read or written through TMA descriptors (the USE_TMA constexpr picks that path
    # at launch when they are contiguous with 16-byte aligned strides and base)
    tma_tensors: list[str] = field(default_factory=list)
    # offsets computed in 64 bits (every shape and stride cast to int64 on entry): a tensor
    # may hold 2^31 elements or more; otherwise the offsets are int32
    wide_offsets: bool = False
    # tensors whose stride-1 dim is not their last (a permuted view: a conv's channels-last
    # input, its weight), tensor -> that dim, None where no dim has stride 1; what the
    # family binds (`KernelFamily.unit_strides`). A cross-compile specializes strides by it
    # as the runtime JIT does by the strides it is given
    unit_stride: dict[str, int | None] = field(default_factory=dict)

    def signature(self, dtypes: dict[str, str] | None = None) -> dict[str, str]:
        """Triton signature for `triton.compile`: '*bf16', 'i32' or 'constexpr' per param."""
        sig = {}
        for p in self.params:
            if p.kind == "ptr":
                sig[p.name] = "*" + (dtypes or {}).get(p.binding[1], p.dtype)
            elif p.kind == "int":
                sig[p.name] = "i32"
            elif p.kind == "float":
                sig[p.name] = "fp32"
            else:
                sig[p.name] = "constexpr"
        return sig

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "params": [p.to_dict() for p in self.params],
            "grid": self.grid,
            "outputs": list(self.outputs),
            "constexprs": dict(self.constexprs),
            "tma_tensors": list(self.tma_tensors),
            "wide_offsets": self.wide_offsets,
            "unit_stride": dict(self.unit_stride),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LoweredKernel:
        return cls(
            d["name"],
            d["source"],
            [Param.from_dict(p) for p in d["params"]],
            d["grid"],
            list(d["outputs"]),
            dict(d.get("constexprs", {})),
            list(d.get("tma_tensors", [])),
            bool(d.get("wide_offsets", False)),
            dict(d.get("unit_stride", {})),
        )


# --------------------------------------------------------------------------- reports


@dataclass
class VerifyReport:
    status: Literal["verified", "violated", "unknown", "skipped"] = "skipped"
    counterexamples: list[dict[str, Any]] = field(default_factory=list)
    assertions: int = 0
    seconds: float = 0.0
    summary: str = ""  # one readable line for the planner's prompt


@dataclass
class CompileReport:
    target: str
    ok: bool
    error: str = ""
    seconds: float = 0.0
    registers: int | None = None  # VGPRs on AMD, registers per thread on NVIDIA
    sgprs: int | None = None
    agprs: int | None = None
    spills: int | None = None  # VGPR + SGPR spills (AMD) or spill stores+loads (NVIDIA)
    scratch_bytes: int | None = None
    occupancy: int | None = None  # waves per SIMD (AMD) or warps per SM (NVIDIA)
    shared_bytes: int | None = None  # LDS on AMD, shared memory on NVIDIA
    mma_count: int | None = None  # v_mfma on AMD, HGMMA/HMMA on NVIDIA
    buffer_loads: int | None = None
    instructions: dict[str, int] = field(default_factory=dict)
    asm: str = ""  # AMDGCN or PTX text, logged as an artifact
    asm_kind: str = ""  # "amdgcn" | "ptx"


@dataclass
class CorrectnessReport:
    ok: bool
    trials: int = 0
    runner: str = ""  # "interpret", "cuda", ...
    shapes: list[dict[str, int]] = field(default_factory=list)
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    error: str = ""
    seconds: float = 0.0
    timing: dict[str, Any] | None = None  # a GPU worker's measurements (evaluate.timing)
    # re-checks at sizes the search never saw: [{"sizes": {name: [old, new]}, "ok", "error"}]
    unseen: list[dict[str, Any]] = field(default_factory=list)
    # seconds per stage of the check where the family records them (KernelBench: waits for
    # the GPU, the sandboxed processes' starts, trials, compiles, the timing)
    phases: dict[str, float] = field(default_factory=dict)


@dataclass
class TimingReport:
    ms: float
    estimated: bool  # True: a cost-model figure, never a measurement
    shape: dict[str, int] = field(default_factory=dict)
    tflops: float | None = None
    gbps: float | None = None
    pct_roofline: float | None = None
    baseline_ms: float | None = None  # the eager/library baseline (the fastest of them)
    speedup: float | None = None  # over baseline_ms
    model: str = ""  # what produced it ("roofline-occupancy v1", "do_bench median")
    # every baseline timed beside it, by name, torch.compile included ({} when estimated)
    baselines: dict[str, float] = field(default_factory=dict)


@dataclass
class CandidateResult:
    """Everything learned about one candidate. `failure` is 'stage: reason' when it failed."""

    candidate: Candidate
    index: int = 0
    verify: VerifyReport = field(default_factory=VerifyReport)
    lowered: LoweredKernel | None = None
    compile: CompileReport | None = None
    correctness: CorrectnessReport | None = None
    timing: TimingReport | None = None
    reward: float | None = None
    failure: str | None = None
    # the backend that evaluated it (`backend=auto` resolved): what `argus export` launches for
    backend: str = ""
    seconds: float = 0.0
    # numbers the planner reports after learning from this result (value estimates, counts)
    planner: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.failure is None

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["candidate"] = self.candidate.to_dict()
        d["lowered"] = self.lowered.to_dict() if self.lowered else None
        if d.get("compile"):
            d["compile"].pop("asm", None)  # large; logged as its own artifact
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str)


@dataclass
class RunInfo:
    """What every event hook receives about the invocation it belongs to."""

    run_id: str
    kernel: str
    backend: str
    planner: str
    config: dict[str, Any]
    output_dir: str
    budget: int
    tags: dict[str, str] = field(default_factory=dict)
    # run-level numbers known at the end (LLM requests, tokens, cost); logged on the parent
    metrics: dict[str, float] = field(default_factory=dict)
