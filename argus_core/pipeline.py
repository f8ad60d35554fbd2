"""One invocation of `argus`: the planner proposes, each candidate goes through the stages
(parse, policy check, verify, lower, compile, correctness, timing), events go to the
trackers, and a summary table ends the run.

A candidate that fails at any stage is recorded with `failure = "stage: reason"` and the
run goes on; only a broken configuration stops the run before it starts.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from argus_core.cache import ResultCache, device_identity
from argus_core.domain import check_names, parse_domain, with_domain
from argus_core.errors import ArgusError, ConfigError, choices_error
from argus_core.evaluate.check import CheckRun
from argus_core.evaluate.timing import above_roofline
from argus_core.ir import KernelIR
from argus_core.ir.explicit import ExplicitKernel, selects_explicit
from argus_core.plugin_manager import Registry, default_plugin_manager
from argus_core.sandbox import (
    SandboxError,
    parse_candidate,
    trace_all_in_child,
    truncate,
    trusted_code,
)
from argus_core.sandbox import configure as configure_sandbox
from argus_core.spec import caught as synth_caught
from argus_core.spec import synthesis
from argus_core.spec.explicit import attach as attach_spec
from argus_core.types import (
    Candidate,
    CandidateResult,
    CompileReport,
    CorrectnessReport,
    LoweredKernel,
    Policy,
    RunInfo,
    TimingReport,
    VerifyReport,
)

if TYPE_CHECKING:
    from argus_core.protocols import KernelFamily


# every fp32 dot form a target may offer (TargetSpec.fp32_dots), Triton's input_precision
FP32_DOTS = ("ieee", "tf32x3", "bf16x6", "bf16x3")


@dataclass
class Stages:
    """The plugins one invocation uses, looked up by their config names."""

    family: KernelFamily
    dsl: Any
    verifier: Any
    backend: Any
    registry: Registry
    cfg: DictConfig

    backend_cfg: Any = None  # the chosen backend's config (backend=auto picks one)
    # stage results across runs (argus_core.cache); the default stores nothing
    cache: ResultCache = field(default_factory=lambda: ResultCache(None, ""))

    @classmethod
    def from_config(cls, cfg: DictConfig, registry: Registry) -> Stages:
        backend = registry.get("backend", cfg.backend.name)
        # the backend that runs: itself, the GPU present (auto), or the interpreter bound to
        # the target it emulates; with its policy grid
        backend, grid = backend.resolve(registry, cfg.backend)
        backend_cfg = OmegaConf.create({"name": backend.name, "policy_grid": grid})
        fp32_dot = str(cfg.kernel.get("fp32_dot") or "ieee")
        # the interpreter computes fp32 dots in fp32 whatever the target would
        dots = FP32_DOTS if backend.name == "interpret" else backend.spec.fp32_dots
        if fp32_dot not in dots:
            raise ConfigError(choices_error(f"kernel.fp32_dot on {backend.name}", fp32_dot, dots))
        dsl = registry.get("dsl", cfg.dsl.name)
        # the family as this run's kernel config binds it (kernel.source, a task, ...)
        family = registry.get("kernel", cfg.kernel.name).bind(cfg.kernel, dsl)
        backend_cfg.policy_grid = _first(grid, family.compiler_first)
        return cls(
            family=family,
            dsl=dsl,
            verifier=registry.get("verifier", cfg.verifier.name),
            backend=backend,
            registry=registry,
            cfg=cfg,
            backend_cfg=backend_cfg,
        )

    # ------------------------------------------------------------------------ stages
    def evaluate(
        self, cand: Candidate, index: int, reference_ms: float | None
    ) -> tuple[CandidateResult, dict[str, str]]:
        t0 = time.perf_counter()
        res = CandidateResult(candidate=cand, index=index, backend=self.backend.name)
        artifacts: dict[str, str] = {"dsl_source.py": cand.source}
        # Argus's own kernels (not an LLM's, not a kernel.source file, not a whole program)
        # may run unisolated where the OS sandbox does not work; everything else may not
        program = self.family.candidate_kind(cand) == "program"
        trusted = not program and cand.origin != "llm" and not self.cfg.kernel.get("source")
        try:
            with trusted_code(trusted):
                if program:
                    self._evaluate_program(cand, res)
                elif selects_explicit(cand.policy):
                    self._evaluate_explicit(cand, res, artifacts)
                else:
                    self._evaluate(cand, res, artifacts)
        except ArgusError as exc:
            res.failure = res.failure or f"{exc.stage}: {exc}"
        except Exception as exc:  # a plugin's bug fails this candidate, not the run
            res.failure = f"internal: {type(exc).__name__}: {exc}"
        if res.failure is not None:  # it may quote untrusted code: cut to a few KiB everywhere
            res.failure = truncate(res.failure)
        res.seconds = time.perf_counter() - t0
        res.reward = _reward(res, reference_ms)
        return res, artifacts

    def _evaluate_program(self, cand: Candidate, res: CandidateResult) -> None:
        """A candidate that is a whole program (KernelBench's ModelNew) has no DSL stage: the
        family checks it where this run checks candidates, then it is timed like any other.
        The check is its only stage, so it runs even with evaluate.correctness=off."""
        res.correctness = self.family.check_program(cand, self._check_run(res.index))
        if not res.correctness.ok:
            res.failure = _correctness_failure(res.correctness)
            return
        self._time(cand, res)

    def _evaluate(self, cand: Candidate, res: CandidateResult, artifacts: dict[str, str]) -> None:
        """A DSL candidate through parse, policy, verify, lower, compile, check and timing."""
        cfg, family, backend = self.cfg, self.family, self.backend
        filename = str(family.source_path or f"<{cand.id}>")
        # a family made of several kernels (MoE: align, up, down, combine) names them all
        entries = _entries(family, cand)
        stage = "parse"
        try:
            if cand.origin == "llm":  # an LLM's code: checked, then traced in the OS sandbox
                irs = parse_candidate(self.dsl, cand, entries, cfg.evaluate.get("trace_timeout_s"))
            elif cfg.kernel.get("source"):  # the user's kernel.source file: traced sandboxed
                limit = cfg.evaluate.get("trace_timeout_s")
                irs = trace_all_in_child(self.dsl, cand.source, entries, filename, limit)
            else:
                irs = [self.dsl.parse(cand.source, entry, filename) for entry in entries]
            domain = parse_domain(cfg.kernel.get("domain"))  # the run's declared shape domain
            if domain:
                check_names(domain, irs)
                irs = [with_domain(ir, domain) for ir in irs]
            stage = "policy"
            backend.validate_policy(cand.policy)
            policies = [_policy_for(ir, cand.policy) for ir in irs]
            unused = set(cand.policy.tiles) - {c.name for ir in irs for c in ir.constexprs}
            if unused:
                raise ConfigError(f"tiles {sorted(unused)} are constants of no kernel of {entries}")
        except ArgusError as exc:  # a refusal to run it unisolated is a `security` failure
            res.failure = f"{exc.stage if isinstance(exc, SandboxError) else stage}: {exc}"
            return

        key = self._cache_parts(cand, entries)
        verify_key = {**key, "verifier": _plain(cfg.verifier)}
        if (found := self.cache.get("verify", verify_key)) is not None:
            res.verify = VerifyReport(**found)
        else:
            t = time.perf_counter()
            res.verify = _merge_verify([self._verify(ir, pol) for ir, pol in zip(irs, policies)])
            res.verify.seconds = res.verify.seconds or time.perf_counter() - t
            if res.verify.status != "unknown":  # unknown may be a timeout: tried again
                self.cache.put("verify", verify_key, dataclasses.asdict(res.verify))
        if res.verify.counterexamples:
            artifacts["counterexamples.json"] = json.dumps(
                res.verify.counterexamples, indent=2, default=str
            )
        if res.verify.status == "violated" or (
            res.verify.status == "unknown" and cfg.verifier.fail_on_unknown
        ):
            res.failure = f"verify: {res.verify.summary or res.verify.status}"
            return

        if (found := self.cache.get("compile", key)) is not None:
            lowered = [LoweredKernel.from_dict(k) for k in found["lowered"]]
            res.compile = CompileReport(**found["compile"])
        else:
            try:
                lowered = [
                    backend.lower(ir, pol, self._lowering_facts()) for ir, pol in zip(irs, policies)
                ]
                for k, entry in zip(lowered, entries):  # strides as the family binds them
                    k.unit_stride = dict(family.unit_strides(entry))
            except ArgusError as exc:
                res.failure = f"lower: {exc}"
                return
            dtypes = _tensor_dtypes(family, cfg.kernel.dtype, irs)
            res.compile = _merge_compile(
                [k.name for k in lowered],
                [backend.compile(k, dtypes, pol) for k, pol in zip(lowered, policies)],
            )
            self.cache.put(
                "compile",
                key,
                {
                    "lowered": [k.to_dict() for k in lowered],
                    "compile": dataclasses.asdict(res.compile),
                },
            )
        res.lowered = lowered[0]
        artifacts["lowered_triton.py"] = "\n\n".join(k.source for k in lowered)
        if res.compile.asm:
            artifacts[f"kernel.{res.compile.asm_kind or 'asm'}"] = res.compile.asm
        if not res.compile.ok:
            res.failure = f"compile: {_gist(res.compile.error)}"
            return
        capacity = backend.spec.lds_bytes_per_cu
        if capacity and res.compile.shared_bytes and res.compile.shared_bytes > capacity:
            # it compiles, but no block of it can launch on the target
            res.failure = (
                f"compile: needs {res.compile.shared_bytes} bytes of shared memory, over the "
                f"{capacity} a block can have on {backend.name}"
            )
            return

        res.correctness = self._checked(key, irs, policies, lowered, res)
        if res.correctness is not None and not res.correctness.ok:
            res.failure = _correctness_failure(res.correctness)
            return
        self._time(cand, res)

    def _evaluate_explicit(
        self, cand: Candidate, res: CandidateResult, artifacts: dict[str, str]
    ) -> None:
        """A policy with `level: explicit`: the family's explicit-level kernel for the
        backend's Gluon target, through verify (thread-level invariants), lower (Gluon),
        compile (cross-compiled), the family's check (on the GPU only: Gluon does not run
        in the interpreter) and timing."""
        cfg, family, backend = self.cfg, self.family, self.backend
        try:
            target = backend.check_explicit_level()
            kernel = family.explicit_kernel(cand.policy, target.name, dict(cfg.kernel.shape))
        except ArgusError as exc:
            res.failure = f"policy: {exc}"
            return
        res.verify = self._verify(kernel, Policy(dict(kernel.consts), dict(cand.policy.compiler)))
        if res.verify.counterexamples:
            artifacts["counterexamples.json"] = json.dumps(
                res.verify.counterexamples, indent=2, default=str
            )
        if res.verify.status == "violated" or (
            res.verify.status == "unknown" and cfg.verifier.fail_on_unknown
        ):
            res.failure = f"verify: {res.verify.summary or res.verify.status}"
            return
        try:
            res.lowered = backend.lower_explicit(kernel)
        except (ArgusError, ValueError) as exc:  # ExplicitIRError: an op the target lacks
            res.failure = f"lower: {exc}"
            return
        artifacts["lowered_gluon.py"] = res.lowered.source
        res.compile = backend.compile_explicit(kernel)
        if res.compile.asm:
            artifacts[f"kernel.{res.compile.asm_kind or 'asm'}"] = res.compile.asm
        capacity = backend.spec.lds_bytes_per_cu
        if not res.compile.ok or (
            capacity and res.compile.shared_bytes and res.compile.shared_bytes > capacity
        ):
            why = _gist(res.compile.error) or f"needs {res.compile.shared_bytes} B of shared memory"
            res.failure = f"compile: {why}"
            return
        if cfg.evaluate.correctness != "off":
            res.correctness = family.check_explicit(kernel, res.lowered, self._check_run(res.index))
            if not res.correctness.ok:
                res.failure = _correctness_failure(res.correctness)
                return
        self._time(cand, res)

    def _time(self, cand: Candidate, res: CandidateResult) -> None:
        """The candidate's time: measured where its check ran on the GPU, else the backend's
        cost-model estimate with the family's estimate of its baseline."""
        cfg, family, backend = self.cfg, self.family, self.backend
        shape = dict(cfg.kernel.shape)
        measured = res.correctness.timing if res.correctness is not None else None
        if measured is not None:
            res.timing = _measured(measured, shape, backend)
            if res.timing is None:
                res.failure = (
                    f"correctness: wrong at the timed shape {shape}: {measured['check']['why']}"
                )
                return
            # faster than the device can be: held back (timed, not a win) until re-checked
            spec = backend.spec
            peak = max([*spec.peak_tflops.values(), spec.vector_tflops]) * 1e12
            why = above_roofline(measured, peak, spec.hbm_tbps * 1e12)
            if why:
                res.failure = f"suspicious: {why}; held back, not counted as a win until re-checked"
        else:
            res.timing = backend.estimate(family, shape, cfg.kernel.dtype, cand.policy, res.compile)
            res.timing = family.baseline_estimate(res.timing, backend.spec)

    def _lowering_facts(self, interpreted: bool = False) -> dict[str, Any]:
        """What a lowering reads of the run: the dtype, how fp32 dots compute (in the
        interpreter always IEEE fp32: it has no matrix cores to split for), and the width
        of offsets (64 bits where the family binds a tensor of 2^31 elements or more)."""
        dot = "ieee" if interpreted else str(self.cfg.kernel.get("fp32_dot") or "ieee")
        wide = bool(self.family.wide_offsets)
        return {
            "dtype": self.cfg.kernel.dtype,
            "fp32_dot": dot,
            "offsets": "i64" if wide else "i32",
        }

    def _cache_parts(self, cand: Candidate, entries: tuple[str, ...]) -> dict[str, Any]:
        """What a candidate's verify and compile results depend on besides code and tools
        (argus_core.cache): its source, kernels, policy, the kernel config without the
        shapes and the tile grid, the DSL, the backend and its grid."""
        kernel = _plain(self.cfg.kernel)
        for unused in ("shape", "check_shapes", "tiles"):
            kernel.pop(unused, None)
        return {
            "source": cand.source,
            "entries": list(entries),
            "policy": cand.policy.to_dict(),
            "origin": cand.origin,
            "kernel": kernel,
            "dsl": _plain(self.cfg.dsl),
            "backend": [self.backend.name, _plain(self.cfg.backend), _plain(self.backend_cfg)],
            "target": repr(self.backend.spec),  # what backend=auto resolved to
        }

    def _checked(
        self,
        key: dict[str, Any],
        irs: list[Any],
        policies: list[Policy],
        lowered: list[Any],
        res: CandidateResult,
    ) -> CorrectnessReport | None:
        """The correctness check, from the cache when this candidate passed the same check
        before: same shapes, trials and seed, and for a GPU check (which carries its
        measurement) the same device, with cache.measured=true."""
        if self.cfg.evaluate.correctness == "off":
            return None
        run = self._check_run(res.index)
        parts: dict[str, Any] | None = {**key, "check": dataclasses.asdict(run)}
        if run.runner != "interpret":
            device = device_identity(
                os.environ.get("CUDA_VISIBLE_DEVICES") or os.environ.get("HIP_VISIBLE_DEVICES")
            )
            parts = {**parts, "device": device} if device and self.cache.measured else None
        if parts is not None and (found := self.cache.get("check", parts)) is not None:
            return CorrectnessReport(**found)
        report = self._correctness(irs, policies, lowered, res)
        if parts is not None and report is not None and report.ok:  # a failure is run again
            self.cache.put("check", parts, dataclasses.asdict(report))
        return report

    def _verify(self, ir: Any, policy: Policy) -> VerifyReport:
        """The verifier's report; a verifier that breaks on a kernel proves nothing about it
        (`unknown`), which does not stop the candidate unless fail_on_unknown is set."""
        try:
            options = dict(self.cfg.verifier)
            if (options.get("options") or {}).get("synthesize") and isinstance(ir, ExplicitKernel):
                # issue #19 at the explicit level: the reference's spec bound to the kernel,
                # attached as ghost data the verifier proves
                consts = {**ir.consts, **{k: v for k, v in policy.tiles.items() if k in ir.consts}}
                ir = attach_spec(ir, self.family.explicit_spec(ir, consts))
            if (options.get("options") or {}).get("synthesize") and isinstance(ir, KernelIR):
                # issue #19: also the invariants synthesized from the family's reference
                modes = self.family.reference_specs(ir.name)
                if modes:
                    rep = synthesis.check_modes(
                        self.verifier, ir, policy, modes, self.backend.spec, options
                    )
                    return VerifyReport(
                        status=rep.status,  # type: ignore[arg-type]
                        counterexamples=rep.counterexamples,
                        assertions=rep.report.assertions if rep.report else 0,
                        seconds=rep.synth_seconds + rep.verify_seconds,
                        summary=rep.summary,
                    )
            # lanes and warps of counterexamples are the run's target's
            return self.verifier.verify(ir, policy, dict(self.cfg.verifier), self.backend.spec)
        except Exception as exc:
            return VerifyReport(
                status="unknown",
                summary=f"verifier error on {ir.name}: {type(exc).__name__}: {exc}",
            )

    def _correctness(
        self, irs: list[Any], policies: list[Policy], lowered: list[Any], res: CandidateResult
    ) -> CorrectnessReport | None:
        """The family's check of the lowered kernels where this run checks candidates (the
        interpreter runs its own lowering of the IR); None with evaluate.correctness=off."""
        if self.cfg.evaluate.correctness == "off":
            return None
        run = self._check_run(res.index)
        if run.runner == "interpret":
            interp = self.backend
            if interp.name != "interpret":  # the run's target's kernel, run on the CPU
                interp, _ = self.registry.get("backend", "interpret").resolve(
                    self.registry, {"options": {"emulates": self.backend.name}}
                )
            lowered = [
                interp.lower(ir, pol, self._lowering_facts(interpreted=True))
                for ir, pol in zip(irs, policies)
            ]
        # launched with what Triton takes: the options the lowering read are in the source
        policy = res.candidate.policy
        launched = Policy(dict(policy.tiles), self.backend.compiler_options(policy))
        return self.family.check(lowered, launched, run)

    def _check_run(self, index: int) -> CheckRun:
        """How candidate `index` is checked, decided here once for every family and kind:
        on the GPU (evaluate.correctness=device, or auto with a GPU backend whose device is
        present; timed there too), else in the Triton interpreter on the CPU."""
        cfg, ev = self.cfg, self.cfg.evaluate
        on_device = ev.correctness == "device" or (
            ev.correctness == "auto"
            and self.backend.name != "interpret"
            and self.backend.device_available()
        )
        shape = dict(cfg.kernel.shape)
        return CheckRun(
            runner="cuda" if on_device else "interpret",  # "cuda": torch's GPU device, ROCm too
            dtype=str(cfg.kernel.dtype),
            shapes=tuple(dict(s) for s in cfg.kernel.check_shapes) or (shape,),
            trials=int(ev.trials),
            seed=int(cfg.seed) + index * 1000,
            timeout_s=float(ev.timeout_s),
            timed_shape=shape if on_device else None,
        )


