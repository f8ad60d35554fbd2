"""The explicit level in the pipeline: a policy with `level: explicit` is built by the family
(`explicit_kernel`), proved by the SMT verifier through its normal `verify`, lowered and
cross-compiled by the backend's Gluon target (`explicit_target`), and checked on the GPU
only; the KB's `level` entries make the planners propose such policies where the backend
has an explicit level."""

from __future__ import annotations

import pytest

from argus_core import kb
from argus_core.errors import PolicyError
from argus_core.ir.explicit import Arrive, replace_op, selects_explicit
from argus_core.pipeline import Stages
from argus_core.planning.actions import ActionSpace
from argus_core.plugin_manager import Registry, default_plugin_manager
from argus_core.types import Candidate, Policy

GEMM_EXPLICIT = Policy(
    {"BM": 128, "BN": 128, "BK": 64, "STAGES": 3, "GROUP": 8},
    {"level": "explicit", "num_warps": 4, "mma_in_flight": 1},
)


def _stages(argus_config, *overrides: str) -> Stages:
    cfg = argus_config("+kernel=gemm", "tracking=none", "evaluate.trials=1", *overrides)
    return Stages.from_config(cfg, Registry(default_plugin_manager()))


def _cand(stages: Stages, policy: Policy) -> Candidate:
    fam = stages.family
    return Candidate("c1", fam.name, fam.source(), fam.entry, policy)


def test_backends_declare_their_explicit_level():
    reg = Registry(default_plugin_manager())
    assert reg.get("backend", "h200").explicit_target.name == "hopper-gluon"
    assert reg.get("backend", "mi300x").explicit_target.name == "cdna3-gluon"
    interp = reg.get("backend", "interpret")
    assert interp.explicit_target is None
    with pytest.raises(PolicyError, match="interpret.*need a GPU target"):
        interp.check_explicit_level()


def test_family_builds_the_explicit_kernel_and_names_bad_knobs():
    gemm = Registry(default_plugin_manager()).get("kernel", "gemm")
    kernel = gemm.explicit_kernel(GEMM_EXPLICIT, "hopper-gluon", {"M": 256, "N": 256, "K": 256})
    assert kernel.name == "gemm_ws_persistent" and kernel.consts["STAGES"] == 3
    bad = Policy(GEMM_EXPLICIT.tiles, {**GEMM_EXPLICIT.compiler, "num_stages": 3})
    with pytest.raises(PolicyError, match="'num_stages'.*num_warps, mma_in_flight"):
        gemm.explicit_kernel(bad, "hopper-gluon", {})
    wide = Policy({**GEMM_EXPLICIT.tiles, "BN": 256}, GEMM_EXPLICIT.compiler)
    with pytest.raises(PolicyError, match="256 registers per thread"):
        gemm.explicit_kernel(wide, "hopper-gluon", {})
    with pytest.raises(PolicyError, match="'sm_100'.*hopper-gluon, cdna3-gluon"):
        gemm.explicit_kernel(GEMM_EXPLICIT, "sm_100", {})
    attn = Registry(default_plugin_manager()).get("kernel", "attention")
    with pytest.raises(PolicyError, match="head dim D.*96"):
        attn.explicit_kernel(Policy({}, {"level": "explicit"}), "hopper-gluon", {"D": 96})


def test_smt_verify_dispatches_an_explicit_kernel():
    reg = Registry(default_plugin_manager())
    gemm, smt, h200 = (
        reg.get("kernel", "gemm"),
        reg.get("verifier", "smt"),
        reg.get("backend", "h200"),
    )
    kernel = gemm.explicit_kernel(GEMM_EXPLICIT, "hopper-gluon", {})
    ok = smt.verify(kernel, GEMM_EXPLICIT, {}, h200.spec)
    assert ok.status == "verified" and ok.assertions > 0
    # the consumer releases the stage its in-flight wgmma still reads (its own, `it % STAGES`,
    # the stage it waited for) instead of the one behind: an early release
    own = next(op.stage for _, op in kernel.ops() if op.point == "mma/tile/kk/0:Wait")
    bug = replace_op(kernel, "mma/tile/kk/3:Arrive", Arrive("empty", own))
    bad = smt.verify(bug, GEMM_EXPLICIT, {}, h200.spec)
    assert bad.status == "violated"
    assert bad.counterexamples[0]["point"] == "mma/tile/kk/3:Arrive", bad.summary


