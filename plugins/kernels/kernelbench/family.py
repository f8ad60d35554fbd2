"""`kernel=kernelbench`: a KernelBench-format task as a kernel family.

Unbound (as registered) the family only knows its name; `bind(kernel_cfg, dsl)` binds it to
the task `kernel.task` under `kernel.path` and to its candidate: `kernel.source=FILE` (a DSL
module, or a KernelBench-style ModelNew file, told apart by a `class ModelNew`), else the
DSL kernel a template emits for the task's graph (`match.py`), or the program of several
kernels it emits (`entries` names them in launch order; each is verified, lowered and
compiled by the pipeline, and `check` launches them all by the emission's plan). Binding also fills the run's
`kernel.tiles`, `kernel.shape` and `kernel.check_shapes` from the task, so the planners
search the template's tile sizes.

An ordinary family otherwise (`argus_core.family.FamilyBase`), overriding three members:
`candidate_kind` (a ModelNew is a "program" candidate, checked by `check_program` rather
than parsed as DSL), `check` (a DSL candidate's correctness against the task's Model, as
KernelBench checks it) and `baseline_estimate` (the eager Model's estimated time and the
speedup over it). The pipeline decides where candidates run and passes it in (`CheckRun`).
"""

from __future__ import annotations

import ast
import copy
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from argus_core.errors import ConfigError, choices_error
from argus_core.evaluate.check import CandidateKind, CheckRun
from argus_core.family import FamilyBase
from argus_core.frontend import CaptureError, capture_task
from argus_core.types import Candidate, CorrectnessReport, LoweredKernel, Policy, TimingReport
from argus_plugins.kernels.kernelbench import costs, evaluate, harness, match, reference, tasks

if TYPE_CHECKING:
    from argus_core.protocols import DSLFrontend
    from argus_core.target import TargetSpec

DEFAULT_TRIALS = 5  # KernelBench's num_correct_trials
DEFAULT_INIT_SEED = 42  # the seed Model and ModelNew are both built under


