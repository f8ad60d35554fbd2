"""icrl with the cost model: a failure for lack of shared memory is the policy's, not its
lowering switch's; the first half of the budget screens the model's best tiles, then the
steps alternate between a new tile and the best tiles' options; the correction learned from
this run's measurements shifts every policy that shares a value; a best tile measured only
with lowering switches on is measured with all of them off next, then with each combination
of them it has not had."""

from __future__ import annotations

from omegaconf import OmegaConf

from argus_core.planning.space import pipelined_smem
from argus_core.types import CandidateResult, Policy, TimingReport
from argus_plugins.planners.icrl import (
    KB_TRUST,
    NEAR,
    IcrlPlanner,
    _switched_on,
    _tile_of,
    out_of_resources,
    smem_need,
)

SMEM = "compile: OutOfResources: out of resource: shared memory, Required: 262176, Hardware limit: 232448"


def _session(planner_ctx, tmp_path, budget=None):
    ctx = planner_ctx("+kernel=gemm", "backend=h200")
    if budget is not None:
        ctx["budget"] = budget
    opts = {"values_path": str(tmp_path / "v.json"), "learn": False}
    return IcrlPlanner().create(OmegaConf.create({"name": "icrl", "options": opts}), ctx), ctx


def _timed(cand, ms):
    res = CandidateResult(candidate=cand, index=0)
    res.timing, res.reward = TimingReport(ms=ms, estimated=False), 1.0
    return res


def _failed(cand, why):
    res = CandidateResult(candidate=cand, index=0)
    res.failure, res.reward = why, -0.5
    return res


def test_out_of_resources_is_recognized():
    assert out_of_resources(SMEM)
    assert not out_of_resources("compile: RuntimeError: PassManager::run failed")
    assert not out_of_resources(None)


def test_a_shared_memory_failure_bans_bigger_policies_not_the_switch(planner_ctx, tmp_path):
    session, ctx = _session(planner_ctx, tmp_path)
    (first,) = session.propose(1)
    on = {k for k in ("tma", "persistent", "warp_specialize") if first.policy.compiler.get(k)}
    session.observe(_failed(first, SMEM))
    need = smem_need(ctx["family"], first.policy)
    assert need is not None and session.smem_failed == need
    assert all(session.switch_outcomes.get(k, [0, 0])[1] == 0 for k in on)  # not blamed
    for _ in range(4):
        (cand,) = session.propose(1)
        assert smem_need(ctx["family"], cand.policy) < need  # never as big again
        session.observe(_timed(cand, 1.0))


def test_a_switch_failure_is_still_blamed_on_the_switch(planner_ctx, tmp_path):
    session, _ = _session(planner_ctx, tmp_path)
    (first,) = session.propose(1)
    first.policy.compiler["warp_specialize"] = 1
    first.policy.compiler["tma"] = 1
    session.observe(_failed(first, "compile: RuntimeError: PassManager::run failed"))
    assert session.switch_outcomes["warp_specialize"] == [0, 1]
    assert session.smem_failed is None


def test_the_first_half_of_the_budget_screens_new_tiles(planner_ctx, tmp_path):
    session, _ = _session(planner_ctx, tmp_path, budget=8)
    assert session.screen == 4
    tiles = []
    for i in range(4):  # the start and three new tiles, whatever they measure
        (cand,) = session.propose(1)
        assert _tile_of(cand.policy) not in tiles
        tiles.append(_tile_of(cand.policy))
        session.observe(_timed(cand, 1.0 - 0.1 * i))  # each a new best
    session.propose(1)  # screened: after a new best, the options side
    assert not session.last_explore


def test_steps_alternate_between_a_new_tile_and_the_best_tiles_options(planner_ctx, tmp_path):
    session, _ = _session(planner_ctx, tmp_path, budget=2)  # screens the start's tile only
    (first,) = session.propose(1)
    session.observe(_timed(first, 1.0))  # the start: a new best
    (second,) = session.propose(1)  # after a new best: the same tile, other options
    assert _tile_of(second.policy) == _tile_of(first.policy)
    assert second.policy.key() != first.policy.key()
    session.observe(_timed(second, 2.0))  # no better
    (third,) = session.propose(1)  # no gain: a tile no candidate had yet
    assert _tile_of(third.policy) not in {_tile_of(first.policy), _tile_of(second.policy)}
    session.observe(_timed(third, 3.0))
    (fourth,) = session.propose(1)  # no gain again: back to the best tile's options
    assert _tile_of(fourth.policy) == _tile_of(first.policy)