def test_planner_offers_the_level_where_the_backend_has_one(argus_config):
    for backend, offered in (("h200", True), ("interpret", False)):
        space = _space(_stages(argus_config, f"backend={backend}"))
        assert ("explicit_gemm_hopper" in space.techniques) is offered
        if offered:
            moves = space.actions(space.start(), "explicit_gemm_hopper")
            assert moves and all(selects_explicit(p) for _, p in moves)
            for _, p in moves:  # tile-level names are dropped, the kernel's constants set
                assert "num_stages" not in p.compiler and p.tiles["STAGES"] in (3, 4)
                assert not (p.tiles["BN"] == 256 and p.compiler["num_warps"] == 4)
            # a grid neighbour that adds a tile-level option to an explicit policy is invalid
            assert not space.valid(
                Policy(moves[0][1].tiles, {**moves[0][1].compiler, "num_stages": 3})
            )


def _explicit_gemm_moves(argus_config, m: int) -> set[tuple[int, ...]]:
    space = _space(_stages(argus_config, "backend=h200", f"kernel.shape.M={m}"))
    moves = [p for _, p in space.actions(space.start(), "explicit_gemm_hopper")]
    assert all(space.valid(p) for p in moves)
    return {
        tuple(p.tiles[t] for t in ("BM", "BN", "BK", "STAGES")) + (p.compiler["num_warps"],)
        for p in moves
    }


def test_planner_offers_the_skinny_configurations_only_where_m_is_small(argus_config):
    # gluon_bench's best at M=128 (64x64x128 with six stages: 1.050x cuBLAS at 128x4096x4096
    # on the H200; 128x128x64 with five at 128x14336x4096) are in reach of the planner there,
    # and only there: a large M keeps the 128-row, BK 64, three- or four-stage space
    large, skinny = (
        _explicit_gemm_moves(argus_config, 4096),
        _explicit_gemm_moves(argus_config, 128),
    )
    assert (64, 64, 128, 6, 4) in skinny and (128, 128, 64, 5, 4) in skinny
    assert large < skinny
    assert all(bm == 128 and bk == 64 and s in (3, 4) for bm, _, bk, s, _ in large)
    assert not any(w == 8 and bm == 64 for bm, *_, w in skinny)  # 64 rows over two warpgroups


def test_kb_level_entries_load_and_bad_ones_are_named(tmp_path):
    base = kb.load()
    tech = base.get("explicit_gemm_hopper")
    assert tech.kind == "level" and tech.action.level == "explicit"
    assert tech in base.query(family="gemm", target="h200", kind="level", status="ready")
    bad = tmp_path / "bad.md"
    text = kb.load().get("explicit_gemm_hopper").path
    body = open(text).read().replace("level: explicit", "level: warp")
    bad.write_text(body.replace("id: explicit_gemm_hopper", "id: bad"))
    with pytest.raises(kb.KBError, match="'warp'.*explicit"):
        kb.load(str(tmp_path))


@pytest.mark.parametrize("backend", ["h200", "mi300x"])
def test_an_explicit_candidate_is_verified_lowered_and_cross_compiled(argus_config, backend):
    stages = _stages(argus_config, f"backend={backend}", "evaluate.correctness=off")
    policy = GEMM_EXPLICIT
    if backend == "mi300x":
        policy = Policy(
            {"BM": 128, "BN": 128, "BK": 64, "GROUP": 8}, {"level": "explicit", "lds_stages": 2}
        )
    res, artifacts = stages.evaluate(_cand(stages, policy), 0, None)
    assert res.ok, res.failure
    assert res.verify.status == "verified" and res.verify.assertions > 0
    assert res.compile.ok and res.compile.spills == 0 and res.compile.mma_count
    assert "gl.warp_specialize" in artifacts["lowered_gluon.py"] or backend == "mi300x"
    assert res.timing is not None and res.timing.estimated


