"""The sandbox in a whole run (`planner=icrl planner.options.llm=true llm=replay`): where OS
isolation is unavailable an LLM's candidate fails at stage `security` and the run goes on
and is recorded; `ARGUS_SANDBOX=none` runs it, loudly; a 20 MB exception message from a
reply is cut to a few KiB in the failure and in results.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from argus_core import sandbox

TRANSCRIPTS = Path(__file__).parents[1] / "fixtures" / "transcripts"
FAST = ["+kernel=gemm", "planner=icrl", "planner.options.llm=true", "llm=replay"]
FAST += ["tracking=none", "evaluate.trials=1", "progress=off", "seed=0", "budget=2"]
HUGE = "x" * (20 << 20)


def _huge_error_transcript(path: Path) -> Path:
    data = json.loads((TRANSCRIPTS / "llm_import_os.json").read_text())
    reply = data["requests"][0]["reply"]
    reply = reply.replace("import os\n\n", "").replace(
        'os.makedirs("argus_marker_import_os", exist_ok=True)\n',
        "",
    )
    reply = reply.replace(
        "    acc = al.zeros((BM, BN), al.f32)\n",
        '    acc = al.zeros((BM, BN), al.f32)\n    raise ValueError("x" * (20 << 20))\n',
    )
    data["requests"][0]["reply"] = reply
    path.write_text(json.dumps(data))
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("sandbox_pipeline")
    transcript = _huge_error_transcript(root / "huge.json")
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "HYDRA_FULL_ERROR": "0"}
    env.pop("TRITON_INTERPRET", None)
    env.pop(sandbox.SANDBOX_ENV, None)
    variants = {
        "isolated": {},
        "unavailable": {"ARGUS_BWRAP": str(root / "no-bwrap")},
        "none": {"ARGUS_BWRAP": str(root / "no-bwrap"), sandbox.SANDBOX_ENV: "none"},
    }
    procs = {}
    for name, extra in variants.items():
        args = [*FAST, f"llm.options.transcript={transcript}", f"hydra.run.dir={root / name}"]
        args.append(f"planner.options.values_path={root / name / 'values.json'}")
        procs[name] = subprocess.Popen(
            [sys.executable, "-m", "argus_core.cli", *args],
            cwd=root,
            env={**env, **extra},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    done = {n: (p.communicate(timeout=600)[0], p.returncode) for n, p in procs.items()}
    return root, done


def _results(root: Path, name: str) -> list[dict]:
    return json.loads((root / name / "results.json").read_text())


@pytest.mark.slow
def test_without_isolation_the_llm_candidate_fails_at_security_and_the_run_goes_on(runs):
    root, done = runs
    out, code = done["unavailable"]
    assert code == 0, out[-3000:]  # the starting kernel is correct
    results = _results(root, "unavailable")
    assert [r["candidate"]["id"] for r in results] == ["c001", "c002"]
    assert results[0]["failure"] is None
    failure = results[1]["failure"]
    assert failure.startswith("security: refusing to run tracing untrusted DSL code"), failure
    assert "not installed" in failure and "sandbox=none" in failure


@pytest.mark.slow
def test_a_huge_exception_message_is_cut_everywhere(runs):
    root, done = runs
    out, code = done["isolated"]
    assert code == 0, out[-3000:]
    failure = _results(root, "isolated")[1]["failure"]
    assert failure.startswith("parse:") and "ValueError: xxx" in failure
    assert "characters cut" in failure and len(failure) < 3 * sandbox.OUTPUT_TAIL_BYTES
    assert (root / "isolated" / "results.json").stat().st_size < 1 << 20
    assert len(out) < 1 << 20


@pytest.mark.slow
def test_sandbox_none_runs_untrusted_code_and_says_so(runs):
    root, done = runs
    out, code = done["none"]
    assert code == 0, out[-3000:]
    assert "SANDBOX DISABLED" in out
    failure = _results(root, "none")[1]["failure"]
    assert failure.startswith("parse:") and "ValueError: xxx" in failure
