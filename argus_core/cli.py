"""The `argus` command: a Hydra app over `conf/` (the package `argus_conf`).

Before handing over to Hydra, a single run's overrides are composed once and validated,
so bad input ends with one line, `argus: ...`, that names the bad value and lists the valid
ones (exit status 2), instead of a Hydra traceback or a failure deep in the pipeline.
Multirun jobs are validated as each one starts. Plugin packages' config paths are added
to Hydra's search path in both cases.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from omegaconf import DictConfig

from argus_core.config import (
    CONFIG_MODULE,
    CONFIG_NAME,
    compose,
    register_schemas,
    validate,
    with_search_paths,
)
from argus_core.errors import ConfigError

EXIT_BAD_INPUT = 2  # as argparse uses for a bad command line

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

    0 when every job's pipeline returned 0; 2 for bad input, with one `argus: ...` line on
    stderr; otherwise the largest status a job's pipeline returned. Hydra's own errors in
    modes that are not pre-checked (multirun, --cfg, ...) exit through Hydra with 1.
    """
    from hydra._internal.utils import get_args_parser

    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["report"]:  # `argus report ...`: reads an MLflow store, no Hydra
        from argus_core.report import main as report_main

        return report_main(args_list[1:])
    args = get_args_parser().parse_args(args_list)  # --version and bad flags exit here
    register_schemas()
    search_paths, plugin_names = _plugins()
    if _prechecked(args):
        try:
            validate(compose(args.overrides, search_paths), search_paths, plugin_names)
        except ConfigError as exc:
            return _bad_input(exc)
    return _run_hydra(args_list, args.overrides, search_paths, plugin_names)


def _prechecked(args: argparse.Namespace) -> bool:
    return not any(getattr(args, mode, None) for mode in _HYDRA_MODES)


def _plugins() -> tuple[list[str], Callable[[str], list[str]]]:
    """Config search paths of installed plugins, and registered plugin names per kind."""
    from argus_core.plugin_manager import Registry, config_search_paths, default_plugin_manager

    pm = default_plugin_manager()
    return config_search_paths(pm), Registry(pm).names


def _bad_input(exc: ConfigError) -> int:
    print(f"argus: {exc}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _run_hydra(
    args_list: list[str],
    overrides: list[str],
    search_paths: list[str],
    plugin_names: Callable[[str], list[str]],
) -> int:
    """Hand the command line to `hydra.main`; collect each job's exit status."""
    import hydra

    statuses: list[int] = []

    def task(cfg: DictConfig) -> None:
        statuses.append(run_job(cfg, search_paths, plugin_names))

    flags = [a for a in args_list if a not in overrides]
    argv0 = sys.argv[0] if sys.argv else "argus"
    saved, sys.argv = sys.argv, [argv0, *flags, *with_search_paths(overrides, search_paths)]
    try:
        app = hydra.main(
            config_path=f"pkg://{CONFIG_MODULE}", config_name=CONFIG_NAME, version_base="1.3"
        )(task)
        app()
    finally:
        sys.argv = saved
    return max(statuses, default=0)


def run_job(
    cfg: DictConfig,
    search_paths: Sequence[str] = (),
    plugin_names: Callable[[str], list[str]] | None = None,
) -> int:
    """Validate one job's config and run the pipeline on it; return its exit status.

    A ConfigError (here or raised by the pipeline for a bad value) prints `argus: ...` and
    returns 2; any other exception propagates to Hydra, which reports it.
    """
    try:
        validate(cfg, search_paths, plugin_names)
        from argus_core.pipeline import run  # imported here: it pulls in torch and triton

        return int(run(cfg))
    except ConfigError as exc:
        return _bad_input(exc)


if __name__ == "__main__":
    sys.exit(main())
