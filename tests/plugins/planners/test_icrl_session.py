"""The icrl session on synthetic rewards: the start first, one KB action at a time on the
best policy, values learned from `observe`, persisted, and reported by `state()`."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from argus_core.errors import ConfigError
from argus_core.planning.actions import NEIGHBOUR
from argus_core.types import Candidate, CandidateResult, Policy, TimingReport
from argus_plugins.planners.icrl import IcrlPlanner, bandit_reward

# a synthetic target: how each technique changes the time of the policy it modifies
GAIN = {"pipeline_depth": 0.8, "mfma_instr_nonkdim": None}  # None: fails verification
OTHER = 1.1


def _result(cand: Candidate, index: int, parent_ms: float | None) -> CandidateResult:
    """What the pipeline would report, with the pipeline's reward (speedup over c001)."""
    technique = cand.techniques[0] if cand.techniques else None
    res = CandidateResult(candidate=cand, index=index)
    factor = GAIN.get(technique, OTHER) if technique else 1.0
    if factor is None:
        res.failure, res.reward = "verify: store_once violated at c.py:12", -1.0
        return res
    ms = (parent_ms or 1.0) * factor
    res.timing = TimingReport(ms=ms, estimated=True)
    res.reward = 1.0 / ms  # the starting policy's time is 1.0
    return res


def _run(session, steps: int) -> list[CandidateResult]:
    results, times = [], {}
    for i in range(steps):
        batch = session.propose(steps - i)
        if not batch:
            break
        assert len(batch) == 1  # one at a time: each choice sees every result before it
        cand = batch[0]
        res = _result(cand, i, times.get(cand.parent))
        if res.timing is not None:
            times[cand.id] = res.timing.ms
        results.append(res)
        session.observe(res)
    return results


def _cfg(tmp_path, **options):
    """The bandit alone (no cost model) over the configs' lists, unless options say else."""
    values = str(tmp_path / "values.json")
    base = {"values_path": values, "model": False, "space": "config"}
    return OmegaConf.create({"name": "icrl", "options": {**base, **options}})


def test_icrl_learns_which_technique_pays_and_reports_its_state(planner_ctx, tmp_path):
    ctx = planner_ctx("+kernel=gemm", "backend=mi300x")
    session = IcrlPlanner().create(_cfg(tmp_path), ctx)
    results = _run(session, 25)
    first = results[0].candidate
    assert first.techniques == [] and first.policy == session.space.start()
    arms = set(session.space.arms())
    for r in results[1:]:
        assert len(r.candidate.techniques) == 1 and r.candidate.techniques[0] in arms
        ctx["backend"].validate_policy(r.candidate.policy)
    assert len({r.candidate.policy.key() for r in results}) == len(results)

    state = json.loads(json.dumps(session.state()))  # plain data, loggable as is
    assert state["planner"] == "icrl" and state["strategy"] == "ucb1"
    assert state["key"] == "gemm/mi300x" and state["step"] == len(results)
    values = state["values"]
    assert set(values) == arms
    tried = {t: v for t, v in values.items() if v["count"]}
    assert max(tried, key=lambda t: tried[t]["value"]) == "pipeline_depth"
    assert values["pipeline_depth"]["value"] == pytest.approx(1 / 0.8)
    assert values["mfma_instr_nonkdim"]["value"] == -1.0
    assert state["total"] == len(results) - 1 == sum(v["count"] for v in values.values())
    best = min((r for r in results if r.ok), key=lambda r: r.timing.ms)
    assert state["best"]["candidate"] == best.candidate.id and best.timing.ms < 1.0
    assert state["best"]["policy"] == best.candidate.policy.to_dict()
    assert state["last"]["candidate"] == results[-1].candidate.id

    # a second run loads what the first learned, and exploits it (exploration 0)
    again = IcrlPlanner().create(_cfg(tmp_path, exploration=0.0), ctx)
    loaded = again.state()["values"]
    assert {t: (v["value"], v["count"]) for t, v in loaded.items()} == {
        t: (v["value"], v["count"]) for t, v in values.items()
    }
    assert again.state()["step"] == 0
    second = _run(again, 4)
    picked = [r.candidate.techniques[0] for r in second[1:]]
    untried = {t for t, v in values.items() if not v["count"]}
    # kpack needs BK >= 64, which no best policy of the first run had: never offered
    assert untried == {"kpack"} and picked[0] == "pipeline_depth", picked


