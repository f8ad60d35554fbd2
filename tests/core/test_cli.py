"""The `argus` command in a subprocess: bad input exits non-zero with one clear line."""

from __future__ import annotations

import pytest
import yaml

from argus_core.cli import EXIT_BAD_INPUT


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), ["argus: no kernel chosen; add +kernel=NAME (valid choices: ", "gemm"]),
        (("+kernel=gemm", "backend=nope"), ["unknown backend 'nope'", "interpret", "mi300x"]),
        (("+kernel=gemm", "llm=gpt9"), ["unknown llm 'gpt9'; valid choices: ", "none"]),
        (
            ("+kernel=gemm", "kernel.dtpye=bf16"),
            ["unknown key 'kernel.dtpye'", "valid keys of kernel: name, dtype, shape"],
        ),
        (("+kernel=gemm", "budgte=3"), ["unknown key 'budgte'", "budget, seed, progress"]),
        (("+kernel=gemm", "+budgte=3"), ["unknown key 'budgte'", "budget, seed, progress"]),
        (("+kernel=gemm", "budget=abc"), ["invalid value 'abc' for budget; expected int"]),
        (
            ("+kernel=gemm", "progress=loud"),
            ["invalid progress 'loud'; valid choices: auto, on, off"],
        ),
        (("kernel=gemm",), ["append to your default list use +kernel=gemm"]),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, tuple) else None,
)
def test_bad_input_names_the_value_and_the_choices(run_argus, tmp_path, args, expected):
    proc = run_argus(*args)
    assert proc.returncode == EXIT_BAD_INPUT, proc.stderr
    assert proc.stderr.startswith("argus: ")
    assert "Traceback" not in proc.stderr
    for text in expected:
        assert text in proc.stderr
    assert not (tmp_path / ".argus").exists()  # stopped before Hydra made a run directory


def test_multirun_jobs_are_validated(run_argus, tmp_path):
    proc = run_argus("-m", "+kernel=gemm", "progress=loud,louder")
    assert proc.returncode == EXIT_BAD_INPUT, proc.stderr
    assert "invalid progress 'loud'" in proc.stderr
    assert "invalid progress 'louder'" in proc.stderr  # the sweep goes on to every job
    assert (tmp_path / ".argus" / "multirun").is_dir()


def test_help_lists_the_groups_and_how_to_choose_a_kernel(run_argus):
    proc = run_argus("--help")
    assert proc.returncode == 0, proc.stderr
    assert "Usage: argus +kernel=NAME" in proc.stdout
    lines = proc.stdout.splitlines()
    backend = next(line for line in lines if line.startswith("backend: "))
    assert {"interpret", "mi300x"} <= set(backend.removeprefix("backend: ").split(", "))
    assert any(line.startswith("kernel: ") and "gemm" in line for line in lines)


def test_cfg_job_prints_the_composed_config(run_argus, tmp_path):
    proc = run_argus("+kernel=gemm", "backend=interpret", "budget=3", "--cfg", "job")
    assert proc.returncode == 0, proc.stderr
    cfg = yaml.safe_load(proc.stdout)
    assert cfg["kernel"]["name"] == "gemm" and cfg["budget"] == 3
    assert cfg["backend"] == {
        "name": "interpret",
        "target": "cpu",
        "policy_grid": {"num_warps": [4], "num_stages": [1]},
        "options": {"emulates": "mi300x"},
    }
    assert not (tmp_path / ".argus").exists()  # --cfg shows, it does not run


def test_unknown_flag_is_an_argparse_error(run_argus):
    proc = run_argus("--budget", "3")
    assert proc.returncode == 2
    assert "unrecognized arguments: --budget" in proc.stderr


def test_only_public_hydra_apis():
    """No module of argus_core imports Hydra's private `hydra._internal`."""
    import ast
    from pathlib import Path

    import argus_core

    root = Path(argus_core.__file__).parent
    private = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            private += [f"{path.name}: {n}" for n in names if n.startswith("hydra._internal")]
    assert private == []


def test_pre_parser_takes_every_flag_hydra_main_takes():
    """The pre-parse accepts the same flags (and their values) as `hydra.main`'s own parser,
    so no command line Hydra would run is refused, and none it refuses is taken."""
    from hydra._internal.utils import get_args_parser  # the reference, in this test only

    from argus_core.cli import args_parser

    def flags(parser):
        return {
            s: (a.nargs, tuple(a.choices or ()), a.const)
            for a in parser._actions
            for s in a.option_strings
        }

    ours, hydras = flags(args_parser()), flags(get_args_parser())
    assert set(hydras) <= set(ours)
    assert {s: ours[s] for s in hydras if s != "--version"} == {
        s: v for s, v in hydras.items() if s != "--version"
    }
    args = args_parser().parse_args(["-m", "+kernel=gemm", "seed=0,1", "-i", "--cfg", "job"])
    assert args.multirun and args.info == "all" and args.cfg == "job"
    assert args.overrides == ["+kernel=gemm", "seed=0,1"]


def test_version_anywhere_on_the_line(run_argus):
    proc = run_argus("+kernel=gemm", "--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("argus ") and "triton " in proc.stdout