COMPILED_BASELINE = "torch.compile"  # baselines named so are not the eager/library one


def _measured(m: dict[str, Any], shape: dict[str, int], backend: Any) -> TimingReport | None:
    """A worker's GPU measurement as a TimingReport (None when the kernel was wrong there)."""
    if m.get("ms") is None:
        return None
    named = {str(k): float(v) for k, v in (m.get("baselines") or {}).items()}
    # baseline_ms is the eager/library one; a compiler's (torch.compile) is only carried
    library = [v for k, v in named.items() if not k.startswith(COMPILED_BASELINE)]
    base = min(library) if library else None
    spec = backend.spec
    roof_ms = None  # the roofline floor: compute at matrix peak or bytes at HBM bandwidth
    if m.get("flops"):
        roof_ms = 1e3 * max(m["flops"] / spec.peak("bf16"), m["bytes"] / (spec.hbm_tbps * 1e12))
    return TimingReport(
        ms=m["ms"],
        estimated=False,
        shape=shape,
        tflops=m.get("tflops"),
        gbps=m.get("gbps"),
        pct_roofline=100 * roof_ms / m["ms"] if roof_ms else None,
        baseline_ms=base,
        speedup=base / m["ms"] if base else None,
        model="do_bench median; baselines: "
        + ", ".join(f"{k} {v:.4f} ms" for k, v in named.items()),
        baselines=named,
    )