def test_a_tile_within_the_models_error_of_the_best_keeps_its_options(planner_ctx, tmp_path):
    session, _ = _session(planner_ctx, tmp_path, budget=4)  # the start and one new tile
    (first,) = session.propose(1)
    session.observe(_timed(first, 1.0))
    (second,) = session.propose(1)  # screening: a new tile
    assert _tile_of(second.policy) != _tile_of(first.policy)
    session.observe(_timed(second, 1.0 / (1.0 + NEAR / 2)))  # the best, the start near it
    near = {_tile_of(first.policy), _tile_of(second.policy)}
    seen = set()
    for _ in range(6):  # options steps draw from both tiles; new-tile steps from neither
        (cand,) = session.propose(1)
        if session.last_explore:
            assert _tile_of(cand.policy) not in near
        else:
            assert _tile_of(cand.policy) in near
            seen.add(_tile_of(cand.policy))
        session.observe(_timed(cand, 5.0))
    assert seen
    assert 0.0 < NEAR < 0.1


def test_the_correction_shifts_every_policy_sharing_a_slow_value(planner_ctx, tmp_path):
    session, _ = _session(planner_ctx, tmp_path)
    base = session.best_policy
    slow = Policy(dict(base.tiles), {**base.compiler, "persistent": 1})
    fast = Policy(dict(base.tiles), {**base.compiler, "persistent": 0})
    est_slow, est_fast = session._ms(slow), session._ms(fast)
    # measured: persistent=1 twice the model's time, persistent=0 as the model says
    session.measured += [(slow, 2.0), (fast, 1.0)]
    other = Policy({**base.tiles, "BK": 128}, {**base.compiler, "persistent": 1})
    other_off = Policy({**base.tiles, "BK": 128}, {**base.compiler, "persistent": 0})
    ratio_on = session._corrected(other) / session._ms(other)
    ratio_off = session._corrected(other_off) / session._ms(other_off)
    assert ratio_on > ratio_off  # the unmeasured persistent policy is moved up too
    assert session._corrected(slow) / est_slow > session._corrected(fast) / est_fast


def test_a_kb_action_wins_within_the_models_error():
    assert 0.85 < KB_TRUST < 1.0


def test_smem_need_is_the_spaces_rule(planner_ctx):
    ctx = planner_ctx("+kernel=gemm", "backend=h200")
    p = Policy({"BM": 128, "BN": 256, "BK": 64, "GROUP": 8}, {"num_stages": 3, "tma": 1})
    assert smem_need(ctx["family"], p) == pipelined_smem(ctx["family"], p.tiles, p.compiler)


def test_a_best_tile_measured_only_with_switches_on_is_measured_without_them(planner_ctx, tmp_path):
    session, _ = _session(planner_ctx, tmp_path, budget=2)  # screens the start's tile only
    (first,) = session.propose(1)
    assert _switched_on(first.policy)  # the model's start for the H200 GEMM turns tma on
    session.observe(_timed(first, 1.0))
    (second,) = session.propose(1)  # the options side: the same tile, every switch off
    assert _tile_of(second.policy) == _tile_of(first.policy)
    assert not _switched_on(second.policy)
    session.observe(_timed(second, 0.9))  # a new best: the options side again
    points = list(session.space.policy_space.points())
    assert session._plain_reference(_tile_of(first.policy), points) == []  # measured once
    (third,) = session.propose(1)
    assert third.policy.key() not in {first.policy.key(), second.policy.key()}


