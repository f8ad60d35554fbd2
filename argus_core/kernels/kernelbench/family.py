"""`kernel=kernelbench`: a KernelBench-format task as a kernel family.

Unbound (as registered) the family only knows its name; `for_task(kernel_cfg)` binds it to
the task `kernel.task` under `kernel.path` and to its candidate: `kernel.source=FILE` (a DSL
module, or a KernelBench-style ModelNew file, told apart by a `class ModelNew`), else the
DSL kernel a template emits for the task's graph (`match.py`). Binding also fills the run's
`kernel.tiles`, `kernel.shape` and `kernel.check_shapes` from the task, so the planners
search the template's tile sizes.

The pipeline calls three optional members of a family, present here:
`evaluate_candidate` (a ModelNew candidate is checked and timed here, not parsed as DSL),
`check_lowered` (a DSL candidate's correctness against the task's Model, as KernelBench
checks it), and `with_baseline` (the eager Model's time, estimated or measured, and the
speedup over it).
"""

from __future__ import annotations

import ast
import copy
from pathlib import Path
from typing import Any

from argus_core.errors import ConfigError
from argus_core.kernels.base import DSLKernelFamily
from argus_core.kernels.kernelbench import costs, evaluate, match, reference, tasks
from argus_core.types import CandidateResult, CorrectnessReport, Policy, TimingReport

DEFAULT_TRIALS = 5  # KernelBench's num_correct_trials
DEFAULT_INIT_SEED = 42  # the seed Model and ModelNew are both built under