def _planner_numbers(session: Any, limit: int = 200) -> dict[str, float]:
    """The numeric leaves of `session.state()` (value estimates, counts), dotted keys, so
    trackers can log how the planner's estimates move over the run."""
    state = session.state()
    out: dict[str, float] = {}

    def walk(prefix: str, node: Any) -> None:
        if len(out) >= limit:
            return
        if isinstance(node, dict):
            for k, v in node.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        elif isinstance(node, int | float) and not isinstance(node, bool):
            out[prefix] = float(node)

    walk("", state or {})
    return out


def _plain(node: Any) -> Any:
    """A config node (or None) as plain resolved data, for cache keys."""
    if node is None:
        return None
    if OmegaConf.is_config(node):
        return OmegaConf.to_container(node, resolve=True)
    return node


def _entries(family: KernelFamily, cand: Candidate) -> tuple[str, ...]:
    """The kernels a candidate runs: an LLM's module defines every kernel of the family's
    program; a planner's candidate runs those its policy picks (GEMM split-K: two)."""
    if cand.origin == "llm":
        return tuple(family.entries)
    return tuple(family.entries_for(dict(cand.policy.tiles)))


def _first(grid: Any, first: dict[str, Any]) -> dict[str, list[Any]]:
    """The policy grid with each of `first`'s values moved to the front of its list, where
    the list has it (a value the backend does not offer changes nothing)."""
    out = {str(k): list(v) for k, v in dict(grid or {}).items()}
    for name, value in first.items():
        if value in out.get(name, []):
            out[name].remove(value)
            out[name].insert(0, value)
    return out


