"""The icrl bandit: UCB1 scores, incremental means, and the values file across runs."""

from __future__ import annotations

import json
import math
import random

import pytest

from argus_core.errors import ConfigError
from argus_plugins.planners.icrl.values import ValueTable


def test_ucb1_score_is_mean_plus_exploration_bonus():
    table = ValueTable("gemm/mi300x", exploration=0.5)
    for arm, reward in (("a", 1.0), ("a", 2.0), ("b", 0.5)):
        table.update(arm, reward)
    assert table.stat("a").mean == pytest.approx(1.5) and table.stat("a").count == 2
    assert table.ucb("a") == pytest.approx(1.5 + 0.5 * math.sqrt(math.log(3) / 2))
    assert table.ucb("b") == pytest.approx(0.5 + 0.5 * math.sqrt(math.log(3) / 1))
    assert table.ucb("never") == math.inf
    rng = random.Random(0)
    assert table.choose(["a", "b", "never"], rng) == "never"  # untried first
    assert table.choose(["a", "b"], rng) == "a"
    # among untried arms the prior decides, whatever the random tie-break
    for seed in range(5):
        pick = table.choose(["x", "y", "z"], random.Random(seed), {"y": 2.0, "x": 1.0})
        assert pick == "y"


def test_the_technique_with_higher_rewards_ends_with_the_higher_value():
    table = ValueTable("moe/mi300x", exploration=1.0)
    rng, noise = random.Random(1), random.Random(2)
    means = {"good": 1.3, "meh": 1.0, "bad": -0.5}
    for _ in range(60):
        arm = table.choose(list(means), rng)
        table.update(arm, means[arm] + noise.gauss(0, 0.1))
    values = table.to_dict()
    assert values["good"]["value"] > values["meh"]["value"] > values["bad"]["value"]
    assert values["good"]["count"] > values["meh"]["count"] > values["bad"]["count"] >= 1
    assert sum(v["count"] for v in values.values()) == table.total() == 60


def test_values_persist_and_concurrent_runs_add_up(tmp_path):
    path = tmp_path / "nested" / "values.json"
    first = ValueTable("moe/mi300x", path=path)
    first.load()  # no file yet: an empty table
    assert first.total() == 0
    first.update("pipeline_depth", 1.25)
    first.update("pipeline_depth", 0.75)
    first.update("kpack", -1.0)
    first.save()

    again = ValueTable("moe/mi300x", path=path)
    again.load()
    assert again.to_dict() == first.to_dict()
    other = ValueTable("gemm/h200", path=path)
    other.load()
    assert other.total() == 0  # tables are per (family, backend)

    # two runs that loaded the same file each add only what they learned
    a, b = ValueTable("moe/mi300x", path=path), ValueTable("moe/mi300x", path=path)
    a.load(), b.load()
    a.update("kpack", 1.0)
    b.update("kpack", 2.0)
    a.save(), b.save()
    data = json.loads(path.read_text())
    assert data["version"] == 1
    assert data["tables"]["moe/mi300x"]["kpack"] == {"count": 3, "sum": 2.0}
    assert data["tables"]["moe/mi300x"]["pipeline_depth"] == {"count": 2, "sum": 2.0}


def test_bad_values_file_and_bad_exploration_are_named(tmp_path):
    path = tmp_path / "values.json"
    path.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="values.json"):
        ValueTable("gemm/mi300x", path=path).load()
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="not JSON"):
        ValueTable("gemm/mi300x", path=path).load()
    with pytest.raises(ConfigError, match="exploration=-1"):
        ValueTable("gemm/mi300x", exploration=-1)
    with pytest.raises(ValueError, match="finite"):
        ValueTable("gemm/mi300x").update("a", math.inf)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"\xff\xfe\x00garbage", "not UTF-8 text"),
        (b'{"version": 1, "tables": []}', "at tables"),
        (b'{"version": 2, "tables": {}}', "at version"),
        (b'{"version": 1, "tables": {"gemm/mi300x": {"a": {"count": -1, "sum": 1.0}}}}', "count"),
        (b'{"version": 1, "tables": {"gemm/mi300x": {"a": {"count": 1, "sum": NaN}}}}', "sum"),
        (b'{"version": 1, "tables": {"k": {"a": {"count": 1, "sum": Infinity}}}}', "sum"),
        (b'{"version": 1, "tables": {"k": {"a": {"count": 1.5, "sum": 1.0}}}}', "count"),
        (b'{"version": 1, "tables": {"k": {"a": {"count": 1}}}}', "a.sum"),
        (b'{"version": 1, "tables": {"k": {"a": "x"}}}', "tables.k.a"),
    ],
)
def test_a_corrupt_values_file_is_named_and_left_untouched(tmp_path, content, expected):
    path = tmp_path / "icrl_values.json"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as info:
        ValueTable("gemm/mi300x", path=path).load()
    message = str(info.value)
    assert "icrl_values.json" in message and expected in message
    table = ValueTable("gemm/mi300x", path=path)
    table.update("a", 1.0)
    with pytest.raises(ConfigError):
        table.save()  # never merged into, nor overwritten
    assert path.read_bytes() == content


def test_learn_false_neither_loads_nor_saves_the_values_file(tmp_path, monkeypatch):
    """planner.options.learn=false: the same seed proposes the same candidates whatever
    values file the directory holds, and the file is left as it was."""
    from argus_core.config import compose
    from argus_core.pipeline import run

    monkeypatch.chdir(tmp_path)
    values = tmp_path / ".argus" / "icrl_values.json"
    values.parent.mkdir()
    values.write_text("not json at all")  # would be an error if it were read
    cfg = compose(
        [
            "+kernel=gemm",
            "planner=icrl",
            "planner.options.learn=false",
            "budget=2",
            "tracking=none",
            "verifier=none",
            "evaluate.correctness=off",
            "progress=off",
        ]
    )
    assert run(cfg) == 0
    assert values.read_text() == "not json at all"
