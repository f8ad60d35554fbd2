"""The planted-bug corpus at the explicit level (`planted.py`): every bug is caught with the
invariant it breaks and the program point it happens at; the shipped kernel has none."""

from __future__ import annotations

import pytest

from argus_plugins.kernels.attention.kernel_explicit import build as build_attention
from argus_plugins.kernels.attention.kernel_explicit import build_cdna3 as attention_cdna3
from argus_plugins.kernels.attention.kernel_explicit import build_persistent
from argus_plugins.kernels.gemm.kernel_explicit import build, build_cdna3
from argus_plugins.kernels.moe.kernel_explicit import build as build_moe
from argus_plugins.kernels.moe.kernel_explicit import build_cdna3 as moe_cdna3
from argus_plugins.verifiers.smt.explicit_ops import verify_explicit
from tests.plugins.dsl.explicit.planted import BUGS, kernel_for, mutate

KINDS = {b.kind for b in BUGS}


def test_corpus_size_and_coverage():
    assert len(BUGS) >= 15
    for kind in (
        "wrong-stage",
        "missing-wait",
        "wrong-phase",
        "fragment-tag",
        "shared-race",
        "wrong-swizzle",
        "producer-overrun",
        "duplicate-owner",
        "output-tag",
        "group-tag",
        "handshake-deadlock",
        "handshake-order",
        "output-overlap",
    ):
        assert kind in KINDS


@pytest.mark.parametrize(
    "kernel",
    [
        build(),
        build(8),
        build(4, 0),
        build(4, 1, 1).with_consts(NS=112),
        build(8, 1, 1).with_consts(BN=256, STAGES=3, NS=224),
        build_cdna3(),
        build_cdna3(1),
        build_attention(),
        build_attention(causal=True),
        build_attention(64, stages=3),
        build_attention(consumers=2),
        build_attention(causal=True, stages=3, consumers=2),
        build_attention(64, stages=4, consumers=2),
        build_attention(consumers=2, overlap=True),
        build_attention(64, causal=True, stages=3, consumers=2, overlap=True),
        build_attention(consumers=2, pingpong=True),
        build_attention(64, causal=True, stages=3, consumers=2, pingpong=True),
        build_attention(causal=True, consumers=2, overlap=True, pingpong=True),
        build_persistent(),
        build_persistent(64, stages=3),
        build_persistent(pingpong=True),
        attention_cdna3(),
        attention_cdna3(128, causal=True),
        attention_cdna3(64),
        build_moe(),
        build_moe(4, 0),
        build_moe(8, 1, fuse_silu=True),
        build_moe(4, 0, fuse_silu=True),
        moe_cdna3(),
    ],
    ids=lambda k: k.name,
)
def test_no_false_alarm_on_the_shipped_kernels(kernel):
    report = verify_explicit(kernel)
    assert report.status == "verified", report.counterexamples
    assert report.counterexamples == []


@pytest.mark.parametrize("bug", BUGS, ids=lambda b: b.name)
def test_planted_bug_is_caught_at_its_program_point(bug):
    report = verify_explicit(mutate(kernel_for(bug), bug))
    assert report.status == "violated"
    hits = [c for c in report.counterexamples if c["kind"] == bug.kind and c["point"] == bug.at]
    assert hits, [(c["kind"], c["point"]) for c in report.counterexamples]