def _policy_for(ir: Any, policy: Policy) -> Policy:
    """The policy restricted to the tile constants this kernel declares."""
    names = {c.name for c in ir.constexprs}
    return Policy({k: v for k, v in policy.tiles.items() if k in names}, dict(policy.compiler))


def _tensor_dtypes(family: KernelFamily, dtype: str, irs: list[Any]) -> dict[str, str]:
    """Element dtype of every tensor argument: the family's own choices (fp32 lse, int32
    indices), the run's dtype for the rest."""
    fixed = dict(family.tensor_dtypes(dtype))
    return {t.name: fixed.get(t.name, dtype) for ir in irs for t in ir.tensors}


_VERIFY_ORDER = ("violated", "unknown", "verified", "skipped")


def _merge_verify(reports: list[VerifyReport]) -> VerifyReport:
    """One report for a program of kernels: the worst status, every counterexample."""
    if len(reports) == 1:
        return reports[0]
    status = next(s for s in _VERIFY_ORDER if any(r.status == s for r in reports))
    return VerifyReport(
        status=status,  # type: ignore[arg-type]
        counterexamples=[c for r in reports for c in r.counterexamples],
        assertions=sum(r.assertions for r in reports),
        seconds=sum(r.seconds for r in reports),
        summary=next((r.summary for r in reports if r.status == status and r.summary), status),
    )


