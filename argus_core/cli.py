"""The `argus` command: a Hydra app over `conf/` (the package `argus_conf`).

Before handing over to Hydra, a single run's overrides are composed once and validated,
so bad input ends with one line, `argus: ...`, that names the bad value and lists the valid
ones (exit status 2), instead of a Hydra traceback or a failure deep in the pipeline.
Plugin packages' config paths are added to Hydra's search path in both cases.

A multirun (`-m`) is planned first (`plan_sweep`): every job of the basic sweeper's grid is
composed, and a job that cannot be composed (`backend=nope`) fails alone with its
`argus: ...` line while the others run, instead of Hydra stopping the whole sweep. The
sweep directory is resolved once and passed on, so every job (in any launcher's workers)
and this process agree on it; jobs are validated as each one starts, and with
`resume=true` a job that already finished is skipped (`argus_core.tracking.resume`).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from omegaconf import DictConfig, OmegaConf

from argus_core.config import (
    CONFIG_MODULE,
    CONFIG_NAME,
    compose,
    override_key,
    register_schemas,
    validate,
    with_search_paths,
)
from argus_core.errors import ConfigError
from argus_core.tracking.sweep import (
    INVOCATION_ENV,
    SweepJob,
    current_job,
    invocation_statuses,
    job_identity,
    write_job_file,
)

EXIT_BAD_INPUT = 2  # as argparse uses for a bad command line
EXIT_INTERRUPTED = 130  # as a shell reports a process ended by SIGINT
EXIT_TERMINATED = 143  # as a shell reports a process ended by SIGTERM

# Hydra's own modes: they show things or sweep, so a single composition would not say
# whether the input is good (and --help must work without a kernel).
_HYDRA_MODES = (
    "help",
    "hydra_help",
    "cfg",
    "info",
    "multirun",
    "shell_completion",
    "config_path",
    "config_name",
    "config_dir",
    "experimental_rerun",
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run `argus ARGV` (default: sys.argv[1:]) and return the process exit status.

    0 when every job's pipeline returned 0 (a job skipped by resume=true counts as 0); 2 for
    bad input, with one `argus: ...` line on stderr (in a sweep: per bad job, the others
    still run); 130 after Ctrl-C; otherwise the largest status a job returned. Hydra's own
    errors in modes that are not pre-checked (--cfg, ...) exit through Hydra with 1.
    """
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["report"]:  # `argus report ...`: reads an MLflow store, no Hydra
        from argus_core.report import main as report_main

        return report_main(args_list[1:])
    if args_list[:1] == ["show"]:  # `argus show [RUN] [CANDIDATE]`: reads a run directory
        from argus_core.report.show import main as show_main

        return show_main(args_list[1:])
    if args_list[:1] == ["export"]:  # `argus export RUN ...`: a run's kernel as a package
        from argus_core.export import main as export_main

        return export_main(args_list[1:])
    if args_list[:1] in (["--version"], ["-V"]):
        print(version_line())
        return 0
    args = args_parser().parse_args(args_list)  # bad flags exit here (status 2)
    register_schemas()
    search_paths, plugin_names = _plugins()
    if _prechecked(args):
        try:
            cfg = compose(args.overrides, search_paths, return_hydra_config=True)
            validate(cfg, search_paths, plugin_names)
            if not args.multirun:
                check_writable("hydra.run.dir", str(OmegaConf.select(cfg, "hydra.run.dir")))
        except ConfigError as exc:
            return _bad_input(exc)
    flags = [a for a in args_list if a not in args.overrides]
    plan = None
    if args.multirun:
        plan = plan_sweep(args.overrides, search_paths)
        if not plan.overrides:
            return EXIT_BAD_INPUT  # every job was bad; each said why
    overrides = plan.overrides if plan else list(args.overrides)
    return _run_hydra(flags, overrides, search_paths, plugin_names, plan)