def test_actions_apply_to_the_best_policy_so_far(planner_ctx, tmp_path):
    session = IcrlPlanner().create(_cfg(tmp_path), planner_ctx("+kernel=gemm"))
    results = _run(session, 12)
    best_ms, best_id = None, None
    for r in results:
        if r.candidate.parent is not None:
            assert r.candidate.parent == best_id  # the state the action was applied to
        if r.ok and (best_ms is None or r.timing.ms < best_ms):
            best_ms, best_id = r.timing.ms, r.candidate.id


def test_bandit_reward_is_the_gain_over_the_modified_policy():
    cand = Candidate("c002", "gemm", "", "gemm", Policy({"BM": 64}))
    ok = CandidateResult(candidate=cand, timing=TimingReport(ms=0.5, estimated=True), reward=4.0)
    assert bandit_reward(ok, parent_ms=1.0) == 2.0  # not the pipeline's 4.0 over c001
    assert bandit_reward(ok, parent_ms=None) == 4.0
    failed = CandidateResult(candidate=cand, failure="correctness: wrong result", reward=-1.0)
    assert bandit_reward(failed, 1.0) == -1.0
    assert bandit_reward(CandidateResult(candidate=cand, failure="compile: x"), 1.0) == -0.5
    slow = CandidateResult(candidate=cand, timing=TimingReport(ms=float("inf"), estimated=True))
    assert bandit_reward(slow, 1.0) == 0.0


def test_icrl_options_are_checked(planner_ctx, tmp_path):
    ctx = planner_ctx("+kernel=gemm")
    with pytest.raises(ConfigError, match="options.llm=true"):
        IcrlPlanner().create(_cfg(tmp_path, llm=True), ctx)
    with pytest.raises(ConfigError, match=r"'explore'.*exploration, values_path, learn, llm"):
        IcrlPlanner().create(_cfg(tmp_path, explore=2), ctx)


def test_default_values_path_is_under_the_cwd(planner_ctx, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = OmegaConf.create({"name": "icrl", "options": {"values_path": None}})
    session = IcrlPlanner().create(cfg, planner_ctx("+kernel=gemm"))
    _run(session, 3)
    saved = json.loads((tmp_path / ".argus" / "icrl_values.json").read_text())
    assert sum(v["count"] for v in saved["tables"]["gemm/mi300x"].values()) == 2
    assert NEIGHBOUR in session.state()["values"]


def test_each_timed_result_gets_profiler_feedback_in_state_and_history(planner_ctx, tmp_path):
    ctx = planner_ctx("+kernel=gemm", "backend=h200")
    session = IcrlPlanner().create(_cfg(tmp_path), ctx)
    results = _run(session, 3)
    prof = session.state()["last"]["profile"]
    assert prof["label"] == "ESTIMATE"  # the synthetic times are estimates
    assert prof["bound"] in ("memory", "compute") and prof["tflops"] > 0
    assert "ESTIMATE" in session.history[-1] and "-bound at" in session.history[-1]
    failed = [r for r in results if not r.ok]
    assert all("ESTIMATE" not in h for r, h in zip(results, session.history) if r in failed)


def test_with_the_cost_model_the_start_is_the_space_best_estimate(planner_ctx, tmp_path):
    ctx = planner_ctx("+kernel=gemm", "backend=h200")
    session = IcrlPlanner().create(_cfg(tmp_path, model=True, space="derived"), ctx)
    space = session.space
    backend, family = ctx["backend"], ctx["family"]
    shape = dict(space.shape)

    def est(p):
        return backend.estimate(family, shape, "bf16", p, None).ms

    points = [p for p in space.policy_space.points() if space.valid(p)]
    (first,) = session.propose(1)
    assert est(first.policy) == min(est(p) for p in points)
    assert "least estimated time" in first.note
    # with the start timed, the next action is the least estimated of every arm's options
    session.observe(_result(first, 0, None))
    (second,) = session.propose(1)
    assert second.techniques and second.policy.key() != first.policy.key()
    assert "cost_model" in session.state()["values"]