def _merge_compile(names: list[str], reports: list[CompileReport]) -> CompileReport:
    """One report for a program of kernels: peak registers and memory, summed counts."""
    if len(reports) == 1:
        return reports[0]

    def peak(values: Any, fn: Any = max) -> Any:
        vals = [v for v in values if v is not None]
        return fn(vals) if vals else None

    instructions: dict[str, int] = {}
    for r in reports:
        for k, v in r.instructions.items():
            instructions[k] = instructions.get(k, 0) + v
    return CompileReport(
        target=reports[0].target,
        ok=all(r.ok for r in reports),
        error="\n".join(f"{n}: {r.error}" for n, r in zip(names, reports) if r.error),
        seconds=sum(r.seconds for r in reports),
        registers=peak(r.registers for r in reports),
        sgprs=peak(r.sgprs for r in reports),
        agprs=peak(r.agprs for r in reports),
        spills=peak((r.spills for r in reports), sum),
        scratch_bytes=peak(r.scratch_bytes for r in reports),
        occupancy=peak((r.occupancy for r in reports), min),
        shared_bytes=peak(r.shared_bytes for r in reports),
        mma_count=peak((r.mma_count for r in reports), sum),
        buffer_loads=peak((r.buffer_loads for r in reports), sum),
        instructions=instructions,
        asm="\n".join(f"; ==== kernel {n} ====\n{r.asm}" for n, r in zip(names, reports)),
        asm_kind=reports[0].asm_kind,
    )


def _gist(text: str) -> str:
    """The last non-empty line of an error (where a traceback names the exception), cut
    to 300 characters."""
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


# a check whose error starts with one of these stages rejected the candidate before or
# while it ran (a static check of its source, a guard tripped by what it called) instead of
# comparing its output: the failure keeps that stage's name
REJECTING_STAGES = ("static", "guard")