def version_line() -> str:
    """'argus 0.1.0 (hydra-core 1.3.2, triton 3.6.0, ...)': Argus and the tools whose
    versions change its results."""
    from importlib.metadata import PackageNotFoundError, version

    import argus_core

    tools = []
    for name in ("hydra-core", "triton", "torch", "z3-solver", "mlflow-skinny", "litellm"):
        try:
            tools.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            continue
    return f"argus {argus_core.__version__} ({', '.join(tools)})"


def args_parser() -> argparse.ArgumentParser:
    """The command line `hydra.main` accepts (its documented flags, `--hydra-help`), parsed
    here first so that a single run can be composed and checked before Hydra starts; the
    same argv then goes to `hydra.main`, which parses it again. Built with argparse, not
    Hydra's internal parser (only Hydra's public API is used)."""
    parser = argparse.ArgumentParser(prog="argus", add_help=False)
    flag = parser.add_argument
    flag("overrides", nargs="*", help="key=value overrides")
    flag("--help", "-h", action="store_true")
    flag("--hydra-help", action="store_true")
    flag("--version", "-V", action="version", version=version_line())
    flag("--cfg", "-c", choices=["job", "hydra", "all"])
    flag("--resolve", action="store_true")
    flag("--package", "-p")
    flag("--run", "-r", action="store_true")
    flag("--multirun", "-m", action="store_true")
    flag("--shell-completion", "-sc", action="store_true")
    flag("--config-path", "-cp")
    flag("--config-name", "-cn")
    flag("--config-dir", "-cd")
    flag("--experimental-rerun")
    info = ["all", "config", "defaults", "defaults-tree", "plugins", "searchpath"]
    flag("--info", "-i", const="all", nargs="?", choices=info)
    return parser


def _prechecked(args: argparse.Namespace) -> bool:
    return not any(getattr(args, mode, None) for mode in _HYDRA_MODES)


def _plugins() -> tuple[list[str], Callable[[str], list[str]]]:
    """Config search paths of installed plugins, and registered plugin names per kind."""
    from argus_core.plugin_manager import Registry, config_search_paths, default_plugin_manager

    pm = default_plugin_manager()
    return config_search_paths(pm), Registry(pm).names


def check_writable(key: str, path: str) -> None:
    """Raise ConfigError unless files can be created at `path` (a directory that may not
    exist yet): tried in its nearest existing ancestor, with a file made and removed."""
    import tempfile

    where = os.path.abspath(path)
    while not os.path.isdir(where):
        parent = os.path.dirname(where)
        if parent == where or os.path.exists(where):
            raise ConfigError(f"{key}={path!r}: {where} is not a directory")
        where = parent
    try:
        with tempfile.TemporaryFile(dir=where):
            pass
    except OSError as exc:
        raise ConfigError(
            f"{key}={path!r}: cannot write in {where} ({exc.strerror}); choose a writable "
            f"directory with {key}=PATH"
        ) from None