def is_modelnew(source: str) -> bool:
    """True when `source` defines a top-level `class ModelNew` (a KernelBench candidate)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    return any(isinstance(s, ast.ClassDef) and s.name == "ModelNew" for s in tree.body)


class KernelBenchFamily(DSLKernelFamily):
    """A KernelBench task: its Model is the reference; candidates are DSL or ModelNew."""

    name = "kernelbench"
    entry = match.ENTRY
    outputs: tuple[str, ...] = ("out",)

    def __init__(self) -> None:
        self.source_path = None
        self.task: tasks.TaskRef | None = None
        self.kind = "dsl"  # or "modelnew"
        self.emission: match.Emission | None = None
        self.binding: dict[str, dict[str, Any]] = {}
        self.dtype = "fp32"
        self.trials = DEFAULT_TRIALS
        self.init_seed = DEFAULT_INIT_SEED
        self._text = ""
        self._gm: Any = None

    # ------------------------------------------------------------------ binding a task
    def for_task(self, kernel_cfg: Any) -> KernelBenchFamily:
        """A copy bound to the task and candidate `kernel_cfg` names; fills the config's
        tiles, shape and check_shapes. Raises ConfigError (TaskError, NoTemplate) naming the
        bad path, task or source and the valid choices."""
        from omegaconf import read_write

        bound = copy.copy(self)
        bound.task = tasks.resolve(kernel_cfg.get("path"), kernel_cfg.get("task"))
        options = dict(kernel_cfg.get("options") or {})
        bound.dtype = str(kernel_cfg.get("dtype") or "fp32")
        reference.tolerance(bound.dtype)  # a dtype KernelBench has no tolerance for fails now
        bound.trials = int(options.get("trials", DEFAULT_TRIALS))
        bound.init_seed = int(options.get("init_seed", DEFAULT_INIT_SEED))
        module = tasks.load_module(bound.task.path)
        model = reference.build_model(module, bound.init_seed, "fp32", "cpu")
        inputs = reference.make_inputs(module, 0, "fp32", "cpu")
        try:
            bound._gm = match.trace(model, inputs)
        except Exception as exc:  # fx cannot trace data-dependent control flow
            bound._gm = None
            trace_error = f"{type(exc).__name__}: {exc}"
        else:
            trace_error = ""
        source = kernel_cfg.get("source")
        shape: dict[str, int] = {}
        tiles: dict[str, list[int]] = {}
        if source:
            path = Path(source)
            if not path.is_file():
                raise ConfigError(f"kernel.source={source!r}: no such file")
            bound._text = path.read_text()
            bound.source_path = path.resolve()
            bound.kind = "modelnew" if is_modelnew(bound._text) else "dsl"
            if bound.kind == "dsl":
                bound.binding = _binding_by_name(bound._text, module, model)
                # the template's tile grid and dims, where one matches, suit the user's kernel
                # too; otherwise kernel.tiles must name its constants
                try:
                    em = match.match(bound._gm, bound.task.key) if bound._gm is not None else None
                except match.NoTemplate:
                    em = None
                if em is not None:
                    shape, tiles = dict(em.shape), dict(em.tiles)
        else:
            if bound._gm is None:
                raise match.NoTemplate(
                    f"no template matches task {bound.task.key} (torch.fx cannot trace it: "
                    f"{trace_error}); give kernel.source=FILE or use an LLM (planner.options.llm=true)"
                )
            bound.emission = match.match(bound._gm, bound.task.key)
            bound._text = bound.emission.source
            bound.binding = bound.emission.binding
            shape, tiles = dict(bound.emission.shape), dict(bound.emission.tiles)
        with read_write(kernel_cfg):
            if not kernel_cfg.get("tiles"):
                kernel_cfg.tiles = tiles
            if not kernel_cfg.get("shape"):
                kernel_cfg.shape = shape
            kernel_cfg.check_shapes = [dict(kernel_cfg.shape)]
        return bound

    def _need_task(self) -> tasks.TaskRef:
        if self.task is None:
            raise ConfigError(
                "kernel=kernelbench needs a task: kernel.path=DIR kernel.task=<level>/<id>"
            )
        return self.task

    # ------------------------------------------------------------------ the family protocol
    def source(self) -> str:
        """The candidate's text: the template's DSL kernel, or the kernel.source file."""
        self._need_task()
        return self._text

    def make_inputs(
        self, shape: dict[str, int], dtype: str, seed: int, device: str
    ) -> dict[str, Any]:
        """The task's `get_inputs()` under `seed`, by position ('in0', 'in1', ...)."""
        module = tasks.load_module(self._need_task().path)
        return {
            f"in{i}": x for i, x in enumerate(reference.make_inputs(module, seed, dtype, device))
        }

    def reference(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """The task Model's forward (built under the family's init seed) on those inputs."""
        module = tasks.load_module(self._need_task().path)
        args = [inputs[f"in{i}"] for i in range(len(inputs))]
        model = reference.build_model(module, self.init_seed, self.dtype, "cpu")
        return {"out": reference.run_model(model, args)}

    def flops(self, shape: dict[str, int]) -> float:
        """The task graph's FLOPs (its one shape; `shape` names the kernel's dims only)."""
        return sum(f for _, f, _ in costs.op_counts(self._gm, self.dtype)) if self._gm else 0.0

    def bytes(self, shape: dict[str, int], dtype: str) -> float:
        """Inputs, parameters and output moved once: what a fused kernel must move."""
        return costs.fused_bytes(self._gm, dtype) if self._gm is not None else 0.0

    def tolerance(self, dtype: str) -> tuple[float, float]:
        return reference.tolerance(dtype)

    # ------------------------------------------------------------------ pipeline hooks
    def check_lowered(
        self, lowered: list[Any], policy: Policy, *, runner: str, seed: int, timeout_s: float
    ) -> CorrectnessReport:
        """A DSL candidate's lowered kernel checked against the task's Model."""
        if len(lowered) != 1:
            raise ConfigError(f"a kernelbench DSL candidate is one kernel, got {len(lowered)}")
        candidate = {
            "kind": "dsl",
            "kernels": [lowered[0].to_dict()],
            "binding": self.binding,
            "constexprs": dict(policy.tiles),
            "compiler": dict(policy.compiler),
        }
        return self._check(candidate, runner, seed, timeout_s)

    def _check(
        self, candidate: dict[str, Any], runner: str, seed: int, timeout_s: float
    ) -> CorrectnessReport:
        timing = None
        if runner != "interpret":
            timing = {"flops": self.flops({}), "bytes": self.bytes({}, self.dtype)}
        return evaluate.check_candidate(
            str(self._need_task().path),
            candidate,
            dtype=self.dtype,
            trials=self.trials,
            seed=seed,
            init_seed=self.init_seed,
            runner=runner,
            timeout_s=timeout_s,
            timing=timing,
        )

    def evaluate_candidate(
        self, stages: Any, cand: Any, res: CandidateResult, artifacts: dict[str, str]
    ) -> bool:
        """Check and time a ModelNew candidate in full (True); False for a DSL candidate,
        which goes through the pipeline's parse, verify, lower and compile stages."""
        if self.kind != "modelnew":
            return False
        backend = stages.backend
        mode = stages.cfg.evaluate.correctness
        on_device = mode == "device" or (
            mode == "auto" and backend.name != "interpret" and backend.device_available()
        )
        runner = "cuda" if on_device else "interpret"
        name = str(self.source_path or "<candidate>")
        report = self._check(
            {"kind": "modelnew", "source": cand.source, "filename": name},
            runner,
            int(stages.cfg.seed) + res.index * 1000,
            float(stages.cfg.evaluate.timeout_s),
        )
        res.correctness = report
        if not report.ok:
            stage, _, why = report.error.partition(": ")
            if stage not in ("static", "guard"):  # a wrong answer, a crash or a timeout
                stage, why = "correctness", report.error
            res.failure = f"{stage}: {why.strip().splitlines()[0][:300]}"
            return True
        if report.timing is not None:
            res.timing = self.measured(report.timing)
        else:
            spec = getattr(backend, "spec", None)
            from argus_core.evaluate.costmodel import MI300X, estimate_time

            est = estimate_time(spec or MI300X, self, {}, self.dtype, Policy())
            est.model += " (a ModelNew: assumed one fused kernel at the untiled roofline)"
            res.timing = self.with_baseline(est, backend)
        return True

    def measured(self, m: dict[str, Any]) -> TimingReport:
        """The worker's GPU measurement of a candidate and the eager Model."""
        base = min(m["baselines"].values()) if m.get("baselines") else None
        return TimingReport(
            ms=m["ms"],
            estimated=False,
            tflops=m.get("tflops"),
            gbps=m.get("gbps"),
            baseline_ms=base,
            speedup=base / m["ms"] if base and m["ms"] else None,
            model="do_bench median; baseline: eager Model.forward",
        )

    def with_baseline(self, timing: TimingReport, backend: Any) -> TimingReport:
        """`timing` with the eager Model's estimated time as its baseline and the speedup
        over it (estimates stay labelled estimated; a measured report is returned as is)."""
        if not timing.estimated or self._gm is None or timing.baseline_ms is not None:
            return timing
        from argus_core.evaluate.costmodel import MI300X

        spec = getattr(backend, "spec", None) or MI300X
        timing.baseline_ms = costs.eager_estimate_ms(spec, self._gm, self.dtype)
        timing.speedup = timing.baseline_ms / timing.ms if timing.ms else None
        timing.model += f"; baseline: eager Model.forward, {len(costs.op_counts(self._gm, self.dtype))} ops estimated"
        return timing


def _binding_by_name(source: str, module: Any, model: Any) -> dict[str, dict[str, Any]]:
    """How a user's DSL kernel's tensors bind to the task: a tensor named like a forward
    argument is that input, one named like a Model parameter with dots as underscores
    (`fc_weight`) is that parameter, `out` is the output."""
    import inspect

    from argus_plugins.dsl.tile.frontend import TileFrontend

    ir = TileFrontend().parse(source, match.ENTRY, "<kernel.source>")
    args = list(inspect.signature(module.Model.forward).parameters)[1:]
    params = {k.replace(".", "_"): k for k, _ in model.named_parameters()}
    binding: dict[str, dict[str, Any]] = {}
    for t in ir.tensors:
        if t.name == "out":
            binding[t.name] = {"from": "output"}
        elif t.name in args:
            binding[t.name] = {"from": "input", "index": args.index(t.name)}
        elif t.name in params:
            binding[t.name] = {"from": "param", "attr": params[t.name]}
        else:
            raise ConfigError(
                f"kernel tensor {t.name!r} names nothing of the task; valid names: out, "
                f"{', '.join(args + list(params))}"
            )
    return binding