def _correctness_failure(report: CorrectnessReport) -> str:
    """A failed check as the candidate's failure, "stage: reason"."""
    stage, _, why = report.error.partition(": ")
    if stage in REJECTING_STAGES:
        return f"{stage}: {_gist(why)}"
    return f"correctness: {_gist(report.error) or 'wrong result'}"


def _reward(res: CandidateResult, reference_ms: float | None) -> float:
    """Speedup over the reference candidate's time; failures are penalized by stage."""
    if res.failure is not None:
        return -1.0 if res.failure.startswith(("verify", "correctness")) else -0.5
    if res.timing is None or not res.timing.ms:
        return 0.0
    return (reference_ms or res.timing.ms) / res.timing.ms


def _best(results: list[CandidateResult]) -> CandidateResult | None:
    timed = [r for r in results if r.ok and r.timing is not None]
    return min(timed, key=lambda r: r.timing.ms) if timed else None


def _run_dir(cfg: DictConfig) -> str:
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        return HydraConfig.get().runtime.output_dir
    # outside Hydra (an API call): a new directory per run, even two in the same second
    base = os.path.join(".argus", "runs", time.strftime("%Y-%m-%d_%H-%M-%S"))
    os.makedirs(os.path.dirname(base), exist_ok=True)
    path, n = base, 0
    while True:
        try:
            os.mkdir(path)
            return path
        except FileExistsError:
            n += 1
            path = f"{base}-{n}"


# exit statuses of `run` (docs/design.md, "Exit statuses")
EXIT_OK = 0  # some candidate is correct
EXIT_NONE_CORRECT = 1  # the run ended, no candidate is correct
EXIT_BAD_INPUT = 2  # a bad value: nothing ran
EXIT_NOT_RECORDED = 3  # tracking or the results file failed: the run is not fully recorded
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT)
EXIT_TERMINATED = 143  # SIGTERM (timeout, Slurm, Ray): stopped like Ctrl-C

log = logging.getLogger("argus")


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the run is, so it stops like Ctrl-C and records what finished."""


_terminating = threading.Event()  # SIGTERM came: set even where the raise is swallowed


def _on_sigterm(signum: int, frame: Any) -> None:
    if _deferring.is_set():  # a record is being written (`_record_whole`)
        _deferred.append(signum)
        return
    # Python ignores an exception raised in some places (at-fork hooks, __del__); the flag
    # stops the run at the next candidate then
    _terminating.set()
    raise _Terminated


def _stop_if_terminated() -> None:
    if _terminating.is_set():
        raise _Terminated


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises `_Terminated` while the run is in this block (main thread only:
    Python delivers signals there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _terminating.clear()
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


_deferred: list[int] = []  # signals that came while a record was being written
_deferring = threading.Event()


def _on_sigint(signum: int, frame: Any) -> None:
    if _deferring.is_set():
        _deferred.append(signum)
        return
    raise KeyboardInterrupt


@contextmanager
def _record_whole(reraise: bool = True) -> Iterator[None]:
    """Ctrl-C or SIGTERM while a candidate (or the run's end) is written to the stores
    waits until the write is done: raised inside MLflow's SQLAlchemy session, it left the
    parent run RUNNING once in CI (the run ended 130 with its store half-written). Main
    thread only; where SIGINT is not Python's own handler (ignored, or the caller's) it is
    left alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _deferred.clear()
    own = signal.getsignal(signal.SIGINT) is signal.default_int_handler
    previous = signal.signal(signal.SIGINT, _on_sigint) if own else None
    _deferring.set()
    try:
        yield
    finally:
        _deferring.clear()
        if own:
            signal.signal(signal.SIGINT, previous)
    if _deferred:
        came = _deferred[:]
        _deferred.clear()
        if not reraise:  # the run is ending anyway
            return
        if signal.SIGTERM in came:
            _terminating.set()
            raise _Terminated
        raise KeyboardInterrupt


def _log_result(res: CandidateResult, cached: list[str] | None = None) -> None:
    """One line per candidate in the job log (Hydra's argus.log): its end, in full, and the
    stages that came from the result cache."""
    what = f"candidate {res.index} {res.candidate.id} {res.candidate.policy.key()}"
    if cached:
        what += f" [cached: {', '.join(cached)}]"
    if res.failure is not None:
        log.info("%s FAILED %s", what, res.failure)
    else:
        ms = f"{res.timing.ms:.4g} ms" if res.timing is not None else "no time"
        log.info("%s ok (verify %s, %s)", what, res.verify.status, ms)


def _previous_records(cfg: DictConfig, run_dir: str) -> list[CandidateResult]:
    """With resume=true, the candidates that a killed run of the same command finished:
    this run directory's records (a sweep job's directory is the same each time), else
    those of the newest directory beside it that the same overrides ran in, if that run
    never ended (it has records but no results.json)."""
    from argus_core.tracking.results import RESULTS, load_records, result_from_dict

    if not cfg.get("resume"):
        return []
    found = load_records(run_dir)
    if not found:
        here = Path(run_dir).resolve()
        mine = _overrides(here)
        same = [
            d
            for d in here.parent.iterdir()
            if d != here and d.is_dir() and _overrides(d) == mine and load_records(d)
        ]
        newest = max(same, key=lambda d: d.stat().st_mtime, default=None)
        if newest is not None and not (newest / RESULTS).exists():
            found = load_records(newest)
            print(f"argus: resuming the killed run in {newest}: {len(found)} candidates done")
    return [result_from_dict(d) for d in found]


