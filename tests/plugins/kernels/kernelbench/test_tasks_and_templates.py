"""Task discovery and loading, and the template front on the shipped tasks."""

from __future__ import annotations

from pathlib import Path

import pytest

from argus_core.errors import ConfigError
from argus_core.types import Policy
from argus_plugins.backends.mi300x.spec import MI300X
from argus_plugins.dsl.tile.frontend import TileFrontend
from argus_plugins.kernels.kernelbench import match, reference, tasks
from argus_plugins.verifiers.smt import SmtVerifier

TASKS = Path(__file__).parents[3] / "kernelbench_tasks"


def test_discover_finds_every_shipped_task_in_order():
    found = tasks.discover(TASKS)
    assert len(found) >= 12
    assert list(found)[:2] == ["level1/1", "level1/2"]
    assert found["level1/1"].path.name == "1_square_matmul.py"


def test_unknown_task_and_missing_path_name_the_bad_value_and_the_valid_ones(tmp_path):
    with pytest.raises(
        ConfigError, match=r"unknown kernel.task 'level1/99'.*valid tasks: level1/1, "
    ):
        tasks.resolve(TASKS, "level1/99")
    with pytest.raises(ConfigError, match="is not a directory"):
        tasks.resolve(tmp_path / "nope", "level1/1")
    with pytest.raises(ConfigError, match="needs kernel.task"):
        tasks.resolve(TASKS, None)


def test_a_task_file_without_get_inputs_is_rejected(tmp_path):
    (tmp_path / "level1").mkdir()
    bad = tmp_path / "level1" / "1_bad.py"
    bad.write_text("class Model:\n    pass\n")
    with pytest.raises(ConfigError, match="lacks get_inputs, get_init_inputs"):
        tasks.load_module(tasks.resolve(tmp_path, "level1/1").path)


def _emission(key: str) -> match.Emission:
    module = tasks.load_module(tasks.resolve(TASKS, key).path)
    model = reference.build_model(module, 42, "fp32", "cpu")
    return match.match(match.trace(model, reference.make_inputs(module, 0, "fp32", "cpu")), key)


@pytest.mark.parametrize(
    "key, template",
    [("level1/1", "matmul"), ("level1/4", "matmul"), ("level1/5", "softmax"), ("level1/7", "rowreduce"),
     ("level1/8", "elementwise"), ("level2/1", "matmul")],
)  # fmt: skip
def test_templates_emit_dsl_that_the_verifier_proves(key, template):
    em = _emission(key)
    assert em.template == template
    ir = TileFrontend().parse(em.source, em.entry, f"<{key}>")
    policy = Policy({k: v[0] for k, v in em.tiles.items()})
    report = SmtVerifier().verify(ir, policy, {"timeout_ms": 10000}, MI300X)
    assert report.status == "verified", report.summary


def test_linear_template_binds_the_layer_weight_and_bias():
    em = _emission("level2/1")
    assert em.binding["w"] == {"from": "param", "attr": "linear.weight"}
    assert em.binding["vec0"] == {"from": "param", "attr": "linear.bias"}
    assert em.shape == {"M": 36, "N": 48, "K": 64}
    assert "al.sigmoid" in em.source and "2.0" in em.source  # scale and SiLU in the epilogue


@pytest.mark.parametrize("key, ops", [("level1/11", "cumsum"), ("level2/2", "unknown:nn.Conv2d")])
def test_no_template_names_the_task_and_its_ops(key, ops):
    with pytest.raises(
        match.NoTemplate, match=rf"no template matches task {key} \(ops: {ops}.*kernel.source=FILE"
    ):
        _emission(key)