def test_an_explicit_candidate_is_not_checked_in_the_interpreter(argus_config):
    stages = _stages(argus_config, "backend=h200")  # correctness auto, no GPU here
    res, _ = stages.evaluate(_cand(stages, GEMM_EXPLICIT), 0, None)
    assert res.verify.status == "verified" and res.compile.ok
    assert res.failure.startswith("static:") and "Triton interpreter" in res.failure
    # the interpreter has no explicit level at all: refused before anything runs
    interp = _stages(argus_config, "backend=interpret")
    res, _ = interp.evaluate(_cand(interp, GEMM_EXPLICIT), 0, None)
    assert res.failure.startswith("policy:") and "need a GPU target" in res.failure


@pytest.mark.slow
def test_search_proposes_explicit_candidates_end_to_end(run_argus):
    proc = run_argus(
        "+kernel=gemm", "backend=h200", "planner=search", "planner.options.mode=grid",
        "budget=3", "evaluate.correctness=off", "tracking=none",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [ln for ln in proc.stdout.splitlines() if ln.startswith("c0") and "level=explicit" in ln]
    assert len(rows) == 2 and all(ln.rstrip().endswith("ok") for ln in rows), proc.stdout


def test_attention_level_actions_build_the_two_consumer_kernel(argus_config):
    stages = Stages.from_config(
        argus_config("+kernel=attention", "tracking=none", "backend=h200"),
        Registry(default_plugin_manager()),
    )
    ctx = {
        "family": stages.family,
        "backend": stages.backend,
        "kernel_cfg": stages.cfg.kernel,
        "backend_cfg": stages.backend_cfg,
    }
    space = ActionSpace.from_ctx(ctx)
    moves = space.actions(space.start(), "explicit_attention_hopper")
    assert {p.tiles["STAGES"] for _, p in moves} == {2, 3}
    shape = dict(stages.cfg.kernel.shape)
    for _, policy in moves:
        kernel = stages.family.explicit_kernel(policy, "hopper-gluon", shape)
        assert [p.name for p in kernel.partitions] == ["softmax0", "softmax1", "load"]
        assert kernel.barrier("kv_empty").count == 2
    bad = Policy({"BM": 128}, {"level": "explicit", "consumers": 3})
    with pytest.raises(PolicyError, match="consumers.*1, 2"):
        stages.family.explicit_kernel(bad, "hopper-gluon", shape)
    lockstep = Policy({"BM": 128}, {"level": "explicit", "consumers": 1, "overlap": 1})
    with pytest.raises(PolicyError, match="overlap=1 needs consumers=2"):
        stages.family.explicit_kernel(lockstep, "hopper-gluon", shape)
    over = Policy({"BM": 128}, {"level": "explicit", "overlap": 1})
    assert stages.family.explicit_kernel(over, "hopper-gluon", shape).name == "attn_fwd_ws2o_causal"


def test_the_persistent_attention_is_built_for_non_causal_shapes_only(argus_config):
    stages = Stages.from_config(
        argus_config("+kernel=attention", "tracking=none", "backend=h200"),
        Registry(default_plugin_manager()),
    )
    shape = {**dict(stages.cfg.kernel.shape), "CAUSAL": 0}
    pers = Policy({"BM": 128, "BN": 128, "STAGES": 2}, {"level": "explicit", "persistent": 1})
    kernel = stages.family.explicit_kernel(pers, "hopper-gluon", shape)
    assert kernel.name == "attn_fwd_ws2_persistent" and "NH" in kernel.scalars
    q0 = next(b for b in kernel.shared if b.name == "q0_smem")
    assert kernel.barrier("q_empty").count == 2 and q0.stages == 2
    with pytest.raises(PolicyError, match="persistent=1 is the non-causal kernel"):
        stages.family.explicit_kernel(pers, "hopper-gluon", {**shape, "CAUSAL": 1})
    bad = Policy({"BM": 128}, {"level": "explicit", "persistent": 2})
    with pytest.raises(PolicyError, match="persistent.*0, 1"):
        stages.family.explicit_kernel(bad, "hopper-gluon", shape)


@pytest.mark.parametrize("causal", [0, 1])
def test_the_planner_offers_the_persistent_attention_where_it_builds_and_fits(argus_config, causal):
    """The KB entry's `when` keeps persistent=1 to non-causal shapes and, at D128, to two
    K/V stages (three exceed shared memory): every offered policy builds."""
    stages = Stages.from_config(
        argus_config(
            "+kernel=attention", "tracking=none", "backend=h200", f"kernel.shape.CAUSAL={causal}"
        ),
        Registry(default_plugin_manager()),
    )
    space = _space(stages)
    moves = space.actions(space.start(), "explicit_attention_hopper")
    shape = dict(stages.cfg.kernel.shape)
    pers = [p for _, p in moves if p.compiler.get("persistent") == 1]
    if causal:
        assert not pers and moves
    else:
        assert {p.tiles["STAGES"] for p in pers} == {2}
        assert {p.compiler.get("pingpong") for p in pers} == {0, 1}
    for _, policy in moves:
        kernel = stages.family.explicit_kernel(policy, "hopper-gluon", shape)
        assert kernel.name.endswith("_persistent") == (policy.compiler.get("persistent") == 1)


def _space(stages: Stages) -> ActionSpace:
    return ActionSpace.from_ctx(
        {
            "family": stages.family,
            "backend": stages.backend,
            "kernel_cfg": stages.cfg.kernel,
            "backend_cfg": stages.backend_cfg,
        }
    )


def test_moe_level_actions_build_the_grouped_gemm_and_verify_in_the_pipeline(argus_config):
    """The MoE family at the explicit level: the KB entry's actions are valid policies, and
    one candidate runs verify -> Gluon lowering -> sm_90 cross-compile in the stages."""
    stages = Stages.from_config(
        argus_config(
            "+kernel=moe", "tracking=none", "backend=h200", "evaluate.correctness=off",
            "evaluate.trials=1",
        ),
        Registry(default_plugin_manager()),
    )  # fmt: skip
    space = _space(stages)
    moves = space.actions(space.start(), "explicit_moe_hopper")
    assert moves and all(selects_explicit(p) for _, p in moves)
    policy = next(p for _, p in moves if p.tiles["BN"] == 256 and not p.compiler.get("fuse_silu"))
    assert space.valid(policy)
    fused = [p for _, p in moves if p.compiler.get("fuse_silu")]
    assert fused and all(p.tiles["BN"] == 128 for p in fused)  # BN=256 fused: over 128 regs
    res, artifacts = stages.evaluate(_cand(stages, policy), 0, None)
    assert res.ok, res.failure
    assert res.verify.status == "verified" and res.verify.assertions > 0
    assert res.compile.ok and res.compile.spills == 0 and res.compile.mma_count
    assert "gl.load(expert_ptr + off_m // BM)" in artifacts["lowered_gluon.py"]


def test_attention_on_mi300x_is_offered_and_cross_compiles(argus_config):
    stages = Stages.from_config(
        argus_config(
            "+kernel=attention", "tracking=none", "backend=mi300x", "evaluate.correctness=off",
            "evaluate.trials=1",
        ),
        Registry(default_plugin_manager()),
    )  # fmt: skip
    space = _space(stages)
    assert "explicit_attention_mi300x" in space.techniques
    assert "explicit_attention_hopper" not in space.techniques
    policy = Policy({"BM": 128, "BN": 32}, {"level": "explicit"})
    res, artifacts = stages.evaluate(_cand(stages, policy), 0, None)
    assert res.ok, res.failure
    assert res.compile.ok and res.compile.spills == 0 and res.compile.mma_count
    assert "cdna3.mfma(p, v_lds.load(" in artifacts["lowered_gluon.py"]
    with pytest.raises(PolicyError, match="no build options"):
        stages.family.explicit_kernel(
            Policy({}, {"level": "explicit", "consumers": 2}), "cdna3-gluon", {"D": 128}
        )


def test_synthesize_proves_an_explicit_candidate_against_its_reference(argus_config):
    """Issue #19 at the explicit level, in the stages: with `verifier.options.synthesize`
    the family's reference spec is attached to the explicit kernel and proved too."""
    plain = _stages(argus_config, "backend=h200", "evaluate.correctness=off")
    synth = _stages(
        argus_config,
        "backend=h200",
        "evaluate.correctness=off",
        "+verifier.options.synthesize=true",
    )
    a, _ = plain.evaluate(_cand(plain, GEMM_EXPLICIT), 0, None)
    b, _ = synth.evaluate(_cand(synth, GEMM_EXPLICIT), 0, None)
    assert a.verify.status == b.verify.status == "verified", b.verify.summary
    assert b.verify.assertions > a.verify.assertions  # the reference's reads, proved