def _overrides(run_dir: Path) -> list[str] | None:
    """The command-line overrides a Hydra run directory was made by, `resume` left out."""
    path = run_dir / ".hydra" / "overrides.yaml"
    if not path.is_file():
        return None
    try:
        listed = OmegaConf.load(path)
    except Exception:
        return None
    return sorted(str(o) for o in listed if not str(o).lstrip("+~").startswith("resume="))


def run(cfg: DictConfig) -> int:
    """Run one invocation; returns its exit status (EXIT_* above)."""
    from argus_core.config import check_kernel
    from argus_core.progress import Progress
    from argus_core.summary import render_reasons, render_table
    from argus_core.tracking.results import ResultsLog

    pm = default_plugin_manager()
    registry = Registry(pm)
    try:
        configure_sandbox(cfg.get("sandbox"))  # None: $ARGUS_SANDBOX, default auto
        stages = Stages.from_config(cfg, registry)
        check_kernel(stages.family, cfg.kernel)
        _parse_source(stages)
        _check_domain(stages)
        stages.cache = ResultCache.from_config(cfg.get("cache"), pm.get_plugins())
        planner = registry.get("planner", cfg.planner.name)
        tracker_factory = registry.get("tracking", cfg.tracking.name)
        llm = registry.get("llm", cfg.llm.name).create(cfg.llm)  # None for llm=none
    except ConfigError as exc:
        print(f"argus: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT

    run_dir = _run_dir(cfg)
    resolved = OmegaConf.to_container(cfg, resolve=True)
    info = RunInfo(
        run_id=uuid.uuid4().hex[:12],
        kernel=cfg.kernel.name,
        backend=stages.backend.name,
        planner=cfg.planner.name,
        config=resolved,  # type: ignore[arg-type]
        output_dir=run_dir,
        budget=int(cfg.budget),
    )
    records = ResultsLog(run_dir)
    previous = _previous_records(cfg, run_dir)
    try:
        records.begin()
    except OSError as exc:
        print(f"argus: cannot start the records in {run_dir}: {exc}", file=sys.stderr)
        return EXIT_NOT_RECORDED
    listener = tracker_factory.create(cfg.tracking, run_dir)
    pm.register(listener)
    try:
        session = planner.create(
            cfg.planner,
            {
                "family": stages.family,
                "dsl": stages.dsl,  # the language candidates are written in (LLM prompts)
                "backend": stages.backend,
                "kernel_cfg": cfg.kernel,
                "backend_cfg": stages.backend_cfg,
                "seed": int(cfg.seed),
                "budget": int(cfg.budget),
                "llm": llm,
            },
        )
    except ConfigError as exc:
        pm.unregister(listener)
        print(f"argus: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    llm_seen = 0  # transcript entries already logged with an earlier candidate
    results: list[CandidateResult] = []
    status, stopped = "FAILED", EXIT_INTERRUPTED
    not_recorded: list[str] = []  # what could not be recorded, said at once
    progress = Progress(int(cfg.budget), enabled={"on": True, "off": False}.get(cfg.progress))

    def record(res: CandidateResult, artifacts: dict[str, str], cached: list[str]) -> None:
        with _record_whole():
            pm.hook.argus_on_candidate_result(run=info, result=res, artifacts=artifacts)
            try:
                records.append(res, cache=cached)
            except OSError as exc:
                _not_recorded(not_recorded, f"results: cannot append to {records.path}: {exc}")
        if listener.failure():
            _not_recorded(not_recorded, f"tracking: {listener.failure()}")

    try:
        with _sigterm_as_interrupt():
            pm.hook.argus_on_run_start(run=info)
            if listener.failure():
                print(
                    f"argus: tracking failed at start: {listener.failure()}; nothing ran "
                    "(tracking=none runs without it)",
                    file=sys.stderr,
                )
                return EXIT_NOT_RECORDED
            log.info("run %s in %s: %d candidates", info.run_id, run_dir, int(cfg.budget))
            with progress:
                while len(results) < int(cfg.budget):
                    batch = session.propose(int(cfg.budget) - len(results))
                    if not batch:
                        break
                    for cand in batch:
                        _stop_if_terminated()
                        done = _replayed(previous, cand, len(results))
                        if done is not None:  # resume=true: finished before the kill
                            res, artifacts = done, {"dsl_source.py": cand.source}
                        else:
                            ref = _best(results)
                            res, artifacts = stages.evaluate(
                                cand, len(results), _reference_ms(results, ref)
                            )
                        res.candidate = cand
                        cached = stages.cache.take()
                        results.append(res)
                        session.observe(res)
                        res.planner = _planner_numbers(session)
                        if llm is not None and len(llm.transcript()) > llm_seen:
                            from argus_core.llm import transcript_artifact

                            artifacts["llm_transcript.json"] = transcript_artifact(
                                llm, since=llm_seen
                            )
                            llm_seen = len(llm.transcript())
                        _log_result(res, cached)
                        record(res, artifacts, cached)
                        progress.advance(res)
                        _stop_if_terminated()
            status = "FINISHED"
    except KeyboardInterrupt:
        status = "KILLED"
        if _terminating.is_set():
            stopped = EXIT_TERMINATED
            print("\nargus: terminated (SIGTERM); what finished is recorded", file=sys.stderr)
        else:
            print("\nargus: interrupted; what finished is recorded", file=sys.stderr)
    finally:
        if llm is not None:
            from argus_core.llm import usage_metrics

            info.metrics.update(usage_metrics(llm))
        info.metrics.update(stages.cache.metrics())  # cache.hits, cache.misses (MLflow)
        caught = synth_caught.catches(results)  # issue #19: which invariant caught which
        if caught or (cfg.verifier.get("options") or {}).get("synthesize"):
            info.metrics.update(synth_caught.metrics(caught))
        stages.cache.close()
        if listener.failure() is None or results:
            with _record_whole(reraise=False):  # a second Ctrl-C must not cut it in half
                pm.hook.argus_on_run_end(run=info, results=results, status=status)
        pm.unregister(listener)
    log.info("run %s %s: %d candidates", info.run_id, status, len(results))
    if stages.cache.summary():
        log.info("%s", stages.cache.summary())

    estimated = any(r.timing is not None and r.timing.estimated for r in results)
    print(
        f"\nargus: kernel={cfg.kernel.name} backend={stages.backend.name} planner={cfg.planner.name} "
        f"verifier={cfg.verifier.name} candidates={len(results)}"
    )
    print(render_table(results, estimated=estimated))
    reasons = render_reasons(results)
    if reasons:
        print(reasons)
    if synth_caught.summary_line(caught):  # issue #19
        print(synth_caught.summary_line(caught))
    if stages.cache.summary():
        print(stages.cache.summary())
    for line in listener.summary_lines():
        print(line)
    if listener.failure():
        _not_recorded(not_recorded, f"tracking: {listener.failure()}")
    try:
        records.write_final(results)
    except OSError as exc:
        _not_recorded(
            not_recorded, f"results: cannot write {records.path.with_name('results.json')}: {exc}"
        )
    print(f"Run directory: {os.path.abspath(run_dir)}")
    if status == "KILLED":
        return stopped
    if not_recorded:
        return EXIT_NOT_RECORDED
    return EXIT_OK if any(r.ok for r in results) else EXIT_NONE_CORRECT


def _parse_source(stages: Stages) -> None:
    """Parse a run's own DSL file (`kernel.source`) once, before any candidate: a syntax
    error there would otherwise fail every candidate the same way."""
    from argus_core.family import DSLKernelFamily

    family, source = stages.family, stages.cfg.kernel.get("source")
    if not source or not isinstance(family, DSLKernelFamily):
        return
    text = family.source()
    for entry in family.entries:
        try:
            trace_all_in_child(stages.dsl, text, [entry], str(family.source_path))
        except SandboxError:
            raise
        except ArgusError as exc:
            raise ConfigError(f"kernel.source={source!r} does not parse: {exc}") from exc
        except SyntaxError as exc:
            raise ConfigError(
                f"kernel.source={source!r} does not parse: line {exc.lineno}: {exc.msg}"
            ) from exc


def _check_domain(stages: Stages) -> None:
    """`kernel.domain` (argus_core.domain) checked before any candidate: its bounds, and that
    it names shape symbols of the kernel's own source (a family's file; `kernel.source`
    traced in the sandbox)."""
    from argus_core.family import DSLKernelFamily

    cfg, family = stages.cfg, stages.family
    max_extent = (cfg.verifier.get("options") or {}).get("max_extent")
    domain = parse_domain(cfg.kernel.get("domain"), int(max_extent) if max_extent else None)
    if not domain or not isinstance(family, DSLKernelFamily):
        return
    text, where = family.source(), str(family.source_path)
    if cfg.kernel.get("source"):
        irs = trace_all_in_child(stages.dsl, text, list(family.entries), where)
    else:
        irs = [stages.dsl.parse(text, entry, where) for entry in family.entries]
    check_names(domain, irs)


def _not_recorded(seen: list[str], reason: str) -> None:
    """Say at once, once per reason, that part of the run is not recorded."""
    if reason not in seen:
        seen.append(reason)
        log.error("not recorded: %s", reason)
        print(f"argus: not recorded: {reason}", file=sys.stderr)


def _replayed(
    previous: list[CandidateResult], cand: Candidate, index: int
) -> CandidateResult | None:
    """The earlier result of `cand` at this position of a resumed run, when it is the same
    candidate (same id, source and policy); None to evaluate it."""
    if index >= len(previous):
        return None
    old = previous[index]
    same = (
        old.candidate.id == cand.id
        and old.candidate.source == cand.source
        and old.candidate.policy.key() == cand.policy.key()
    )
    return old if same else None


def _reference_ms(results: list[CandidateResult], best: CandidateResult | None) -> float | None:
    """The first correct candidate's time: rewards are speedups over the starting policy."""
    for r in results:
        if r.ok and r.timing is not None:
            return r.timing.ms
    return best.timing.ms if best and best.timing else None


__all__ = ["Stages", "run"]
