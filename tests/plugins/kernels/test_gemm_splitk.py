"""Split-K GEMM: a SPLIT tile selects the two-kernel program (atomic partial sums into an fp32
workspace, then a cast); it is verified, cross-compiled and correct in the interpreter, and
the cost model gives skinny shapes more programs with it."""

from __future__ import annotations

import pytest

from argus_core.pipeline import Stages
from argus_core.plugin_manager import Registry, default_plugin_manager
from argus_core.types import Candidate, Policy


def _stages(argus_config, *overrides: str) -> Stages:
    cfg = argus_config(
        "+kernel=gemm", "tracking=none", "evaluate.trials=1", "kernel.shape={M:16,N:4096,K:4096}",
        *overrides,
    )  # fmt: skip
    return Stages.from_config(cfg, Registry(default_plugin_manager()))


def _cand(stages: Stages, tiles: dict[str, int]) -> Candidate:
    fam = stages.family
    return Candidate(
        id="c1",
        kernel="gemm",
        source=fam.source(),
        entry=fam.entry,
        policy=Policy(tiles=tiles, compiler={"num_warps": 4, "num_stages": 2}),
    )


@pytest.mark.slow
def test_split_k_candidate_is_verified_compiled_and_correct(argus_config):
    stages = _stages(argus_config)
    res, artifacts = stages.evaluate(
        _cand(stages, {"BM": 16, "BN": 32, "BK": 32, "SPLIT": 3}), 0, None
    )
    assert res.ok, res.failure
    assert res.verify.status == "verified"
    assert res.correctness is not None and res.correctness.ok
    lowered = artifacts["lowered_triton.py"]
    assert "tl.atomic_add" in lowered and "def gemm_cast" in lowered
    assert res.timing is not None and res.timing.estimated


def test_a_group_tile_is_rejected_for_split_k(argus_config):
    stages = _stages(argus_config, "evaluate.correctness=off")
    res, _ = stages.evaluate(
        _cand(stages, {"BM": 16, "BN": 64, "BK": 64, "GROUP": 8, "SPLIT": 2}), 0, None
    )
    assert not res.ok and "GROUP" in res.failure


def test_cost_model_prefers_split_k_for_a_skinny_gemm(argus_config):
    stages = _stages(argus_config, "evaluate.correctness=off", "verifier=none")
    tiles = {"BM": 16, "BN": 128, "BK": 64}
    plain, _ = stages.evaluate(_cand(stages, {**tiles, "GROUP": 1}), 0, None)
    split, _ = stages.evaluate(_cand(stages, {**tiles, "SPLIT": 4}), 1, None)
    assert plain.ok and split.ok, (plain.failure, split.failure)
    # 32 output tiles on 304 CUs: 4 splits make 128 programs, each loop a quarter as long
    assert split.timing.ms < 0.6 * plain.timing.ms
