"""The shared action space: KB techniques filtered by family, target and shape, with
concrete parameters, plus grid neighbours; only valid policies are ever offered."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from argus_core.errors import ArgusError, ConfigError
from argus_core.planning.actions import NEIGHBOUR, ActionSpace
from argus_core.types import Policy
from argus_plugins.planners.search import SearchPlanner

SKINNY = "kernel.shape={M: 64, N: 4096, K: 4096}"
DECODE = "kernel.shape={T: 16, E: 8, TOPK: 2, H: 4096, I: 14336, RENORM: 1}"


def _space(planner_ctx, knowledge_base, *overrides: str) -> ActionSpace:
    """The space over the configs' lists as written (the derived space: test_policy_space)."""
    return ActionSpace.from_ctx(planner_ctx(*overrides), knowledge_base, "config")


@pytest.mark.parametrize("backend", ["mi300x", "h200"])
@pytest.mark.parametrize("kernel", ["gemm", "moe"])
def test_every_action_yields_a_valid_new_policy(planner_ctx, knowledge_base, backend, kernel):
    space = _space(planner_ctx, knowledge_base, f"+kernel={kernel}", f"backend={backend}")
    start = space.start()
    space.backend.validate_policy(start)
    actions = space.actions(start)
    assert {a.technique for a, _ in actions} - {NEIGHBOUR}
    assert space.actions(start, NEIGHBOUR)  # may duplicate techniques' moves in `actions`
    keys = [p.key() for _, p in actions]
    assert len(keys) == len(set(keys)) and start.key() not in keys
    for action, policy in actions:
        space.backend.validate_policy(policy)  # raises PolicyError if not
        assert action.apply(start) == policy
        for name, value in (*action.tiles, *action.compiler):
            assert f"{name}={value}" in action.note()
        assert action.note().startswith(action.technique + ":")


@pytest.mark.parametrize("backend", ["mi300x", "h200"])
@pytest.mark.parametrize("mode", ["random", "grid"])
def test_search_proposes_the_start_then_valid_distinct_policies(planner_ctx, backend, mode):
    ctx = planner_ctx("+kernel=gemm", f"backend={backend}")
    cfg = OmegaConf.create({"name": "search", "options": {"mode": mode, "space": "config"}})
    session = SearchPlanner().create(cfg, ctx)
    cands = session.propose(1000)
    assert cands[0].techniques == [] and cands[0].policy == Policy(
        {"BM": 64, "BN": 64, "BK": 32, "GROUP": 8},
        {k: v[0] for k, v in dict(ctx["backend_cfg"]["policy_grid"]).items()},
    )
    assert len({c.policy.key() for c in cands}) == len(cands) > 10
    for c in cands[1:]:
        ctx["backend"].validate_policy(c.policy)
        assert len(c.techniques) == 1 and c.note.startswith(c.techniques[0])
        assert c.parent == "c001"
    assert session.propose(5) == []  # the action space is exhausted


def test_search_random_is_seeded_and_grid_is_ordered(planner_ctx):
    def ids(mode: str, seed: int) -> list[str]:
        ctx = planner_ctx("+kernel=gemm", f"seed={seed}")
        cfg = OmegaConf.create({"name": "search", "options": {"mode": mode, "space": "config"}})
        return [c.policy.key() for c in SearchPlanner().create(cfg, ctx).propose(1000)]

    assert ids("random", 0) == ids("random", 0) != ids("random", 1)
    assert ids("grid", 0) == ids("grid", 1)
    assert sorted(ids("random", 0)) == sorted(ids("grid", 0))  # same actions, other order


def test_search_rejects_a_bad_mode_or_option(planner_ctx):
    ctx = planner_ctx("+kernel=gemm")
    with pytest.raises(ConfigError, match=r"'anneal'.*random, grid"):
        SearchPlanner().create(
            OmegaConf.create({"name": "search", "options": {"mode": "anneal"}}), ctx
        )
    with pytest.raises(ConfigError, match=r"'modes'.*valid choices: mode"):
        SearchPlanner().create(
            OmegaConf.create({"name": "search", "options": {"modes": "grid"}}), ctx
        )


