"""planner=search options.mode=pattern: one-step moves around the best so far."""

from __future__ import annotations

from omegaconf import OmegaConf

from argus_core.planning.actions import ActionSpace
from argus_core.types import CandidateResult, TimingReport
from argus_plugins.planners.search import PatternSession, SearchPlanner, steps


def test_steps_move_one_value_one_place(planner_ctx):
    space = ActionSpace.from_ctx(planner_ctx("+kernel=gemm", "backend=h200"))
    start = space.start()
    moves = steps(space, start)
    assert moves
    for action, policy in moves:
        assert action.note().startswith("grid_neighbour:")
        changed = [
            k
            for k in {**policy.tiles, **policy.compiler}
            if {**policy.tiles, **policy.compiler}[k] != {**start.tiles, **start.compiler}.get(k)
        ]
        assert len(changed) == 1 and space.valid(policy)
        (name,) = changed
        values = space.tiles.get(name) or space.compiler[name]
        old = {**start.tiles, **start.compiler}.get(name, values[0])
        new = {**policy.tiles, **policy.compiler}[name]
        assert abs(values.index(new) - values.index(old)) == 1


def test_pattern_search_recentres_on_the_best(planner_ctx):
    ctx = planner_ctx("+kernel=gemm", "backend=h200")
    cfg = OmegaConf.create({"name": "search", "options": {"mode": "pattern"}})
    session = SearchPlanner().create(cfg, ctx)
    assert isinstance(session, PatternSession)

    def ms(policy) -> float:  # a synthetic target: larger BN is faster
        return 1.0 / policy.tiles["BN"]

    seen = []
    for _ in range(30):
        batch = session.propose(1)
        if not batch:
            break
        cand = batch[0]
        seen.append(cand.policy)
        res = CandidateResult(
            candidate=cand, timing=TimingReport(ms=ms(cand.policy), estimated=True)
        )
        session.observe(res)
    assert len({p.key() for p in seen}) == len(seen)
    assert max(p.tiles["BN"] for p in seen) == max(session.space.tiles["BN"])
    assert session.state()["rounds"] >= 2