def _bad_input(exc: ConfigError) -> int:
    print(f"argus: {exc}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _run_hydra(
    flags: list[str],
    overrides: list[str],
    search_paths: list[str],
    plugin_names: Callable[[str], list[str]],
    plan: SweepPlan | None = None,
) -> int:
    """Hand the command line to `hydra.main`; collect each job's exit status.

    Jobs that ran in this process report to `statuses`; a sweep's jobs (in whatever
    process a launcher put them) also leave status files, read back from its directory.
    """
    import hydra

    statuses: list[int] = []

    def task(cfg: DictConfig) -> int:
        status = run_job(cfg, search_paths, plugin_names)
        statuses.append(status)
        return status

    invocation = uuid.uuid4().hex
    argv0 = sys.argv[0] if sys.argv else "argus"
    saved, sys.argv = sys.argv, [argv0, *flags, *with_search_paths(overrides, search_paths)]
    saved_env = os.environ.get(INVOCATION_ENV)
    os.environ[INVOCATION_ENV] = invocation  # launchers' workers inherit it
    try:
        app = hydra.main(
            config_path=f"pkg://{CONFIG_MODULE}", config_name=CONFIG_NAME, version_base="1.3"
        )(task)
        app()
    except KeyboardInterrupt:
        print("argus: interrupted; the sweep stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        sys.argv = saved
        if saved_env is None:
            os.environ.pop(INVOCATION_ENV, None)
        else:
            os.environ[INVOCATION_ENV] = saved_env
    if plan is not None:
        statuses.extend(plan.statuses(invocation))
    return max(statuses, default=0)


# --------------------------------------------------------------------------- sweeps


@dataclass
class SweepPlan:
    """What `argus -m` hands to Hydra: the overrides, with the values that make every job
    they are in fail removed, and the sweep directory pinned (`hydra.sweep.dir`)."""

    overrides: list[str]
    sweep_dir: str | None = None  # None: Hydra resolves it (not read back)
    jobs: list[str] | None = None  # job identities to launch; None: the sweeper decides
    bad_jobs: int = 0

    def statuses(self, invocation: str) -> list[int]:
        """Exit statuses of the jobs `invocation` launched, from their status files; a job
        that left none died (Hydra reported why): 1. Dropped bad jobs count 2."""
        out = [EXIT_BAD_INPUT] if self.bad_jobs else []
        if self.sweep_dir is None or not os.path.isdir(self.sweep_dir):
            return out
        recorded = invocation_statuses(self.sweep_dir, invocation)
        out.extend(recorded.values())
        if self.jobs is not None and any(job not in recorded for job in self.jobs):
            out.append(1)
        return out


def plan_sweep(overrides: Sequence[str], search_paths: Sequence[str] = ()) -> SweepPlan:
    """Plan a multirun of `overrides`. For the basic sweeper's grid, compose every job; print
    one `argus: job ...: reason` line per job that cannot be composed, and drop the values
    that are bad in every job they are in, so the remaining jobs run. When the good jobs
    are not a grid of their own (a bad combination, not a bad value), the plan is empty
    (`overrides == []`): nothing runs. Other sweepers get the overrides as given."""
    hydra_ovs = [o for o in overrides if _is_hydra_override(o)]
    task_ovs = [o for o in overrides if not _is_hydra_override(o)]
    sweep_dir = _resolved_sweep_dir(hydra_ovs, search_paths)
    if sweep_dir is not None:
        hydra_ovs = [o for o in hydra_ovs if override_key(o) != "hydra.sweep.dir"]
        hydra_ovs.append(f"hydra.sweep.dir={_quoted(sweep_dir)}")
    grid = None if any(override_key(o) == "hydra/sweeper" for o in hydra_ovs) else _grid(task_ovs)
    if grid is None:
        return SweepPlan([*task_ovs, *hydra_ovs], sweep_dir)

    jobs = [list(job) for job in itertools.product(*(items for _, items, _ in grid))]
    bad = {}
    for job in jobs:
        try:
            compose([*job, *hydra_ovs], search_paths)
        except ConfigError as exc:
            bad[tuple(job)] = str(exc)
            print(f"argus: job {' '.join(job)}: {exc}", file=sys.stderr)
    if not bad:
        return SweepPlan([*task_ovs, *hydra_ovs], sweep_dir, [job_identity(j) for j in jobs])

    kept_grid = []
    for text, items, is_sweep in grid:
        kept = [i for i in items if any(i in j and tuple(j) not in bad for j in jobs)]
        if len(kept) < len(items):
            text = _joined(kept) if kept else ""
        kept_grid.append((text, kept, is_sweep))
    kept_jobs = [list(job) for job in itertools.product(*(items for _, items, _ in kept_grid))]
    if not kept_jobs or any(tuple(job) in bad for job in kept_jobs):
        if kept_jobs:
            print(
                "argus: the other jobs of this sweep are not a grid of their own; "
                "remove the bad values or combinations and run it again",
                file=sys.stderr,
            )
        return SweepPlan([], sweep_dir, [], len(bad))
    print(f"argus: {len(bad)} of {len(jobs)} jobs dropped; running the other {len(kept_jobs)}")
    return SweepPlan(
        [text for text, _, _ in kept_grid] + hydra_ovs,
        sweep_dir,
        [job_identity(j) for j in kept_jobs],
        len(bad),
    )


def _is_hydra_override(text: str) -> bool:
    return override_key(text).startswith(("hydra.", "hydra/"))


def _grid(task_ovs: Sequence[str]) -> list[tuple[str, list[str], bool]] | None:
    """Each override as (its text, the `key=value` items of its values, is it a sweep), in
    order, as the basic sweeper expands it; None when the grid cannot be known here (a glob
    or interval sweep, or an override Hydra cannot parse: Hydra reports that itself)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(list(task_ovs))
        grid = []
        for text, ov in zip(task_ovs, parsed):
            key = ov.get_key_element()
            if not ov.is_sweep_override():
                grid.append((text, [f"{key}={ov.get_value_element_as_str()}"], False))
            elif ov.is_discrete_sweep():
                grid.append((text, [f"{key}={v}" for v in ov.sweep_string_iterator()], True))
            else:
                return None
        return grid
    except HydraException:
        return None


def _joined(items: Sequence[str]) -> str:
    """One override from `key=value` items of the same key: `key=v1,v2`."""
    key = items[0].split("=", 1)[0]
    return f"{key}=" + ",".join(i.split("=", 1)[1] for i in items)


def _resolved_sweep_dir(hydra_ovs: Sequence[str], search_paths: Sequence[str]) -> str | None:
    """`hydra.sweep.dir` as Hydra would resolve it now (`${now:...}` included); None when
    it cannot be resolved without a job (it interpolates job keys)."""
    try:
        cfg = compose(hydra_ovs, search_paths, return_hydra_config=True)
        value = OmegaConf.select(cfg, "hydra.sweep.dir")
    except Exception:
        return None
    return None if value is None else str(value)


def _quoted(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def run_job(
    cfg: DictConfig,
    search_paths: Sequence[str] = (),
    plugin_names: Callable[[str], list[str]] | None = None,
) -> int:
    """Validate one job's config and run the pipeline on it; return its exit status.

    A ConfigError (here or raised by the pipeline for a bad value) prints `argus: ...` and
    returns 2; any other exception propagates to Hydra, which reports it. A job of a sweep
    records its status in its output directory (`tracking.sweep.write_job_file`); with
    `resume=true` it is skipped (status 0, one line) when an earlier run of it finished.
    Ctrl-C (the pipeline returns 130) stops the whole sweep: KeyboardInterrupt is raised
    again once the job's status is recorded.
    """
    job = current_job(OmegaConf.select(cfg, "tracking.sweep_name"))
    skipped = False
    try:
        validate(cfg, search_paths, plugin_names)
        where = _finished_before(job, cfg) if job is not None and cfg.resume else None
        if where is not None:
            print(f"argus: job #{job.num} ({job.overrides}) skipped: finished before, {where}")
            status, skipped = 0, True
        else:
            from argus_core.pipeline import run  # imported here: it pulls in torch and triton

            _let_ctrl_c_through()
            status = int(run(cfg))
    except ConfigError as exc:
        status = _bad_input(exc)
    if job is not None:
        # 0 and 1 are the pipeline's own ends (MLflow status FINISHED); 2 and 130 are not
        write_job_file(job, status, finished=skipped or status in (0, 1), skipped=skipped)
        if status in (EXIT_INTERRUPTED, EXIT_TERMINATED):
            raise KeyboardInterrupt
    return status


def _let_ctrl_c_through() -> None:
    """Keep Ctrl-C for Python: z3 otherwise takes SIGINT during a query and answers
    `unknown` ("interrupted from keyboard"), so the run would go on with a candidate
    wrongly unverified instead of stopping (KILLED)."""
    import z3

    z3.set_param("ctrl_c", False)


def _finished_before(job: SweepJob, cfg: DictConfig) -> str | None:
    from argus_core.tracking.resume import already_finished

    return already_finished(job, cfg.tracking)


if __name__ == "__main__":
    sys.exit(main())
