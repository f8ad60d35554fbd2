"""benchmarks/kernelbench_suite.py: the per-level counts (fast_1, faster than torch.compile,
unseen sizes), the deadline, and a real run of test tasks in processes of their own."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[4]
TASKS = ROOT / "tests" / "kernelbench_tasks"
_spec = importlib.util.spec_from_file_location(
    "kb_suite", ROOT / "benchmarks" / "kernelbench_suite.py"
)
assert _spec is not None and _spec.loader is not None
suite = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(suite)


def row(task, reached="done", ms=None, torch_ms=None, compile_ms=None, unseen="", correct=None):
    return {"task": task, "reached": reached, "correct": reached == "done" if correct is None
            else correct, "ms": ms, "torch_ms": torch_ms, "compile_ms": compile_ms,
            "estimated": False, "unseen": unseen, "note": "", "seconds": 1.0}  # fmt: skip


def test_the_level_table_counts_fast_1_torch_compile_and_unseen_per_level():
    rows = [
        row("level1/1", ms=1.0, torch_ms=2.0, compile_ms=0.5, unseen="2/2"),  # beats eager only
        row("level1/2", ms=1.0, torch_ms=0.5, compile_ms=1.5, unseen="1/2"),  # beats compile only
        row("level1/3", ms=1.0, torch_ms=3.0, unseen="2/2"),  # compile not timed
        row("level1/4", reached="template"),
        row("level2/1", ms=1.0, torch_ms=2.0, compile_ms=2.0, unseen="2/2"),
        row("level2/2", reached="correctness", ms=None),
        {**row("level2/3", reached="capture"), "stopped": True},
    ]
    lines = {ln.split("|")[1].strip(): [c.strip() for c in ln.split("|")[2:-1]]
             for ln in suite.level_table(rows).splitlines() if ln.startswith("| level") or ln.startswith("| all")}  # fmt: skip
    # tasks, not run, captured, lowered, verified, correct, fast_1, > torch.compile, unseen ok
    assert lines["level1"] == ["4", "0", "4", "3", "3", "3", "2", "1/2", "2/3"]
    assert lines["level2"] == ["3", "1", "2", "2", "2", "1", "1", "1/1", "1/1"]
    assert lines["all"] == ["7", "1", "6", "5", "5", "4", "3", "2/3", "3/4"]
    tables = suite.task_tables(rows)
    assert "level1\n" in tables and "level2\n" in tables and "x compile" in tables


def test_tasks_not_started_by_the_deadline_get_a_row_saying_so():
    seen = []
    work = [(str(TASKS), k, "interpret", 1, None, None, None) for k in ("level1/1", "level1/2")]
    rows = suite.run_all(work, 1, None, 0.0, seen.append)
    assert [r["task"] for r in rows] == ["level1/1", "level1/2"] and seen == rows
    assert all(not r["correct"] and r["stopped"] and "deadline" in r["note"] for r in rows)


def test_only_a_check_refused_for_memory_is_run_again_alone():
    refused = "correctness: memory: the check needs about 18.4 GiB (reference peak 8.0 GiB)"
    assert suite.memory_refused({"correct": False, "note": refused})
    assert not suite.memory_refused({"correct": False, "note": "correctness: 25 of 1024 wrong"})
    assert not suite.memory_refused({"correct": True, "note": "BM64 | w4"})


def test_cheap_first_orders_by_the_estimated_eager_time(tmp_path):
    lv = tmp_path / "level1"
    lv.mkdir()
    body = ("import torch\nimport torch.nn as nn\n"
            "class Model(nn.Module):\n    def forward(self, x):\n        return {op}\n"
            "def get_inputs():\n    return [torch.randn({n}, {n})]\n"
            "def get_init_inputs():\n    return []\n")  # fmt: skip
    (lv / "1_big_relu.py").write_text(body.format(op="torch.relu(x)", n=4096))
    (lv / "2_small_matmul.py").write_text(body.format(op="x @ x", n=512))
    (lv / "3_big_matmul.py").write_text(body.format(op="x @ x", n=4096))
    (lv / "4_broken.py").write_text(body.format(op="x @ x[0:1, 0:3]", n=64))
    keys = ["level1/4", "level1/3", "level1/1", "level1/2"]
    # 512^2 matmul < 4096^2 copy (64 MB moved) < 4096^2 matmul (137 GFLOP); a Model that
    # fails on meta tensors last
    assert suite.cheap_first(str(tmp_path), keys, None) == [
        "level1/2",
        "level1/1",
        "level1/3",
        "level1/4",
    ]


@pytest.mark.slow
def test_a_suite_run_writes_rows_tables_and_the_unseen_column(tmp_path):
    out = tmp_path / "kb.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "kernelbench_suite.py"), "--path", str(TASKS),
         "--tasks", "level1/1,level2/1", "--scale", "1", "--jobs", "2", "--task-timeout", "560",
         "--timeout", "540",  # a loaded machine: the unseen re-checks must not run out of time
         "--out", str(out)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {r["task"]: r for r in json.loads(out.read_text())["rows"]}
    assert set(rows) == {"level1/1", "level2/1"}
    assert all(r["correct"] and r["unseen"] == "2/2" for r in rows.values()), {
        k: (r["correct"], r["unseen"], r["unseen_sizes"], r["note"]) for k, r in rows.items()
    }
    assert "| level1 " in proc.stdout and "unseen ok" in proc.stdout
    assert "level2/1: reached done, correct" in proc.stderr
