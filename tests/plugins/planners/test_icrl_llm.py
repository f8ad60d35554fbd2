"""The LLM path of `planner=icrl` (the sandbox it relies on: tests/core/test_sandbox.py).

Session: the repair budget, an LLM failure recorded, the LLM budget ending its use; the
rules in the prompt name the DSL's own imports. End to end (the `argus` CLI over recorded
transcripts in tests/fixtures/transcripts/): a violated GEMM is repaired from its
counterexample, and each kind of malformed reply fails its candidate with the kind named,
the run going on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from argus_core import sandbox
from argus_core.errors import ConfigError, DSLError
from argus_core.llm import ReplayClient, load_transcript
from argus_core.types import (
    Candidate,
    CandidateResult,
    CorrectnessReport,
    TimingReport,
    VerifyReport,
)
from argus_plugins.dsl.tile.frontend import TileFrontend
from argus_plugins.planners.icrl import IcrlPlanner
from argus_plugins.planners.icrl.llm import extract_code

ROOT = Path(__file__).resolve().parents[3]
TRANSCRIPTS = ROOT / "tests" / "fixtures" / "transcripts"
REPLIES = TRANSCRIPTS / "llm_icrl"  # the modules the recorded replies hold

FRONT = TileFrontend()  # the DSL whose allowlist the sandbox enforces
KERNEL = (REPLIES / "repair_fixed.dsl").read_text()  # a correct GEMM (tile views hoisted)


# --------------------------------------------------------------------------- LLM policy


def test_extract_code_takes_the_fenced_kernel_module():
    assert extract_code("raise BM to 128") is None
    assert extract_code(None) is None
    reply = f"Plan:\n```\npip install x\n```\nCode:\n```python\n{KERNEL}```\nDone."
    assert extract_code(reply) == KERNEL.strip() + "\n"
    assert extract_code("```py\nx = 1\n```") == "x = 1\n"


def _session(planner_ctx, tmp_path, entries, **options):
    ctx = planner_ctx("+kernel=gemm", "backend=mi300x")
    ctx["llm"] = ReplayClient(entries, max_total_tokens=options.pop("max_tokens", None))
    cfg = OmegaConf.create(
        {
            "name": "icrl",
            "options": {"values_path": str(tmp_path / "v.json"), "llm": True, **options},
        }
    )
    return IcrlPlanner().create(cfg, ctx), ctx["llm"]


def _reply(text: str, tokens: int = 10) -> dict:
    return {"messages": [], "reply": text, "prompt_tokens": tokens, "completion_tokens": 0}


def _ok(cand: Candidate, ms: float) -> CandidateResult:
    res = CandidateResult(candidate=cand, timing=TimingReport(ms=ms, estimated=True))
    res.verify, res.reward = VerifyReport(status="verified"), 1.0
    return res


def _violated(cand: Candidate, summary: str) -> CandidateResult:
    res = CandidateResult(candidate=cand, failure=f"verify: {summary}", reward=-1.0)
    res.verify = VerifyReport(
        status="violated", summary=summary, counterexamples=[{"assertion": "dot_contract"}]
    )
    return res


def test_repairs_stop_at_the_repair_budget(planner_ctx, tmp_path):
    block = f"```python\n{KERNEL}```"
    session, client = _session(
        planner_ctx, tmp_path, [_reply(block)] * 3, repair_budget=1, llm_every=1
    )
    (start,) = session.propose(1)
    session.observe(_ok(start, 1.0))
    (first,) = session.propose(1)
    assert (first.origin, first.techniques, first.parent) == ("llm", ["llm"], "c001")
    session.observe(_violated(first, "dot at <c002>:21: SUMMARY-ONE"))
    (fix,) = session.propose(1)
    assert (fix.techniques, fix.parent) == (["llm-repair"], "c002")
    request = client.transcript()[-1]["messages"][-1]["content"]
    assert "dot at <c002>:21: SUMMARY-ONE" in request and '"assertion": "dot_contract"' in request
    session.observe(_violated(fix, "dot at <c003>:21: SUMMARY-TWO"))
    (nxt,) = session.propose(1)  # the lineage's one repair is used: a new kernel instead
    assert nxt.techniques == ["llm"]
    assert "FAILED verification" not in client.transcript()[-1]["messages"][-1]["content"]
    assert session.state()["llm"]["repairs"] == 1


def test_llm_failure_and_no_code_fail_the_candidate_with_the_reason(planner_ctx, tmp_path):
    entries = [
        {**_reply(None), "error": "RateLimitError (HTTP 429): slow down"},
        _reply("I would raise BM."),
    ]
    session, _ = _session(planner_ctx, tmp_path, entries, llm_every=1)
    (start,) = session.propose(1)
    session.observe(_ok(start, 1.0))
    for why in ("the LLM request failed: .*RateLimitError", "the LLM.s reply holds no fenced"):
        (cand,) = session.propose(1)
        assert cand.source == "" and cand.origin == "llm"
        with pytest.raises(DSLError, match=f"no code: {why}"):
            sandbox.parse_candidate(FRONT, cand, ["gemm"])
        res = CandidateResult(candidate=cand, failure="parse: no code", reward=-0.5)
        session.observe(res)
    assert session.state()["llm"]["malformed"] == 2


def test_spent_llm_budget_falls_back_to_the_bandit(planner_ctx, tmp_path):
    block = f"```python\n{KERNEL}```"
    session, _ = _session(planner_ctx, tmp_path, [_reply(block, 100)] * 3, max_tokens=50)
    (start,) = session.propose(1)
    session.observe(_ok(start, 1.0))
    (llm,) = session.propose(1)  # the first request is sent; it spends the token budget
    assert llm.techniques == ["llm"]
    session.observe(_ok(llm, 0.9))
    kinds = []
    for _ in range(4):
        (cand,) = session.propose(1)
        kinds.append(cand.techniques)
        session.observe(_ok(cand, 0.95))
        # the LLM's kernel is the best: the bandit tunes it, still through the sandbox
        assert cand.source == llm.source and cand.origin == "llm"
    assert all(t and t[0] not in ("llm", "llm-repair") for t in kinds)
    state = session.state()["llm"]
    assert state["active"] == 0 and "max_total_tokens" in state["stopped"]


def test_llm_options_are_checked(planner_ctx, tmp_path):
    ctx = planner_ctx("+kernel=gemm")
    with pytest.raises(ConfigError, match="needs an LLM, but llm=none"):
        IcrlPlanner().create(OmegaConf.create({"name": "icrl", "options": {"llm": True}}), ctx)
    for key, bad in (("repair_budget", -1), ("llm_every", 0), ("llm_every", "2")):
        cfg = OmegaConf.create({"name": "icrl", "options": {key: bad}})
        with pytest.raises(ConfigError, match=f"planner.options.{key}="):
            IcrlPlanner().create(cfg, ctx)


# --------------------------------------------------------------------------- end to end

FAST = ["+kernel=gemm", "planner=icrl", "planner.options.llm=true", "llm=replay"]
FAST += ["tracking=none", "evaluate.trials=1", "progress=off", "seed=0"]
FAST += ["evaluate.trace_timeout_s=3"]  # the infinite loop's trace is killed after 3 s
MALFORMED = {  # transcript -> what the failure says
    "llm_no_code.json": "parse: <c002>:1: no code: the LLM's reply holds no fenced ```python",
    "llm_not_dsl.json": "parse: <c002>:1: not DSL: the module defines no @al.kernel",
    "llm_import_os.json": "parse: <c002>:1: import not allowed: 'import os'",
    "llm_infinite_loop.json": "parse: <c002>: trace timed out after 3s",
    "llm_open_builtin.json": "parse: <c002>:14: name not allowed in DSL code: 'open'",
}


@pytest.fixture(scope="module")
def e2e(tmp_path_factory):
    """Two CLI processes at once: the repair run, and one multirun over the malformed
    transcripts (one job each). Returns {name: (CompletedProcess, run dir)} and the cwd."""
    root = tmp_path_factory.mktemp("icrl_llm")
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "HYDRA_FULL_ERROR": "0"}
    env.pop("ARGUS_TRACE_TIMEOUT_S", None)  # the limit comes from the config (FAST)
    env.pop("TRITON_INTERPRET", None)
    values = f"planner.options.values_path={root / 'values.json'}"
    repair = root / "repair"
    sweep = root / "malformed"
    commands = {
        "repair": [
            *FAST,
            values,
            "budget=3",
            f"llm.options.transcript={TRANSCRIPTS / 'repair_gemm.json'}",
            f"hydra.run.dir={repair}",
        ],
        "malformed": [
            "-m",
            *FAST,
            values,
            "budget=2",
            "llm.options.transcript=" + ",".join(str(TRANSCRIPTS / t) for t in MALFORMED),
            f"hydra.sweep.dir={sweep}",
        ],
    }
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-m", "argus_core.cli", *args],
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name, args in commands.items()
    }
    done = {name: (p.communicate(timeout=300)[0], p.returncode) for name, p in procs.items()}
    return root, done, repair, sweep


def test_violated_llm_kernel_is_repaired_from_its_counterexample(e2e):
    _, done, run_dir, _ = e2e
    out, code = done["repair"]
    assert code == 0, out[-3000:]
    results = json.loads((run_dir / "results.json").read_text())
    assert [r["candidate"]["id"] for r in results] == ["c001", "c002", "c003"]
    violated, repaired = results[1], results[2]
    assert violated["candidate"]["origin"] == "llm"
    assert violated["candidate"]["techniques"] == ["llm"]
    assert violated["verify"]["status"] == "violated"
    summary = violated["verify"]["summary"]
    assert violated["failure"] == f"verify: {summary}" and "dot at <c002>" in summary
    # the repair request carries the counterexample verbatim: the line and the JSON
    sent = load_transcript(run_dir / "llm_transcript.json")
    assert len(sent) == 2
    request = sent[1]["messages"][-1]["content"]
    assert summary in request
    assert json.dumps(violated["verify"]["counterexamples"], indent=2) in request
    assert "a_tiles[pm, k + 1]" in request  # and the violated source
    assert summary not in json.dumps(sent[0]["messages"])
    assert repaired["candidate"]["techniques"] == ["llm-repair"]
    assert repaired["candidate"]["parent"] == "c002"
    assert repaired["failure"] is None
    assert repaired["verify"]["status"] == "verified"
    assert repaired["correctness"]["ok"] is True


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_reply_fails_its_candidate_and_the_run_goes_on(e2e, name):
    root, done, _, sweep = e2e
    out, code = done["malformed"]
    assert code == 0, out[-3000:]
    # a sweep job's directory is "<job number>_<its overrides>"
    (job,) = sweep.glob(f"{list(MALFORMED).index(name)}_*")
    assert name in (job / ".hydra" / "overrides.yaml").read_text()
    results = json.loads((job / "results.json").read_text())
    assert [r["candidate"]["id"] for r in results] == ["c001", "c002"]
    assert results[0]["failure"] is None  # the starting kernel, before the LLM's
    bad = results[1]
    assert bad["candidate"]["origin"] == "llm"
    assert bad["failure"].startswith(MALFORMED[name]), bad["failure"]
    assert bad["lowered"] is None and bad["compile"] is None
    # the forbidden code never ran: what it would have created is not there
    assert not (root / "argus_marker_import_os").exists()
    assert not (root / "argus_marker_open").exists()


@pytest.mark.parametrize(
    ("failure", "stage", "says"),
    [
        ("compile: ptxas error: too many resources requested", "compile", "too many resources"),
        (
            "correctness: trial 0 shape {'M': 67}: 12 of 3015 elements wrong",
            "correctness",
            "abs 0.5",
        ),
        ("parse: <c002>:9: name not allowed in DSL code: 'open'", "parse", "'open'"),
        # a crash before any comparison: no errors to quote (was a TypeError on None)
        ("correctness: the worker crashed (signal 11)", "correctness", "signal 11"),
    ],
)
def test_failed_llm_kernel_is_repaired_from_its_error(planner_ctx, tmp_path, failure, stage, says):
    """Not only violated invariants: a kernel that fails to parse, compile or compute the
    right values goes back to the LLM with that error verbatim, within the repair budget."""
    block = f"```python\n{KERNEL}```"
    session, client = _session(
        planner_ctx, tmp_path, [_reply(block)] * 3, repair_budget=1, llm_every=1
    )
    (start,) = session.propose(1)
    session.observe(_ok(start, 1.0))
    (first,) = session.propose(1)
    bad = CandidateResult(candidate=first, failure=failure, reward=-0.5)
    bad.verify = VerifyReport(status="verified" if stage != "parse" else "skipped")
    if stage == "correctness":
        crashed = "crashed" in failure
        bad.correctness = CorrectnessReport(
            ok=False, max_abs_err=None if crashed else 0.5, max_rel_err=None if crashed else 2.0
        )
    session.observe(bad)
    (fix,) = session.propose(1)
    assert (fix.techniques, fix.parent) == (["llm-repair"], first.id)
    request = client.transcript()[-1]["messages"][-1]["content"]
    assert f"FAILED at the {stage} stage" in request and failure in request and says in request
    assert first.source.strip().splitlines()[-1] in request  # its source goes back too
    session.observe(CandidateResult(candidate=fix, failure=failure, reward=-0.5))
    (nxt,) = session.propose(1)  # the budget of one repair is spent: a new kernel
    assert nxt.techniques == ["llm"]