def is_modelnew(source: str) -> bool:
    """True when `source` defines a top-level `class ModelNew` (a KernelBench candidate)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    return any(isinstance(s, ast.ClassDef) and s.name == "ModelNew" for s in tree.body)


# programs a full-size matmul should launch at least: one per SM of the GPUs it targets
# (the H100's and H200's 132, MI300X's 304 CUs take two rounds); fewer leave SMs idle
MIN_PROGRAMS = 128


def gpu_matmul_tiles(
    tiles: dict[str, list[int]], shape: dict[str, int], cap: int = 128
) -> tuple[dict[str, list[int]], dict[str, int]]:
    """The matmul template's tile lists for a full-size task (a GPU's), largest first, and
    the warps its first policy wants. The template's own lists start at 32 x 32 x 16 (the
    interpreter's and a scaled task's); on the H200 a 4096^3 fp32 product took 6.56 ms
    there, 1.40 ms at 128 x 128 x 32 with 8 warps (bf16x3 dots; eager 2.69 ms;
    docs/performance.md, 2026-12-02). At most `cap` a side (128 x 256 spills: tf32x3,
    sm_90), and halved (the longer side first, down to 32) while the output has fewer than
    MIN_PROGRAMS tiles: a 256 x 256 output with K = 2^19 (level1/6) ran 4 programs at
    128 x 128, 0.51x its time at 32 x 32."""
    m, n, k = (int(shape.get(d) or 0) for d in ("M", "N", "K"))
    if not (m and n and k) or not {"BM", "BN", "BK"} <= set(tiles):
        return dict(tiles), {}
    batch = int(shape.get("B") or 1)  # a batched product (template `bmm`): B outputs
    bm = min(cap, match._np2(m))
    bn = min(cap, match._np2(n))
    while batch * -(-m // bm) * -(-n // bn) < MIN_PROGRAMS and max(bm, bn) > 32:
        if bm >= bn:
            bm //= 2
        else:
            bn //= 2
    out = dict(tiles)
    out["BM"] = [bm, *[t for t in (128, 64, 32, 16) if t != bm and t <= match._np2(m)]]
    out["BN"] = [bn, *[t for t in (128, 64, 32, 16) if t != bn and t <= match._np2(n)]]
    out["BK"] = [t for t in (32, 16) if t <= match._np2(k)] or [16]
    if "GROUP" in out:
        out["GROUP"] = [8, *[g for g in out["GROUP"] if g != 8]]
    return out, ({"num_warps": 8} if bm * bn >= 128 * 128 else {})


def gpu_program_tiles(
    tiles: dict[str, list[int]], parts: tuple[tuple[str, dict[str, int]], ...]
) -> tuple[dict[str, list[int]], dict[str, int]]:
    """A program's tile lists (and compiler options) for a full-size task: each matmul
    kernel's (`k<i>_BM`, ...) as `gpu_matmul_tiles` orders them, at most 64 a side: the
    program's kernels share one `num_warps`, and 64 x 64 x 32 at 4 warps took 1.60 ms where
    128 x 128 at 8 took 1.40 (the 4096^3 product above). A program of one kernel besides
    weight copies (`relayout`, indifferent to num_warps) is tiled as that kernel alone."""
    out = dict(tiles)
    main = [i for i, (template, _) in enumerate(parts) if not template.startswith("relayout")]
    if len(main) == 1:
        i = main[0]
        own = {t[len(f"k{i}_") :]: v for t, v in tiles.items() if t.startswith(f"k{i}_")}
        ordered, compiler = gpu_tiles(parts[i][0], own, parts[i][1])
        out.update({f"k{i}_{t}": v for t, v in ordered.items()})
        return out, compiler
    for i, (template, shape) in enumerate(parts):
        own = {t[len(f"k{i}_") :]: v for t, v in tiles.items() if t.startswith(f"k{i}_")}
        if template in ("matmul", "bmm"):
            ordered, _ = gpu_matmul_tiles(own, shape, cap=64)
        elif template == "conv":
            ordered, _ = gpu_conv_tiles(own, in_program=True)
        else:
            ordered, _ = gpu_tiles(template, own, shape)
        out.update({f"k{i}_{t}": v for t, v in ordered.items()})
    return out, {}


# elements an elementwise program covers on a GPU: 32 a thread at 4 warps, as 16 rows (the
# smallest tile extent the targets take) of 256 contiguous elements (1 KB segments, 16-byte
# vector loads). The templates' own 16 x 32 (the interpreter's cheapest) ran level1/19
# (ReLU of 1.6 G fp32) at 2.75 TB/s on the H200, eager at 4.25 (2026-12-02)
FLAT_ELEMS = 4096
FLAT_BC = 256


def gpu_flat_tiles(tiles: dict[str, list[int]], shape: dict[str, int]) -> dict[str, list[int]]:
    """An elementwise [R, C] template's (`elementwise`, `bcast`) tile lists for a full-size
    task: BC as wide as the row allows up to FLAT_BC, BR the rows that make FLAT_ELEMS
    (at most R rounded up, at least 16), each first; the template's values stay reachable
    after them."""
    r, c = int(shape.get("R") or 0), int(shape.get("C") or 0)
    if not (r and c) or not {"BR", "BC"} <= set(tiles):
        return dict(tiles)
    bc = min(FLAT_BC, match._np2(c))
    br = max(16, min(match._np2(r), FLAT_ELEMS // bc))
    out = dict(tiles)
    out["BC"] = [bc, *[t for t in tiles["BC"] if t != bc]]
    out["BR"] = [br, *[t for t in tiles["BR"] if t != br]]
    return out


# a reduction over a middle dim (template `midreduce`) on a GPU: BC contiguous columns by
# BR reduced rows per step of the program's loop. At BC = 512 on 4 warps (4 columns a
# thread, 32 lanes, 4 warps along C) each thread holds every row of its columns: a step's
# reduction over BR stays in registers (BR 32 x BC 128 spread the rows over the warps: an
# exchange through shared memory every step; sm_90: 40 registers, 3 KB of it)
MID_BR, MID_BC = 16, 512


def gpu_midreduce_tiles(tiles: dict[str, list[int]], shape: dict[str, int]) -> dict[str, list[int]]:
    """`midreduce`'s tile lists for a full-size task: MID_BR x MID_BC first (at most the
    extents rounded up; BC halved, down to 32, while the grid of A x C/BC programs has
    fewer than MIN_PROGRAMS), the template's values after them."""
    if not {"BR", "BC"} <= set(tiles):
        return dict(tiles)
    r, c = int(shape.get("N") or MID_BR), int(shape.get("C") or MID_BC)
    a = max(1, int(shape.get("M") or c) // c)
    br = min(MID_BR, match._np2(r))
    bc = min(MID_BC, match._np2(c))
    while a * -(-c // bc) < MIN_PROGRAMS and bc > 32:
        bc //= 2
    out = dict(tiles)
    out["BR"] = [br, *[t for t in tiles["BR"] if t != br]]
    out["BC"] = [bc, *[t for t in tiles["BC"] if t != bc]]
    return out


def gpu_reduce_tiles(tiles: dict[str, list[int]]) -> dict[str, list[int]]:
    """A whole-tensor reduction's (`fullreduce`, `lossreduce`) tile lists for a full-size
    task: BC up to FLAT_BC where the template lets it choose (a row-spanning BC is fixed),
    then the ROWS (at most 16) that make FLAT_ELEMS a step: level1/95's [16, 4096] steps
    (the template's first) held 512 values a thread on 4 warps."""
    if not {"ROWS", "BC"} <= set(tiles):
        return dict(tiles)
    bc = FLAT_BC if FLAT_BC in tiles["BC"] else tiles["BC"][0]
    want = max(1, min(16, FLAT_ELEMS // bc))
    rows = want if want in tiles["ROWS"] else min(tiles["ROWS"], key=lambda r: abs(r - want))
    out = dict(tiles)
    out["BC"] = [bc, *[t for t in tiles["BC"] if t != bc]]
    out["ROWS"] = [rows, *[t for t in tiles["ROWS"] if t != rows]]
    return out


def gpu_rows_tiles(tiles: dict[str, list[int]], shape: dict[str, int]) -> dict[str, list[int]]:
    """A row template's (`rowprog`, `softmax`, `rowreduce`: ROWS whole rows of BN; `rownorm`,
    `rowlong`: ROWS rows walked in BL or BN column tiles) lists for a full-size task: the
    most ROWS whose ROWS x (BN or BL) tile stays within FLAT_ELEMS while the M rows still
    make MIN_PROGRAMS programs, else the fewest. The interpreter's first, up to 2^16
    elements, spilled on sm_90 (a [4, 8192] row tile after a GEMM: 30-347 registers'
    worth, level2/22, 84, 99; rownorm's [16, 1024]: 16 programs at level1/40's 16 rows)."""
    col = "BN" if "BN" in tiles else "BL" if "BL" in tiles else None
    if col is None or "ROWS" not in tiles:
        return dict(tiles)
    width, m = tiles[col][0], int(shape.get("M") or 0)
    fits = [
        r
        for r in tiles["ROWS"]
        if r * width <= FLAT_ELEMS and (not m or -(-m // r) >= MIN_PROGRAMS)
    ]
    rows = max(fits) if fits else min(tiles["ROWS"])
    out = dict(tiles)
    out["ROWS"] = [rows, *[r for r in tiles["ROWS"] if r != rows]]
    return out


def gpu_bp(tiles: dict[str, list[int]]) -> dict[str, list[int]]:
    """A convolution's lists without the position blocks only the interpreter takes
    (`match.INTERP_BP`: a full-size task's kernel runs on a GPU)."""
    if "BP" not in tiles:
        return dict(tiles)
    return {**tiles, "BP": [t for t in tiles["BP"] if t not in match.INTERP_BP] or tiles["BP"][:1]}


def gpu_conv_tiles(
    tiles: dict[str, list[int]], in_program: bool = False
) -> tuple[dict[str, list[int]], dict[str, int]]:
    """The convolution template's first policy for a full-size task: a BP x BC block of
    128 x 128 or more (BC spans the output channels an epilogue reduces over) wants 8
    warps (sm_90, bf16x3: 222-264 registers' worth spilled at 4, level2/32 and 91; none at
    8); in a program, whose kernels share one num_warps, BP halves instead (64 x 128 at 4
    warps: none)."""
    tiles = gpu_bp(tiles)
    if not {"BP", "BC"} <= set(tiles) or tiles["BP"][0] * tiles["BC"][0] < 128 * 128:
        return dict(tiles), {}
    if not in_program:
        return dict(tiles), {"num_warps": 8}
    out = dict(tiles)
    bp = max(16, (128 * 128 // 2) // tiles["BC"][0])
    out["BP"] = [bp, *[t for t in tiles["BP"] if t != bp]]
    return out, {}


def gpu_tiles(
    template: str, tiles: dict[str, list[int]], shape: dict[str, int]
) -> tuple[dict[str, list[int]], dict[str, int]]:
    """A template's tile lists (and the compiler options its first policy wants) for a
    full-size task, where they differ from the interpreter's: the templates' own lists put
    the interpreter's cheapest first."""
    if template in ("matmul", "bmm"):
        return gpu_matmul_tiles(tiles, shape)
    if template in ("elementwise", "bcast", "normscale"):
        return gpu_flat_tiles(tiles, shape), {}
    if template == "midreduce":
        return gpu_midreduce_tiles(tiles, shape), {}
    if template in ("fullreduce", "lossreduce"):
        return gpu_reduce_tiles(tiles), {}
    if template in ("rowprog", "softmax", "rowreduce", "rownorm", "rowlong", "softmax_long"):
        return gpu_rows_tiles(tiles, shape), {}
    if template == "conv":
        return gpu_conv_tiles(tiles)
    if template == "dwconv":
        return gpu_bp(tiles), {}
    return dict(tiles), {}


class KernelBenchFamily(FamilyBase):
    """A KernelBench task: its Model is the reference; candidates are DSL or ModelNew."""

    name = "kernelbench"
    entry = match.ENTRY
    outputs: tuple[str, ...] = ("out",)

    def __init__(self) -> None:
        self.source_path: Path | None = None
        self.task: tasks.TaskRef | None = None
        self.kind = "dsl"  # or "modelnew"
        self.emission: match.Emission | None = None
        self.binding: dict[str, dict[str, Any]] = {}
        self.dtype = "fp32"
        self.trials = DEFAULT_TRIALS
        self.init_seed = DEFAULT_INIT_SEED
        self._text = ""
        self._gm: Any = None

    @property
    def entries(self) -> tuple[str, ...]:
        """The kernels of the candidate: the emitted program's (`match.Emission.entries`,
        in launch order), else the one `entry`."""
        if self.emission is not None and self.emission.entries:
            return tuple(self.emission.entries)
        return (self.entry,)

    # ------------------------------------------------------------------ binding a task
    def bind(self, kernel_cfg: Any, dsl: DSLFrontend) -> KernelBenchFamily:
        """A copy bound to the task and candidate `kernel_cfg` names; fills the config's
        tiles, shape and check_shapes. `dsl` parses a DSL `kernel.source` to bind its
        tensors by name. Raises ConfigError (TaskError, NoTemplate) naming the bad path,
        task or source and the valid choices."""
        from omegaconf import read_write

        bound = copy.copy(self)
        options = dict(kernel_cfg.get("options") or {})
        scale = options.get("scale")
        bound.task = tasks.scaled(
            tasks.resolve(kernel_cfg.get("path"), kernel_cfg.get("task")),
            float(scale) if scale is not None else None,
        )
        bound.dtype = str(kernel_cfg.get("dtype") or "fp32")
        reference.tolerance(bound.dtype)  # a dtype KernelBench has no tolerance for fails now
        bound.trials = int(options.get("trials", DEFAULT_TRIALS))
        bound.init_seed = int(options.get("init_seed", DEFAULT_INIT_SEED))
        prepack = options.get("prepack_weights", True)
        if not isinstance(prepack, bool):
            raise ConfigError(choices_error("kernel.options.prepack_weights", prepack,
                                            (True, False)))  # fmt: skip
        module = tasks.load_module(bound.task.path)
        # the graph's shapes come from meta tensors: nothing full-size is made here
        try:
            bound._gm, _ = capture_task(module, bound.task.key)
        except CaptureError as exc:  # fx cannot trace data-dependent control flow
            bound._gm = None
            trace_error = str(exc)
        else:
            trace_error = ""
            # a tensor past int32 offsets (level1/4's 2^31-element matrix): 64-bit offsets
            bound.wide_offsets = costs.largest_numel(bound._gm) >= harness.INT32_ELEMS
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
                bound.binding = _binding_by_name(dsl, bound._text, module, _meta_model(module))
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
                    f"no template matches task {bound.task.key} (capture failed: "
                    f"{trace_error}); give kernel.source=FILE or use an LLM (planner.options.llm=true)"
                )
            bound.emission = match.match(bound._gm, bound.task.key)
            # a whole-tensor reduction over many programs (a GPU's: the full-size task's;
            # the interpreter's cost is per program, so a scaled task keeps one unless
            # kernel.options.split_reductions=true)
            split = options.get("split_reductions")
            if bool(scale is None if split is None else split):
                bound.emission = match.split_reduction(bound.emission, bound.task.key)
            # a convolution's weight read through its permuted view has no unit stride: a
            # copy made contiguous first (kernel.options.prepack_weights=false: read in place)
            # with bf16x3 fp32 dots, a conv takes them as three bf16 dots on the bf16 halves of
            # its operands, the weight's split once per call (1.8x faster on the H200 than
            # Triton's own bf16x3 at the same tiles, benchmarks/conv_lab.py)
            halves = str(kernel_cfg.get("fp32_dot") or "ieee") == "bf16x3"
            if prepack:
                bound.emission = match.prepack_weights(
                    bound.emission, bound.task.key, bound._gm, halves=halves
                )
            bound._text = bound.emission.source
            bound.entry = bound.emission.entry  # a program's: its last kernel
            bound.binding = bound.emission.binding
            shape, tiles = dict(bound.emission.shape), dict(bound.emission.tiles)
            if scale is not None:
                # a scaled task runs in the interpreter, whose cost is per program: the
                # largest position block first (fewest programs); a program's are k<i>_BP
                for name in tiles:
                    if name == "BP" or name.endswith("_BP"):
                        tiles[name] = sorted(tiles[name], reverse=True)
            elif bound.emission.parts:
                tiles, bound.compiler_first = gpu_program_tiles(tiles, bound.emission.parts)
            else:
                tiles, bound.compiler_first = gpu_tiles(bound.emission.template, tiles, shape)
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
        """Inputs, parameters and output moved once: what a fused kernel must move; a
        program also writes each intermediate buffer once and reads it back once."""
        if self._gm is None:
            return 0.0
        total = costs.fused_bytes(self._gm, dtype)
        if self.emission is not None and self.emission.entries:
            from argus_core.evaluate.dtypes import torch_dtype

            plan = self.emission.binding.get(match.PROGRAM, {})
            shapes = [
                list(n.meta["tensor_meta"].shape)
                for n in self._gm.graph.nodes
                if n.op == "placeholder" and "tensor_meta" in n.meta
            ]
            kinds = dict(plan.get("dtypes") or {})
            for name, extents in plan.get("buffers", {}).items():
                size = torch_dtype(kinds.get(name, dtype)).itemsize
                ext = [eval(e, {"__builtins__": {}}, {"s": shapes}) if isinstance(e, str) else e
                       for e in extents]  # noqa: S307  # fmt: skip
                total += 2.0 * math.prod(int(v) for v in ext) * size
        return total

    def tolerance(self, dtype: str) -> tuple[float, float]:
        return reference.tolerance(dtype)

    def tensor_dtypes(self, dtype: str) -> dict[str, str]:
        """Kernel tensors bound to a program's buffer of its own dtype (the plan's "dtypes":
        a weight's bf16 halves), by tensor name; the run's dtype for the rest."""
        plan = (self.emission.binding.get(match.PROGRAM) if self.emission else None) or {}
        kinds = dict(plan.get("dtypes") or {})
        out: dict[str, str] = {}
        for launch in plan.get("launches", []) if kinds else ():
            for name, src in launch["binding"].items():
                if isinstance(src, dict) and src.get("from") == "buffer":
                    kind = kinds.get(src.get("name"), dtype)
                    if out.setdefault(name, kind) != kind:
                        raise ConfigError(
                            f"tensor {name!r} of task {self._need_task().key}'s program is "
                            f"bound to buffers of dtypes {out[name]} and {kind}"
                        )
        return {k: v for k, v in out.items() if v != dtype}

    def unit_strides(self, entry: str) -> dict[str, int | None]:
        """Tensors of kernel `entry` bound through a view whose stride-1 dim is not its last
        (a conv's channels-last input and output, its weight seen [taps, G, C/G, OC/G])."""
        binding = self.binding
        plan = (self.emission.binding.get(match.PROGRAM) if self.emission else None) or {}
        for launch in plan.get("launches", []):
            if launch["entry"] == entry:
                binding = launch["binding"]
        out: dict[str, int | None] = {}
        for name, src in binding.items():
            view = src.get("view") if isinstance(src, dict) else None
            if not view or src.get("shape") is not None:
                continue
            dim, rank = harness.unit_stride_dim(view)
            if dim != rank - 1:
                out[name] = dim
        return out

    # ------------------------------------------------------------------ checks
    def reference_specs(self, entry: str) -> list[tuple[dict[str, int], Any]]:
        """The emitted kernel's data-flow spec, derived from the task's captured graph over
        the kernel's tensors and row views (`emission_spec`); none for other entries, or
        where the graph has an op the spec rules lack or a view they cannot express."""
        if self.emission is None or self._gm is None:
            return []
        if entry not in (self.emission.entries or (self.emission.entry,)):
            return []
        try:  # a program's kernel: its part of the graph (`emission_spec`)
            return [({}, emission_spec(self._gm, self.emission, entry))]
        except (ConfigError, ValueError):
            return []

    def candidate_kind(self, cand: Candidate) -> CandidateKind:
        """A ModelNew program is checked whole by `check_program`; anything else is DSL."""
        return "program" if is_modelnew(cand.source) else "dsl"

    def check(
        self, lowered: list[LoweredKernel], policy: Policy, run: CheckRun
    ) -> CorrectnessReport:
        """A DSL candidate's lowered kernel (a program's kernels, in launch order: the
        binding's launch plan names them) checked against the task's Model."""
        want = len(self.entries) if self.kind == "dsl" and self.emission is not None else 1
        if len(lowered) != want:
            raise ConfigError(
                f"a kernelbench DSL candidate of task {self._need_task().key} is {want} "
                f"kernel(s) ({', '.join(self.entries)}), got {len(lowered)}"
            )
        candidate = {
            "kind": "dsl",
            "kernels": [k.to_dict() for k in lowered],
            "binding": self.binding,
            "constexprs": dict(policy.tiles),
            "compiler": dict(policy.compiler),
        }
        return self._check(candidate, run)

    def check_program(self, cand: Candidate, run: CheckRun) -> CorrectnessReport:
        """A ModelNew candidate: rejected statically ("static: ..."), or by the guard while
        it runs ("guard: ..."), or checked against the task's Model (and timed beside the
        eager Model on a GPU runner)."""
        name = str(self.source_path or f"<{cand.id}>")
        return self._check({"kind": "modelnew", "source": cand.source, "filename": name}, run)

    def _check(self, candidate: dict[str, Any], run: CheckRun) -> CorrectnessReport:
        # KernelBench's own trial count and dtype (the task's), the run's runner and seed
        timing = None
        if run.runner != "interpret":
            timing = {"flops": self.flops({}), "bytes": self.bytes({}, self.dtype)}
        return evaluate.check_candidate(
            str(self._need_task().path),
            candidate,
            dtype=self.dtype,
            trials=self.trials,
            seed=run.seed,
            init_seed=self.init_seed,
            runner=run.runner,
            timeout_s=run.timeout_s,
            timing=timing,
            memory=self._memory(),
        )

    def _memory(self) -> dict[str, int] | None:
        """The task's memory estimate from the graph bind captured (None without one)."""
        if self._gm is None:
            return None
        try:
            return costs.memory_estimate(self._gm)
        except Exception:  # no estimate: the check's child makes its own
            return None

    def baseline_estimate(self, timing: TimingReport, spec: TargetSpec) -> TimingReport:
        """`timing` with the eager Model's estimated time on `spec` as its baseline and the
        speedup over it (a measured report, or one with a baseline, is returned as is)."""
        if not timing.estimated or self._gm is None or timing.baseline_ms is not None:
            return timing
        if self.kind == "modelnew":
            timing.model += " (a ModelNew: assumed one fused kernel at the untiled roofline)"
        timing.baseline_ms = costs.eager_estimate_ms(spec, self._gm, self.dtype)
        timing.speedup = timing.baseline_ms / timing.ms if timing.ms else None
        ops = len(costs.op_counts(self._gm, self.dtype))
        timing.model += f"; baseline: eager Model.forward, {ops} ops estimated"
        return timing


def _meta_model(module: Any) -> Any:
    """The task's Model built on the meta device (its parameter names, no storage)."""
    import torch

    with torch.device("meta"):
        return module.Model(*list(module.get_init_inputs()))


def _binding_by_name(
    dsl: DSLFrontend, source: str, module: Any, model: Any
) -> dict[str, dict[str, Any]]:
    """How a user's DSL kernel's tensors bind to the task (parsed by the run's `dsl`): a
    tensor named like a forward argument is that input, one named like a Model parameter
    with dots as underscores (`fc_weight`) is that parameter, `out` is the output."""
    import inspect

    ir = dsl.parse(source, match.ENTRY, "<kernel.source>")
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


def emission_spec(gm: Any, emission: match.Emission, entry: str | None = None) -> Any:
    """The spec of `gm` (`argus_core.spec`) written over an emitted kernel's tensors: graph
    input i and parameter p go by the kernel tensors the binding takes from them (a
    parameter bound twice, by both), the output by the output's, through the binding's row
    views ("2d", "1d"). Of a program, the spec of its kernel `entry` (default the last):
    the part of the graph it computes (`match.Emission.segments`: from graph inputs and
    earlier kernels' buffers to its buffer or the output), the buffers its inputs and
    output by their plan names (`t<k>`) under the views it launches them through; a weight
    copy (`relayout`) read as the parameter under the copy's view. CannotDerive /
    ValueError / ConfigError where it cannot be written (a weight copy's own kernel, a
    program whose buffers are no graph node's: a split reduction's partial sums)."""
    from argus_core.spec import spec_of_graph
    from argus_core.spec.views import spec_over_views

    n_in = sum(1 for n in gm.graph.nodes if n.op == "placeholder")
    if not emission.entries:
        names, views = _names_and_views(emission.binding)
        spec = spec_over_views(spec_of_graph(gm, [f"in{i}" for i in range(n_in)]), views)
        spec.names = names
        return spec
    return _program_spec(gm, emission, entry or emission.entry)


def _copy_spec(gm: Any, binding: dict[str, Any]) -> Any:
    """The spec of a weight copy (`relayout`): its buffer `y` holds the parameter `w`
    under the copy's view, element for element (y[i] <- w[i], both through the view: the
    parameter's own dims and sizes as the graph's spec names them); of its bf16 halves
    (`relayout_halves`), each of `yh` and `yl` reads w[i] (their values are arithmetic)."""
    from argus_core.spec import spec_of_graph
    from argus_core.spec.model import OutputSpec, Read, Spec, out_sym
    from argus_core.spec.views import spec_over_views

    w = binding["w"]
    attr, view = str(w["attr"]), w.get("view")
    ys = {str(binding[y]["name"]): y for y in ("y", "yh", "yl") if y in binding}
    n_in = sum(1 for n in gm.graph.nodes if n.op == "placeholder")
    whole = spec_of_graph(gm, [f"in{i}" for i in range(n_in)])
    if attr not in whole.params:
        raise ConfigError(f"the weight copy reads {attr}, which the graph's spec never reads")
    dims = whole.params[attr]
    read = Read(attr, tuple(out_sym(d) for d in range(len(dims))))
    outs = {buf: OutputSpec(buf, dims, [read]) for buf in ys}
    spec = Spec(outs, {}, params={attr: dims}, sizes=dict(whole.sizes))
    if view:
        spec = spec_over_views(spec, {attr: view, **{buf: view for buf in ys}})
    spec.names = {attr: ("w",), **{buf: (y,) for buf, y in ys.items()}}
    return spec


def _split_spec(
    gm: Any, emission: match.Emission, templates: list[str], launches: list[Any], at: int
) -> Any:
    """The spec of kernel `at` of a split whole-tensor reduction (`match.split_reduction`),
    whose buffers no graph node is, from the graph's own spec (`out0` reads elements only
    under reduced variables): the partial sums' kernel writes each of the P partials
    `t0[s]` from reads of that reduction (which elements a partial takes is the kernel's
    split; the reads are the reduction's, under its reduced variables); `partials` sums
    `t0` (and, for a cross entropy's mean, reads the targets it counts) into the output
    (or, for a norm, into `t1`); `normscale` reads the element itself and `t1[0]`."""
    from argus_core.ir import Sym
    from argus_core.spec import spec_of_graph
    from argus_core.spec.model import Bound, OutputSpec, Read, Spec
    from argus_core.spec.views import spec_over_views

    n_in = sum(1 for n in gm.graph.nodes if n.op == "placeholder")
    whole = spec_of_graph(gm, [f"in{i}" for i in range(n_in)])
    (out,) = whole.outputs.values()
    extents = emission.binding[match.PROGRAM].get("buffers") or {}
    binding = launches[at]["binding"]
    names, views = _names_and_views(binding)
    o_syms = {Sym(f"o{d}", "spec") for d in range(8)}

    def whole_reads(elementwise: bool) -> list[Read]:
        """The reads over reduced variables only, or (`elementwise`) those at the element."""
        return [r for r in out.reads if bool(_read_syms(r) & o_syms) == elementwise]

    t = templates[at]
    dst = _spec_key(binding["y"], {})  # every kernel of a split writes `y`
    if t == "partials":
        p = int(extents["t0"][0])
        r = Sym("rp", "spec")
        reads = [Read("t0", (r,))]
        bounds = {r: Bound(r, "reduce", p, "partials")}
        counted = {k for k in names if k.startswith("in") and k != "t0"}
        for rd in out.reads:  # a cross entropy's mean: the targets it counts
            if rd.tensor in counted:
                reads.append(rd)
                bounds |= {b: out.bounds[b] for b in rd.bound_syms(out.bounds)}
        shape = out.shape if dst == "out0" else (1,)
        spec = Spec({dst: OutputSpec(dst, shape, reads, bounds)}, dict(whole.dims),
                    params=dict(whole.params), sizes=dict(whole.sizes))  # fmt: skip
    elif t == "normscale":
        reads = [*whole_reads(True), Read("t1", (0,))]
        spec = Spec({dst: OutputSpec(dst, out.shape, reads, dict(out.bounds))}, dict(whole.dims),
                    params=dict(whole.params), sizes=dict(whole.sizes))  # fmt: skip
    else:  # the partial sums: each of them reads the reduction's elements
        p = int(extents["t0"][0])
        reads = whole_reads(False) if "normscale" in templates else list(out.reads)
        spec = Spec({dst: OutputSpec(dst, (p,), reads, dict(out.bounds))}, dict(whole.dims),
                    params=dict(whole.params), sizes=dict(whole.sizes))  # fmt: skip
    spec = spec_over_views(spec, views)
    spec.names = names
    return spec


def _sdpa_wide_spec(gm: Any, binding: dict[str, Any], template: str) -> Any:
    """The spec of one kernel of a wide head's attention (`lower_more._sdpa_wide`), whose
    weights buffer `t0` no graph node is (the graph has one scaled_dot_product_attention):
    `sdpa_scores` writes t0 = softmax(q kᵀ * scale) (the element's own key, and every key
    of its row for the softmax), `sdpa_pv` writes t0 @ v; each derived from that step as a
    module, on meta tensors of the graph's shapes."""
    import torch

    from argus_core.spec import spec_of_module

    shapes = [
        tuple(
            int(d) for d in (n.meta.get("val") if "val" in n.meta else n.meta["tensor_meta"]).shape
        )
        for n in gm.graph.nodes
        if n.op == "placeholder"
    ]

    class Scores(torch.nn.Module):
        def forward(self, q, k):
            return torch.softmax(q @ k.transpose(-1, -2), dim=-1)

    class Pv(torch.nn.Module):
        def forward(self, p, v):
            return p @ v

    if template == "sdpa_scores":
        qi, ki = int(binding["q"]["index"]), int(binding["k"]["index"])
        q, k = shapes[qi], shapes[ki]
        spec = spec_of_module(
            Scores,
            lambda: [torch.empty(*q), torch.empty(*k)],
            [f"in{qi}", f"in{ki}"],
            ["t0"],
            name="sdpa_scores",
        )
        spec.names = {f"in{qi}": ("q",), f"in{ki}": ("k",), "t0": ("p",)}
    else:
        vi = int(binding["v"]["index"])
        v = shapes[vi]
        spec = spec_of_module(
            Pv,
            lambda: [torch.empty(*v[:2], 2, v[2]), torch.empty(*v)],  # any S but 1
            ["t0", f"in{vi}"],
            ["out0"],
            name="sdpa_pv",
        )
        spec.names = {"t0": ("p",), f"in{vi}": ("v",), "out0": ("o",)}
    return spec


def _read_syms(r: Any) -> set[Any]:
    out: set[Any] = set()
    for e in (*r.index, r.guard):
        if e is not None and not isinstance(e, int):
            out |= set(e.symbols())
    return out


def _names_and_views(
    binding: dict[str, Any],
) -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    """Each spec tensor a launch binding reads or writes: the kernel tensors bound to it,
    and the view it is launched through."""
    names: dict[str, tuple[str, ...]] = {}
    views: dict[str, str] = {}
    for kname, src in binding.items():
        key = _spec_key(src, {})
        if key is None:
            continue
        names[key] = (*names.get(key, ()), kname)
        if src.get("view"):
            views[key] = src["view"]
    return names, views


def _spec_key(src: dict[str, Any], copies: dict[str, dict[str, Any]]) -> str | None:
    """The spec tensor a launch binding's source is: graph input `in<i>`, a parameter by
    its attribute, `out0`, a program's buffer by its name (a weight copy by its
    parameter's); None for anything else (a scalar)."""
    if src.get("from") == "buffer" and src.get("name") in copies:
        src = copies[src["name"]]
    return {
        "input": f"in{src.get('index')}",
        "param": src.get("attr"),
        "output": "out0",
        "buffer": src.get("name"),
    }.get(src.get("from"))


def _program_spec(gm: Any, emission: match.Emission, entry: str) -> Any:
    """`emission_spec` of program kernel `entry`."""
    from argus_core.spec import spec_of_graph
    from argus_core.spec.derive import segment_graph
    from argus_core.spec.views import spec_over_views

    launches = emission.binding[match.PROGRAM]["launches"]
    at = [i for i, la in enumerate(launches) if la["entry"] == entry]
    if not at:
        raise ConfigError(f"no kernel {entry} in the program ({', '.join(emission.entries)})")
    templates = [t for t, _ in emission.parts]
    if templates[at[0]].startswith("relayout"):  # a weight copy (or its bf16 halves)
        return _copy_spec(gm, launches[at[0]]["binding"])
    # weight copy -> the parameter's binding; a weight's bf16 halves are each the parameter
    # (their sum is arithmetic: a kernel reading both reads the parameter, twice)
    copies: dict[str, dict[str, Any]] = {}
    for t, la in zip(templates, launches, strict=True):
        if t.startswith("relayout"):
            for y in ("y", "yh", "yl"):
                if y in la["binding"]:
                    copies[la["binding"][y]["name"]] = la["binding"]["w"]
    computing = [i for i, t in enumerate(templates) if not t.startswith("relayout")]
    j = computing.index(at[0])
    kernels = emission.assembled[0] if emission.assembled else []
    if not emission.segments and "partials" in templates:  # a split reduction
        return _split_spec(gm, emission, templates, launches, at[0])
    if templates == ["sdpa_scores", "sdpa_pv"]:  # a wide head's attention, in two kernels
        return _sdpa_wide_spec(gm, launches[at[0]]["binding"], templates[at[0]])
    if emission.segments:
        inputs, result = emission.segments[j]
    elif len(computing) == 1 and len(kernels) == 1:  # one kernel and its weight copies
        inputs = tuple(n for n in gm.graph.nodes if n.op == "placeholder")
        result = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    else:
        raise ConfigError(
            f"a program of {len(computing)} kernels whose buffers are no graph node's: "
            "the spec is written per kernel only for the front end's programs"
        )
    seg = kernels[j][0]  # the kernel's emission: its inputs `in<i>` are `inputs`
    binding = launches[at[0]]["binding"]
    given: dict[int, str] = {}
    names: dict[str, tuple[str, ...]] = {}
    views: dict[str, str] = {}
    out = "out0"
    for tname, ssrc in seg.binding.items():
        src = binding.get(tname, ssrc)
        key = _spec_key(src, copies)
        if key is None:
            continue
        if ssrc.get("from") == "input":
            i = int(ssrc["index"])
            if given.setdefault(i, key) != key:
                raise ConfigError(f"kernel {entry}'s input {i} is both {given[i]} and {key}")
        elif ssrc.get("from") == "output":
            out = key
        names[key] = (*names.get(key, ()), tname)
        view = src.get("view") or (copies[src["name"]].get("view") if src.get("name") in copies
                                   else None)  # fmt: skip
        if view:
            views[key] = view
    for tname, src in binding.items():  # a weight read as its bf16 halves: `wh`, `wl`
        if tname not in seg.binding and src.get("name") in copies:
            key = str(copies[src["name"]].get("attr"))
            names[key] = (*(n for n in names.get(key, ()) if n in binding), tname)
            if copies[src["name"]].get("view"):
                views[key] = copies[src["name"]]["view"]
    if len(set(given.values())) != len(given):
        raise ConfigError(f"kernel {entry} reads one buffer as two inputs: {given}")
    labels = [given.get(i, f"unread{i}") for i in range(len(inputs))]
    sub = segment_graph(gm, inputs, result)
    spec = spec_over_views(spec_of_graph(sub, labels, outputs=[out]), views)
    spec.names = names
    return spec
