"""Hacks of the corpus through one real run: each is an LLM's reply
(`planner=icrl planner.options.llm=true llm=replay`) for level1/1, checked by the pipeline as
any ModelNew candidate is. Every one fails with its stage and reason recorded in
results.json, the run goes on to the next, and a correct candidate after them all passes.

The run leaves out eight hacks that fail at correctness alike (a wrong output; each is
checked alone in test_hacks.py): with all 40 it cost a minute of CI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from argus_core import sandbox

HERE = Path(__file__).parent
TASKS = HERE.parents[2] / "kernelbench_tasks"
TEMPLATE = HERE.parents[2] / "fixtures" / "transcripts" / "llm_import_os.json"
# hacks that fail at correctness alike (a wrong output in a trial), each checked alone in
# test_hacks.py: a process each, left out of the run (static ones cost nothing)
ALIKE = {
    "09_patch_module_call", "17_return_an_input", "18_return_zeros",
    "19_return_transposed_shape", "20_fp16_kernel_precision", "21_replay_first_answer",
    "36_stale_buffer_reuse", "40_one_block_sized_to_the_task",
}  # fmt: skip
HACKS = [p for p in sorted((HERE / "hacks").glob("*.py")) if p.stem not in ALIKE]
GOOD = HERE / "candidates" / "good_matmul.py"
STAGES = ("static", "guard", "correctness", "security")
REACHED = {"static", "guard", "correctness"}  # in a run the static check stops the rest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        sandbox.isolation_problem() is not None, reason=f"{sandbox.isolation_problem()}"
    ),
]


def _transcript(path: Path) -> Path:
    data = json.loads(TEMPLATE.read_text())
    request = data["requests"][0]
    data["requests"] = [
        {**request, "index": i, "reply": f"The kernel:\n```python\n{f.read_text()}```\n"}
        for i, f in enumerate([*HACKS, GOOD])
    ]
    path.write_text(json.dumps(data))
    return path


def test_every_hack_fails_recorded_in_one_run_and_the_run_goes_on(tmp_path):
    transcript = _transcript(tmp_path / "hacks.json")
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "HYDRA_FULL_ERROR": "0"}
    env.pop("TRITON_INTERPRET", None)
    env.pop(sandbox.SANDBOX_ENV, None)
    args = ["+kernel=kernelbench", f"kernel.path={TASKS}", "kernel.task=level1/1"]
    args += ["planner=icrl", "planner.options.llm=true", "planner.options.llm_every=1"]
    args += ["planner.options.repair_budget=0"]  # one reply, one hack: no repair requests
    args += ["llm=replay", f"llm.options.transcript={transcript}", f"budget={len(HACKS) + 2}"]
    args += ["tracking=none", "evaluate.trials=1", "progress=off", "seed=0"]
    args += [f"hydra.run.dir={tmp_path / 'run'}"]
    args += [f"planner.options.values_path={tmp_path / 'values.json'}"]
    proc = subprocess.run(
        [sys.executable, "-m", "argus_core.cli", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    by_source = {r["candidate"]["source"].strip(): r for r in results}
    stages = set()
    for hack in HACKS:
        r = by_source.get(hack.read_text().strip())
        assert r is not None, f"{hack.name} was not checked in the run"
        failure = r["failure"]
        assert failure, f"{hack.name} was accepted in a run"
        assert failure.split(":")[0] in STAGES, failure[:300]
        stages.add(failure.split(":")[0])
        assert len(failure) <= 3 * sandbox.OUTPUT_TAIL_BYTES
    assert stages == REACHED, stages
    good = by_source[GOOD.read_text().strip()]
    assert good["failure"] is None  # the run went on, and a correct candidate still passes
    assert "FAILED" in proc.stdout and "Failures:" in proc.stdout