def test_phase_counterexample_names_iteration_stage_and_phase():
    bug = next(b for b in BUGS if b.name == "consumer-phase-constant")
    cex = next(
        c
        for c in verify_explicit(mutate(build(), bug)).counterexamples
        if c["kind"] == "wrong-phase"
    )
    i = cex["iteration"]
    assert cex["stage"] == i % 4
    assert cex["phase"] == 0 and cex["expected_phase"] == (i // 4) % 2 == 1


def test_swizzle_counterexample_names_an_element_at_two_addresses():
    bug = next(b for b in BUGS if b.name == "ring-swizzle-64")
    cex = next(
        c
        for c in verify_explicit(mutate(build(), bug)).counterexamples
        if c["kind"] == "wrong-swizzle"
    )
    row, col = cex["element"]
    plain = row * 128 + col * 2  # a 64-wide bf16 row is 128 bytes
    assert cex["address"] == plain ^ (((plain >> 7) & 7) << 4)
    assert cex["other_address"] == plain ^ (((plain >> 7) & 3) << 4)
    assert cex["address"] != cex["other_address"]


def test_output_ownership_rests_on_the_kernels_stated_shape_precondition():
    """The persistent attention stores O of head h's query block m at rows h * S + m * BM
    of the flattened [B*H*S, D] tensor: with S not a multiple of BM a head's last block
    spills into the next head's rows, which the launcher refuses (`k.require`). Without the
    stated precondition the verifier finds the two tiles writing one row."""
    from dataclasses import replace

    kernel = build_persistent()
    assert verify_explicit(kernel).status == "verified"
    bare = replace(kernel, meta={k: v for k, v in kernel.meta.items() if k != "requires"})
    report = verify_explicit(bare)
    hits = [c for c in report.counterexamples if c["kind"] == "output-overlap"]
    assert hits and hits[0]["message"].startswith("o[")
    v = hits[0]["values"]
    assert v["S"] % 128 != 0 and v["tile_1"] != v["tile_2"]


def test_an_ownership_obligation_z3_leaves_open_makes_the_report_unknown(monkeypatch):
    """A timeout is not a proof: with z3's budget cut to a few milliseconds the GEMM's
    ownership query (its grouped tile order takes z3 ~0.1 s) is undecided, and the report
    says so instead of `verified`."""
    from argus_plugins.verifiers.smt import explicit_ops

    monkeypatch.setattr(explicit_ops, "_load_factor", lambda: 0.005)
    report = verify_explicit(build())
    assert report.status == "unknown", report.summary
    assert "z3 timed out on output ownership of mma/tile/" in report.summary
    assert report.counterexamples == []


@pytest.mark.parametrize("make", [build, build_cdna3], ids=["hopper", "cdna3"])
def test_every_obligation_z3_leaves_open_makes_the_report_unknown(monkeypatch, make):
    """Not only ownership: a stage, phase, fragment or swizzle query z3 cannot decide (here
    every one, twice: the first budget and the five-times-longer retry) is named in the
    report, which says `unknown`: not `verified` with nothing proved, and not `violated`
    on a case z3 never decided."""
    import z3

    from argus_plugins.verifiers.smt import explicit_ops

    calls = []

    def undecided(solver):
        calls.append(solver)
        return z3.unknown

    monkeypatch.setattr(explicit_ops, "_z3_check", undecided)
    report = verify_explicit(make())
    assert report.status == "unknown", report.summary
    assert report.counterexamples == []
    assert "z3 timed out on" in report.summary and "more" in report.summary
    # each query retried once before it is left open; no case split taken on an open one
    # (the Hopper GEMM's "which iteration's stage is released" would report a race)
    assert len(calls) >= 10 and len(calls) % 2 == 0


def test_grid_ownership_rests_on_the_stated_grid():
    """The 2-D grid attention stores O of query block pid of head pid_y at rows
    pid_y * S + pid * BM: disjoint because the grid stops at pid < S / BM
    (`Kernel.programs`). Stated as unbounded, block S / BM of one head is block 0 of the
    next, and the verifier names the two CTAs."""
    from dataclasses import replace

    kernel = build_attention()
    assert kernel.meta["programs"][1] is None
    assert verify_explicit(kernel).status == "verified"
    unbounded = replace(kernel, meta={**kernel.meta, "programs": (None, None)})
    hits = [c for c in verify_explicit(unbounded).counterexamples if c["kind"] == "output-overlap"]
    assert hits and hits[0]["point"] == "softmax/7:TmaStore", hits
    v = hits[0]["values"]
    blocks = v["S"] // 128
    first, second = (v["pid_1"], v["pid_y_1"]), (v["pid_2"], v["pid_y_2"])
    assert first != second and max(v["pid_1"], v["pid_2"]) >= blocks
    assert "written by program (pid=" in hits[0]["message"]