def test_a_near_tiles_untried_switch_combinations_come_before_its_stages(planner_ctx, tmp_path):
    """After the plain reference, an options step proposes a combination of on/off lowering
    options the tile has not had (TMA and a persistent grid together), never another stage
    count of a combination measured already, until every combination has been proposed."""
    session, _ = _session(planner_ctx, tmp_path, budget=2)  # screens the start's tile only
    (first,) = session.propose(1)
    tile = _tile_of(first.policy)
    points = [
        q
        for q in session.space.policy_space.points()
        if session.space.valid(q) and _tile_of(q) == tile
    ]
    combos = {frozenset(_switched_on(q)) for q in points}
    assert len(combos) > 2  # tma, persistent, warp_specialize: more than on and off
    seen = {frozenset(_switched_on(first.policy))}
    session.observe(_timed(first, 1.0))
    ms = 1.0
    while seen != combos:
        (cand,) = session.propose(1)
        assert not session.last_explore and _tile_of(cand.policy) == tile
        combo = frozenset(_switched_on(cand.policy))
        assert combo not in seen, (combo, seen)
        seen.add(combo)
        ms *= 0.99  # each a new best: the options side again
        session.observe(_timed(cand, ms))
    assert session._untried_switch_sets({tile}, points) == []
    (cand,) = session.propose(1)  # every combination measured: stages of the tile now
    assert _tile_of(cand.policy) == tile and frozenset(_switched_on(cand.policy)) in combos


T64 = "kernel.shape={T: 64, E: 8, TOPK: 2, H: 4096, I: 14336, RENORM: 1}"


def _moe_session(planner_ctx, tmp_path, shape):
    ctx = planner_ctx("+kernel=moe", "backend=h200", shape)
    ctx["budget"] = 8
    opts = {"values_path": str(tmp_path / "v.json"), "learn": False}
    return IcrlPlanner().create(OmegaConf.create({"name": "icrl", "options": opts}), ctx)


def test_a_kb_policy_for_this_very_regime_is_screened_once_before_the_models_tiles(
    planner_ctx, tmp_path
):
    # Mixtral decode T64 on Hopper: moe_decode_wgmma_block's three shape conditions hold
    # and it names one tile (BM 64, BN 128, BK 64); the model's first tiles are others
    session = _moe_session(planner_ctx, tmp_path, T64)
    assert "moe_decode_wgmma_block" in session.space.techniques
    (start,) = session.propose(1)
    assert (start.policy.tiles["BM"], start.policy.tiles["BN"]) != (64, 128)
    session.observe(_timed(start, 1.0))
    (second,) = session.propose(1)
    assert {k: second.policy.tiles[k] for k in ("BM", "BN", "BK")} == {
        "BM": 64,
        "BN": 128,
        "BK": 64,
    }
    assert session.pending[second.id][0] == "moe_decode_wgmma_block"
    session.observe(_timed(second, 1.2))  # slower: screening goes on with the model's tiles
    for _ in range(2):
        (cand,) = session.propose(1)
        assert session.pending[cand.id][0] != "moe_decode_wgmma_block"
        session.observe(_timed(cand, 1.1))


def test_advice_naming_a_range_is_not_screened_first(planner_ctx, tmp_path):
    # GEMM 4096^3: vectorized_16b_loads has three conditions that hold (alignment) but
    # names ranges of BK and BN, not a tile: no forced screening for it
    from argus_plugins.planners.icrl import _one_tile

    session, _ = _session(planner_ctx, tmp_path, budget=8)
    techs = session.space.techniques
    assert not _one_tile(techs["vectorized_16b_loads"])
    assert _one_tile(techs["large_tile_hopper"])
    (start,) = session.propose(1)
    session.observe(_timed(start, 1.0))
    (second,) = session.propose(1)
    assert session.pending[second.id][0] != "vectorized_16b_loads"


def test_new_tiles_are_screened_with_every_switch_off(planner_ctx, tmp_path):
    session, _ = _session(planner_ctx, tmp_path, budget=8)
    (start,) = session.propose(1)
    session.observe(_timed(start, 1.0))
    for i in range(3):  # the rest of the screening: new tiles, each in its plain lowering
        (cand,) = session.propose(1)
        assert session.last_explore
        if session.pending[cand.id][0] == "cost_model":  # the model's pick for a new tile
            assert not _switched_on(cand.policy), cand.policy
        session.observe(_timed(cand, 2.0 + i))  # no gain: screening goes on