def test_kpack_is_offered_on_mi300x_only_and_only_where_bk_allows(planner_ctx, knowledge_base):
    bk64 = Policy({"BM": 64, "BN": 64, "BK": 64, "GROUP": 8}, {"num_warps": 4, "num_stages": 3})
    for backend in ("h200", "mi300x"):
        space = _space(planner_ctx, knowledge_base, "+kernel=gemm", f"backend={backend}")
        start = space.start()
        assert start.tiles["BK"] == 32
        # kpack's precondition `BK >= 64` is checked on the policy the action yields
        assert not [a for a, _ in space.actions(start) if a.technique == "kpack"]
        policy = bk64 if backend == "h200" else Policy(bk64.tiles, {**start.compiler})
        kpack = [p for a, p in space.actions(policy) if "kpack" in dict(a.compiler)]
        if backend == "h200":
            assert "kpack" not in space.techniques and not kpack
            assert all("kpack" not in p.compiler for _, p in space.actions(policy))
        else:
            assert "kpack" in space.techniques and kpack
            assert all(p.compiler["kpack"] == 2 for p in kpack)


def test_techniques_are_filtered_by_family(planner_ctx, knowledge_base):
    gemm = set(_space(planner_ctx, knowledge_base, "+kernel=gemm").techniques)
    moe = set(_space(planner_ctx, knowledge_base, "+kernel=moe").techniques)
    assert {"grouped_ordering", "tile_warp_selection"} <= gemm
    assert not {t for t in gemm if t.startswith("moe_")}
    assert "moe_block_m_large" in moe and not {"grouped_ordering", "tile_warp_selection"} & moe
    assert {"pipeline_depth", "waves_per_eu"} <= gemm & moe  # written for any family


def test_techniques_are_filtered_by_shape(planner_ctx, knowledge_base):
    prefill = _space(planner_ctx, knowledge_base, "+kernel=moe").techniques
    decode = _space(planner_ctx, knowledge_base, "+kernel=moe", DECODE).techniques
    assert "moe_block_m_large" in prefill and "moe_block_m_small" not in prefill
    assert "moe_block_m_small" in decode and "moe_block_m_large" not in decode
    assert "moe_decode_weight_streaming" in decode and "moe_decode_weight_streaming" not in prefill
    square = _space(planner_ctx, knowledge_base, "+kernel=gemm")
    skinny = _space(planner_ctx, knowledge_base, "+kernel=gemm", SKINNY)
    assert "skinny_m_tiles" in skinny.techniques and "skinny_m_tiles" not in square.techniques
    # tiles beyond the config grid (BM 16) come only from the technique written for it
    small_m = [a for a, p in skinny.actions(skinny.start()) if p.tiles["BM"] < 64]
    assert small_m and {a.technique for a in small_m} == {"skinny_m_tiles"}


def test_interpret_gets_only_target_independent_techniques(planner_ctx, knowledge_base):
    space = _space(planner_ctx, knowledge_base, "+kernel=gemm", "backend=interpret")
    assert space.techniques
    for tech in space.techniques.values():
        assert tech.targets == ("any",)
    for _, policy in space.actions(space.start()):
        assert set(policy.compiler) <= {"num_warps", "num_stages"}


def test_invalid_policies_are_filtered_before_proposing(planner_ctx, knowledge_base):
    space = _space(planner_ctx, knowledge_base, "+kernel=gemm", SKINNY)
    start = space.start()
    # skinny_m_tiles lists BK 128 with 4 stages: over the MI300X LDS for BN 128
    raw = [a.apply(start) for a in space._technique("skinny_m_tiles", start)]
    rejected = []
    for policy in raw:
        try:
            space.backend.validate_policy(policy)
        except ArgusError:
            rejected.append(policy.key())
    offered = {p.key() for _, p in space.actions(start, "skinny_m_tiles")}
    assert rejected and not set(rejected) & offered
    assert offered == {p.key() for p in raw} - set(rejected)
