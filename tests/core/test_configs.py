"""Composition of every option of every config group, and the schema's clear errors.

After lightning-hydra-template's tests/test_configs.py: compose in-process with Hydra's
compose API, exactly as `argus` does before it runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from argus_core.config import (
    CORRECTNESS_CHOICES,
    GROUPS,
    PROGRESS_CHOICES,
    check_plugins,
    compose,
    group_options,
    validate,
    with_search_paths,
)
from argus_core.errors import ConfigError, UnknownPluginError

GROUP_OPTIONS = [(group, option) for group in GROUPS for option in group_options(group)]


def test_every_group_has_options():
    found = {group for group, _ in GROUP_OPTIONS}
    assert found == set(GROUPS)


@pytest.mark.parametrize(("group", "option"), GROUP_OPTIONS, ids=lambda v: str(v))
def test_every_option_composes(group: str, option: str):
    choose = f"+kernel={option}" if group == "kernel" else f"{group}={option}"
    overrides = [choose] if group == "kernel" else ["+kernel=gemm", choose]
    cfg = compose(overrides)
    validate(cfg)
    # one string names the plugin everywhere: the file name is the `name:` field
    assert cfg[group].name == option
    OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)


def test_defaults_and_gemm_values():
    cfg = compose(["+kernel=gemm"])
    assert (cfg.budget, cfg.seed, cfg.progress) == (8, 0, "auto")
    assert cfg.evaluate == {
        "correctness": "auto",
        "trials": 2,
        "timeout_s": 300.0,
        "trace_timeout_s": None,
    }
    chosen = {g: cfg[g].name for g in GROUPS[1:]}
    assert chosen == {
        "dsl": "tile",
        "verifier": "smt",
        "backend": "mi300x",
        "planner": "baseline",
        "llm": "none",
        "tracking": "mlflow",
    }
    assert cfg.kernel.shape == {"M": 4096, "N": 4096, "K": 4096}
    assert cfg.kernel.check_shapes[0] == {"M": 67, "N": 45, "K": 83}  # ragged on purpose
    assert cfg.kernel.tiles.GROUP == [8]
    assert cfg.backend.target == "gfx942"
    assert cfg.backend.policy_grid.matrix_instr_nonkdim == [16, 32]
    assert cfg.tracking.uri is None and cfg.tracking.experiment == "argus"


def test_hydra_dirs_are_under_dot_argus():
    cfg = compose(["+kernel=gemm"], return_hydra_config=True)
    assert cfg.hydra.run.dir.startswith(".argus/runs/")
    assert cfg.hydra.sweep.dir.startswith(".argus/multirun/")
    assert cfg.hydra.job.chdir is False


def test_kernel_is_appended_not_a_default():
    cfg = compose([])
    assert OmegaConf.is_missing(cfg, "kernel")
    with pytest.raises(
        ConfigError, match=r"no kernel chosen; add \+kernel=NAME \(valid choices: .*gemm"
    ):
        validate(cfg)
    with pytest.raises(ConfigError, match=r"append to your default list use \+kernel=gemm"):
        compose(["kernel=gemm"])


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["backend=nope"], ["unknown backend 'nope'", "interpret, mi300x"]),
        (["+kernel=nope"], ["unknown kernel 'nope'", "gemm"]),
        (
            ["+kernel=gemm", "kernel.dtpye=bf16"],
            ["'kernel.dtpye'", "name, dtype, shape, check_shapes"],
        ),
        (["budgte=3"], ["'budgte'", "budget, seed, progress, resume, sandbox, evaluate"]),
        (["evaluate.trails=3"], ["'evaluate.trails'", "correctness, trials, timeout_s"]),
        (["+kernel=gemm", "kernel.shape.Q=3"], ["'kernel.shape.Q'", "M, N, K"]),
        (["budget=abc"], ["invalid value 'abc' for budget", "expected int"]),
        (["+kernel=gemm", "kernel.shape.M=x"], ["'x' for kernel.shape.M", "expected int"]),
        (["+kernel=gemm", "kernel.tiles.BM=[a]"], ["'[a]' for kernel.tiles.BM", "expected int"]),
        (["verifier.fail_on_unknown=maybe"], ["'maybe' for verifier.fail_on_unknown", "bool"]),
        (["budget=[1"], ["cannot parse override 'budget=[1'"]),
    ],
)
def test_composition_errors_name_the_value_and_the_choices(overrides, expected):
    with pytest.raises(ConfigError) as info:
        compose(overrides)
    for text in expected:
        assert text in str(info.value)


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("+kernel.dtpye=bf16", "unknown key 'kernel.dtpye'; valid keys of kernel: name, dtype"),
        ("+budgte=3", "unknown key 'budgte'; valid keys at the top level: kernel,"),
        ("progress=loud", f"invalid progress 'loud'; valid choices: {', '.join(PROGRESS_CHOICES)}"),
        ("evaluate.correctness=gpu", f"valid choices: {', '.join(CORRECTNESS_CHOICES)}"),
        ("budget=0", "invalid budget 0; must be an integer >= 1"),
        ("evaluate.trace_timeout_s=0", "invalid evaluate.trace_timeout_s 0.0; must be > 0"),
        ("evaluate.trials=0", "invalid evaluate.trials 0"),
        ("evaluate.timeout_s=0", "invalid evaluate.timeout_s 0.0"),
    ],
)
def test_validation_errors(override: str, expected: str):
    cfg = compose(["+kernel=gemm", override])  # composes: `+` may add keys, values are typed
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    assert expected in str(info.value)


def test_options_nodes_stay_open():
    cfg = compose(["+kernel=gemm", "+kernel.options.split_k=2", "+backend.options.x=y"])
    validate(cfg)
    assert cfg.kernel.options.split_k == 2 and cfg.backend.options.x == "y"


def test_plugin_names_are_checked_only_for_populated_kinds():
    cfg = compose(["+kernel=gemm"])
    registered = {"backend": ["h100", "interpret"], "kernel": ["gemm"]}
    with pytest.raises(
        UnknownPluginError, match=r"unknown backend 'mi300x'; valid choices: h100, interpret"
    ):
        check_plugins(cfg, lambda kind: registered.get(kind, []))
    registered["backend"].append("mi300x")
    check_plugins(cfg, lambda kind: registered.get(kind, []))  # empty kinds: not checked


@pytest.fixture
def extra_conf(tmp_path: Path) -> str:
    """A config dir a plugin could ship: one good backend option and one with a typo."""
    backend = tmp_path / "conf" / "backend"
    backend.mkdir(parents=True)
    (backend / "extra.yaml").write_text("name: extra\ntarget: cpu\npolicy_grid: {num_warps: [2]}\n")
    (backend / "typo.yaml").write_text("name: typo\ntraget: cpu\n")
    (backend / "badtype.yaml").write_text("name: badtype\ntarget: [1]\n")
    return f"file://{tmp_path / 'conf'}"


def test_plugin_search_paths_add_options(extra_conf: str):
    assert {"extra", "typo", "mi300x"} <= set(group_options("backend", [extra_conf]))
    cfg = compose(["+kernel=gemm", "backend=extra"], [extra_conf])
    assert cfg.backend.name == "extra" and cfg.backend.policy_grid.num_warps == [2]
    with pytest.raises(
        ConfigError, match=r"unknown backend 'nope'; valid choices: auto, badtype, extra, h100"
    ):
        compose(["backend=nope"], [extra_conf])


def test_schema_rejects_a_typo_in_a_plugin_yaml(extra_conf: str):
    with pytest.raises(ConfigError) as info:
        compose(["+kernel=gemm", "backend=typo"], [extra_conf])
    message = str(info.value)
    assert "unknown key 'backend.traget'; valid keys of backend: name, target" in message
    assert "(in backend/typo.yaml)" in message
    with pytest.raises(
        ConfigError,
        match=r"invalid value for backend.target .*; expected str \(in backend/badtype.yaml\)",
    ):
        compose(["+kernel=gemm", "backend=badtype"], [extra_conf])


def test_user_searchpath_is_merged_with_plugin_paths(extra_conf: str, tmp_path: Path):
    (tmp_path / "mine").mkdir()
    mine = f"file://{tmp_path / 'mine'}"
    overrides = with_search_paths(["budget=3", f"hydra.searchpath=['{mine}']"], [extra_conf])
    assert overrides[0] == "budget=3" and len(overrides) == 2
    cfg = compose(
        ["+kernel=gemm", f"hydra.searchpath=['{mine}']"], [extra_conf], return_hydra_config=True
    )
    assert list(cfg.hydra.searchpath) == [mine, extra_conf]


def test_every_option_names_a_registered_builtin_plugin():
    from argus_core.plugin_manager import Registry, make_plugin_manager

    names = Registry(make_plugin_manager(autoload=False)).names
    for group, option in GROUP_OPTIONS:
        known = names(group)
        # a kind with no built-in yet is not checked (as `argus` does not check it)
        assert not known or option in known, f"conf/{group}/{option}.yaml: no such {group} plugin"
