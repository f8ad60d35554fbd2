"""fast_p over a directory of KernelBench tasks:

    python -m argus_plugins.kernels.kernelbench.fastp --path DIR [--tasks level1/1,...]
        [--p 1.0] [--backend interpret|auto|...] [--budget N] [--sources DIR] [--scale F]

Each task runs the pipeline's stages (no tracking) on up to `budget` candidates of the
baseline planner (the template's tile grid, or `--sources DIR/<level>/<id>_*.py` as
kernel.source), and its best correct candidate counts. fast_p is the fraction of tasks
whose best candidate is correct AND faster than the eager PyTorch Model by more than p.
`--scale F` shrinks every task's module-level sizes by F (`tasks.scaled`), so tasks run in
the CPU interpreter.
Without a GPU both times are cost-model ESTIMATES (labelled so); on a GPU, measured.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field

from argus_core.errors import ConfigError
from argus_core.sandbox import truncate
from argus_plugins.kernels.kernelbench import tasks

# a failed task's note keeps the whole reason (tables clip it; the suite's JSON does not)
NOTE_CHARS = 1000


@dataclass
class TaskOutcome:
    task: str
    correct: bool
    ms: float | None = None
    torch_ms: float | None = None
    estimated: bool = True
    note: str = ""
    # how far the task got: "capture" failed, "template" (no lowering), "verify" (a candidate
    # was lowered but none verified), "correctness" (verified, none correct), or "done"
    reached: str = "done"
    # torch.compile(Model) timed beside the eager Model (GPU only), and why it is missing
    compile_ms: float | None = None
    # re-checks of the best kernel at sizes the search never saw: "2/2" passed, "" none ran
    unseen: str = ""
    unseen_sizes: list = field(default_factory=list)  # [{"sizes", "ok", "error"}]
    # seconds per stage of the best (or last checked) candidate's check (`report.phases`)
    phases: dict = field(default_factory=dict)

    @property
    def speedup(self) -> float | None:
        return self.torch_ms / self.ms if self.ms and self.torch_ms else None

    @property
    def compile_speedup(self) -> float | None:
        return self.compile_ms / self.ms if self.ms and self.compile_ms else None


def fast_p(outcomes: list[TaskOutcome], p: float) -> float:
    """Fraction of `outcomes` that are correct with speedup > p (0 for no tasks)."""
    if not outcomes:
        return 0.0
    return sum(1 for o in outcomes if o.correct and (o.speedup or 0.0) > p) / len(outcomes)


def evaluate_task(
    path: str,
    task: str,
    backend: str,
    budget: int,
    source: str | None,
    scale: float | None = None,
    timeout_s: float | None = None,
    fp32_dot: str | None = None,
    trials: int | None = None,
) -> TaskOutcome:
    """The best candidate of one task, through the pipeline's stages (`fp32_dot`: the
    run's `kernel.fp32_dot`, how fp32 dots compute; `trials`: fresh-input trials per check,
    default the task config's, KernelBench's 5)."""
    from argus_core.config import compose
    from argus_core.pipeline import Stages, _best
    from argus_core.plugin_manager import Registry, default_plugin_manager

    overrides = ["+kernel=kernelbench", f"kernel.path={path}", f"kernel.task={task}",
                 f"backend={backend}", "tracking=none", "planner=baseline"]  # fmt: skip
    if source:
        overrides.append(f"kernel.source={source}")
    if scale is not None:
        overrides.append(f"kernel.options.scale={scale}")
    if trials is not None:
        overrides.append(f"kernel.options.trials={int(trials)}")
    if timeout_s is not None:  # per candidate check (the run's evaluate.timeout_s)
        overrides.append(f"evaluate.timeout_s={timeout_s}")
    if fp32_dot is not None:
        overrides.append(f"kernel.fp32_dot={fp32_dot}")
    try:
        cfg = compose(overrides)
        registry = Registry(default_plugin_manager())
        stages = Stages.from_config(cfg, registry)
    except ConfigError as exc:
        stage = "capture" if "capture failed" in str(exc) else "template"
        return TaskOutcome(task, False, note=str(exc).split(";")[0], reached=stage)
    session = registry.get("planner", "baseline").create(
        cfg.planner,
        {"family": stages.family, "dsl": stages.dsl, "backend": stages.backend,
         "kernel_cfg": cfg.kernel, "backend_cfg": stages.backend_cfg, "seed": 0,
         "budget": budget, "llm": None},
    )  # fmt: skip
    results = []
    for i, cand in enumerate(session.propose(budget)):
        res, _ = stages.evaluate(cand, i, None)
        results.append(res)
    best = _best(results)
    checked = [r for r in results if r.correctness is not None]
    phases = dict(checked[-1].correctness.phases) if checked else {}
    if best is None or best.timing is None:
        why = next((r.failure for r in results if r.failure), "no candidate")
        verified = any(r.verify is not None and r.verify.status == "verified" for r in results)
        wrong = str(why).startswith("correctness") and not any(
            w in str(why) for w in ("timeout", "timed out", "memory")
        )
        if fp32_dot not in (None, "ieee") and wrong:
            # a split fp32 dot (bf16x3: ~2^-16 per product) may miss fp32's 1e-4 where a
            # task's sums cancel: once more in IEEE fp32, and the row says so
            again = evaluate_task(path, task, backend, budget, source, scale, timeout_s, "ieee",
                                  trials)  # fmt: skip
            again.note = truncate(f"{again.note} (ieee dots: {fp32_dot} failed: {why})", NOTE_CHARS)
            return again
        return TaskOutcome(
            task, False, note=truncate(str(why), NOTE_CHARS), reached="correctness" if verified else "verify",
            phases=phases,
        )  # fmt: skip
    if best.correctness is not None:
        phases = dict(best.correctness.phases)
    t = best.timing
    unseen = list(best.correctness.unseen) if best.correctness is not None else []
    compiled = [v for k, v in (t.baselines or {}).items() if k.startswith("torch.compile")]
    note = best.candidate.policy.key()
    why_not = (best.correctness.timing or {}).get("compile_error") if best.correctness else None
    if why_not:
        note += f" (no torch.compile time: {why_not})"
    return TaskOutcome(
        task, True, t.ms, t.baseline_ms, t.estimated, note,
        compile_ms=compiled[0] if compiled else None,
        unseen=f"{sum(bool(u.get('ok')) for u in unseen)}/{len(unseen)}" if unseen else "",
        unseen_sizes=unseen,
        phases=phases,
    )  # fmt: skip


def render(outcomes: list[TaskOutcome], p: float) -> str:
    """The table, then fast_0, fast_1 and fast_p."""
    head = f"{'task':<12} {'correct':<8} {'ours ms':>10} {'torch ms':>10} {'speedup':>8}  {'timing':<9} note"
    lines = [head, "-" * len(head)]
    for o in outcomes:
        num = lambda v, f: format(v, f) if v is not None else "-"  # noqa: E731
        kind = "estimated" if o.estimated else "measured"
        lines.append(
            f"{o.task:<12} {'yes' if o.correct else 'no':<8} {num(o.ms, '10.5f'):>10} "
            f"{num(o.torch_ms, '10.5f'):>10} {num(o.speedup, '8.2f'):>8}  {kind if o.ms else '-':<9} {o.note}"
        )
    lines.append("")
    for q in sorted({0.0, 1.0, p}):
        lines.append(f"fast_{q:g} = {fast_p(outcomes, q):.3f}  ({len(outcomes)} tasks)")
    if any(o.estimated and o.ms for o in outcomes):
        lines.append("speedups are cost-model ESTIMATES (no GPU): both times come from the model")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="fastp", description=__doc__.split("\n\n")[0])
    ap.add_argument("--path", required=True, help="directory of level*/<id>_<name>.py tasks")
    ap.add_argument("--tasks", default="", help="comma-separated <level>/<id>; default: all")
    ap.add_argument("--p", type=float, default=1.0, help="speedup threshold of fast_p")
    ap.add_argument("--backend", default="interpret", help="backend option (interpret, auto, ...)")
    ap.add_argument("--budget", type=int, default=2, help="candidates per task")
    ap.add_argument("--sources", default=None, help="directory of candidate files, as --path")
    ap.add_argument("--scale", type=float, default=None, help="shrink module-level sizes by F")
    ap.add_argument("--trials", type=int, default=None,
                    help="fresh-input trials per check (default: KernelBench's 5)")  # fmt: skip
    args = ap.parse_args(argv)
    try:
        found = tasks.discover(args.path)
        keys = [k.strip() for k in args.tasks.split(",") if k.strip()] or list(found)
        refs = [tasks.resolve(args.path, k) for k in keys]
        sources = tasks.discover(args.sources) if args.sources else {}
    except ConfigError as exc:
        print(f"fastp: {exc}", file=sys.stderr)
        return 2
    outcomes = []
    for ref in refs:
        src = sources.get(ref.key)
        outcomes.append(
            evaluate_task(
                args.path,
                ref.key,
                args.backend,
                args.budget,
                str(src.path) if src else None,
                args.scale,
                trials=args.trials,
            )
        )
        print(f"  {ref.key}: {'correct' if outcomes[-1].correct else 'failed'}", file=sys.stderr)
    print(render(outcomes, args.p))
    return 0


if __name__ == "__main__":
    sys.exit(main())
