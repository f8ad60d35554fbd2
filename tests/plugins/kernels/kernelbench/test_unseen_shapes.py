"""The trial at sizes the candidate never saw: the task file re-executed with smaller sizes
that do not change the Model, so a candidate written for the task's shapes fails there."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from argus_core import sandbox
from argus_plugins.kernels.kernelbench import evaluate, reference, tasks

TASKS = Path(__file__).parents[3] / "kernelbench_tasks"
TASK_FILES = sorted(TASKS.glob("level*/*.py"))
HERE = Path(__file__).parent
SHAPE_HACKS = [HERE / "hacks" / "39_hardcoded_task_sizes.py",
               HERE / "hacks" / "40_one_block_sized_to_the_task.py"]  # fmt: skip


@pytest.mark.parametrize("n", [3, 4, 5, 16, 17, 33, 48, 64, 100, 4096])
def test_an_unseen_size_is_smaller_aligned_and_at_least_two(n):
    for seed in range(20):
        m = evaluate.unseen_size(n, random.Random(seed))
        assert m is not None and max(2, n // 2) <= m < n
        align = min(evaluate.SIZE_ALIGN, n & -n)
        if any(k % align == 0 for k in range(max(2, n // 2), n)):
            assert m % align == 0, (n, m)


def test_sizes_below_three_are_kept():
    assert evaluate.unseen_size(2, random.Random(0)) is None
    assert evaluate.unseen_size(1, random.Random(0)) is None


@pytest.mark.parametrize("path", TASK_FILES, ids=[f"{p.parent.name}/{p.stem}" for p in TASK_FILES])
def test_every_test_task_gets_a_trial_at_other_shapes_and_the_same_model(path):
    module = tasks.load_module(path)
    model = reference.build_model(module, 42, "fp32", "cpu")
    trial = evaluate.unseen_trial(str(path), module, model, 1234, 42, "fp32", "cpu")
    assert trial is not None, f"{path.name}: no size could change"
    base = reference.make_inputs(module, 1234, "fp32", "cpu")
    assert any(tuple(a.shape) != tuple(b.shape) for a, b in zip(trial.inputs, base))
    assert all(new < old for old, new in trial.sizes.values())
    # the reference on the new inputs is the task's Model with the task's weights
    again = reference.run_model(model, trial.inputs)
    assert (again - trial.expected[0]).abs().max() == 0


def test_a_task_whose_sizes_all_shape_the_model_has_no_unseen_trial(tmp_path):
    task = tmp_path / "level1" / "1_fixed.py"
    task.parent.mkdir()
    task.write_text(
        "import torch\nimport torch.nn as nn\nF = 32\n"
        "class Model(nn.Module):\n"
        "    def __init__(self, f):\n        super().__init__()\n        self.fc = nn.Linear(f, f)\n"
        "    def forward(self, x):\n        return self.fc(x)\n"
        "def get_inputs():\n    return [torch.randn(F, F).reshape(F, F)]\n"
        "def get_init_inputs():\n    return [F]\n"
    )
    module = tasks.load_module(task)
    model = reference.build_model(module, 42, "fp32", "cpu")
    assert evaluate.unseen_trial(str(task), module, model, 7, 42, "fp32", "cpu") is None


@pytest.mark.skipif(
    sandbox.isolation_problem() is not None, reason=f"{sandbox.isolation_problem()}"
)
@pytest.mark.parametrize("path", SHAPE_HACKS, ids=[p.stem for p in SHAPE_HACKS])
def test_a_candidate_written_for_the_task_shapes_fails_only_at_the_unseen_trial(path, monkeypatch):
    square = str(TASKS / "level1" / "1_square_matmul.py")
    cand = {"kind": "modelnew", "source": path.read_text(), "filename": str(path)}
    report = evaluate.check_candidate(square, cand, trials=1, timeout_s=60)
    assert not report.ok
    assert report.error.startswith("a trial at sizes the candidate never saw (N 64->")
    assert report.shapes[0] == {"N": 64} and report.shapes[1]["N"] < 64
    monkeypatch.setattr(evaluate, "unseen_trial", lambda *a, **k: None)
    assert evaluate.check_candidate(square, cand, trials=1, timeout_s=60).ok  # it was needed
