"""Issue #19 at the explicit level: the reference's spec, bound to each shipped explicit
kernel by its family (`explicit_spec`) and attached as ghost data, is proved by the SMT
verifier (`plugins/verifiers/smt/explicit_spec.py`); data-flow bugs whose producer and
consumers agree with each other (so the implied thread-level invariants pass) are caught
against the reference, naming the stored element, the element read and the one expected;
the planted choreography corpus is still caught with the spec attached."""

from __future__ import annotations

from dataclasses import replace

import pytest

from argus_core.ir import explicit as x
from argus_core.ir.expr import Sym
from argus_core.plugin_manager import Registry, default_plugin_manager
from argus_core.spec.explicit import attach, attached
from argus_plugins.kernels.attention.kernel_explicit import build as build_attention
from argus_plugins.kernels.attention.kernel_explicit import build_cdna3 as attention_cdna3
from argus_plugins.kernels.gemm.kernel_explicit import build, build_cdna3
from argus_plugins.kernels.moe.kernel_explicit import build as build_moe
from argus_plugins.kernels.moe.kernel_explicit import build_cdna3 as moe_cdna3
from argus_plugins.verifiers.smt.explicit_ops import verify_explicit
from argus_plugins.verifiers.smt.explicit_spec import verify
from tests.plugins.dsl.explicit.planted import BUGS, kernel_for, mutate

REGISTRY = Registry(default_plugin_manager())
pid_y, j = Sym("pid_y", "pid", 0), Sym("j", "loop", 0)
H, HKV, S, SKV = (Sym(n, "shape", 1) for n in ("H", "HKV", "S", "SKV"))
BN, BK, N, K = Sym("BN", "const", 1), Sym("BK", "const", 1), Sym("N", "shape"), Sym("K", "shape")
kk, off_n, expert = Sym("kk", "loop", 0), Sym("off_n", "scalar"), Sym("expert", "scalar")
KV_ROW = (pid_y // H * HKV + pid_y % H // (H // HKV)) * SKV


def with_spec(kernel: x.ExplicitKernel) -> x.ExplicitKernel:
    family = REGISTRY.get("kernel", kernel.family)
    return attach(kernel, family.explicit_spec(kernel, dict(kernel.consts)))


SHIPPED = [
    build(),
    build(8),
    build(4, 0),
    build_cdna3(),
    build_attention(),
    build_attention(causal=True),
    build_attention(64, stages=3),
    build_attention(causal=True, stages=3, consumers=2),
    build_attention(consumers=2, overlap=True),
    build_attention(64, causal=True, stages=3, consumers=2, pingpong=True),
    build_attention(causal=True, consumers=2, overlap=True, pingpong=True),
    attention_cdna3(),
    attention_cdna3(128, causal=True),
    build_moe(),
    build_moe(4, 0),
    build_moe(8, 1, fuse_silu=True),
    build_moe().with_consts(BM=64),
    moe_cdna3(),
]


@pytest.mark.parametrize("kernel", SHIPPED, ids=lambda k: f"{k.name}-{k.consts.get('BM')}")
def test_shipped_explicit_kernels_are_proved_against_their_reference(kernel):
    alone = verify_explicit(kernel)
    report = verify(with_spec(kernel))
    assert report.status == "verified", report.counterexamples
    assert report.assertions > alone.assertions  # the spec's obligations were proved too
    assert attached(with_spec(kernel)).spec.outputs  # ghost data, on a copy
    assert attached(kernel) is None


def _gqa_mod(kernel, point):  # key/value head h % HKV instead of h // (H / HKV)
    return x.replace_op(kernel, point, x.Let("kv_row", (pid_y // H * HKV + pid_y % H % HKV) * SKV))


def _batch_stride(kernel, point):  # the batch's K/V rows strided by H heads, not HKV
    return x.replace_op(
        kernel, point, x.Let("kv_row", (pid_y // H * H + pid_y % H // (H // HKV)) * SKV)
    )


def _head_stride_s(kernel, point):  # a K/V head strided by the query length S
    return x.replace_op(
        kernel, point, x.Let("kv_row", (pid_y // H * HKV + pid_y % H // (H // HKV)) * S)
    )


def _expert_stride_k(kernel, point):  # expert e's weights at rows e * K
    op = next(o for _, o in kernel.ops() if o.point == point)
    return x.replace_op(kernel, point, replace(op, coords=(expert * K + off_n, op.coords[1])))


# (name, base kernel, mutation, point mutated, the store the counterexample names)
SPEC_BUGS = [
    ("gqa-kv-head-mod", lambda: build_attention(), _gqa_mod, "load/1:Let", "softmax/7:TmaStore"),
    (
        "gqa-kv-head-mod-2o",
        lambda: build_attention(causal=True, consumers=2, overlap=True),
        _gqa_mod,
        "load/1:Let",
        "softmax0/12:TmaStore",
    ),
    ("gqa-kv-head-mod-cdna3", lambda: attention_cdna3(128, True), _gqa_mod, "main/1:Let", "main/8:StoreTile"),
    ("kv-batch-stride-h", lambda: build_attention(), _batch_stride, "load/1:Let", "softmax/7:TmaStore"),
    ("kv-head-stride-s", lambda: build_attention(), _head_stride_s, "load/1:Let", "softmax/7:TmaStore"),
    (
        "moe-expert-stride-k",
        lambda: build_moe(),
        _expert_stride_k,
        "load/tile/kk/3:TmaLoad",
        "mma/tile/12:TmaStore",
    ),
    ("moe-expert-stride-k-cdna3", moe_cdna3, _expert_stride_k, "main/tile/kk/1:LoadTile", "main/tile/8:StoreTile"),
]  # fmt: skip


@pytest.mark.parametrize("bug", SPEC_BUGS, ids=lambda b: b[0])
def test_data_flow_bugs_the_implied_invariants_miss_are_caught_against_the_reference(bug):
    _, base, mutation, point, store = bug
    kernel = mutation(base(), point)
    assert verify_explicit(kernel).status == "verified"  # consistent with itself
    report = verify(with_spec(kernel))
    assert report.status == "violated"
    hits = [c for c in report.counterexamples if c["kind"] == "spec-read"]
    assert hits and {c["point"] for c in hits} >= {store}, report.counterexamples
    cex = hits[0]
    assert cex["output"] and cex["read"] and cex["load"] and cex["mma"]
    assert "its reference reads" in cex["message"]


def test_gqa_counterexample_names_a_query_head_whose_kv_head_is_wrong():
    kernel = _gqa_mod(build_attention(), "load/1:Let")
    cex = next(c for c in verify(with_spec(kernel)).counterexamples if c["kind"] == "spec-read")
    v = cex["values"]
    h, group = v["pid_y"] % v["H"], v["H"] // v["HKV"]
    assert h // group != h % v["HKV"]  # the heads the reference and the kernel read differ
    row = cex["read"][0]
    assert row // v["SKV"] % v["HKV"] == h % v["HKV"]  # the kernel read head h % HKV's rows


@pytest.mark.parametrize("bug", BUGS, ids=lambda b: b.name)
def test_planted_choreography_bugs_are_still_caught_with_the_spec_attached(bug):
    kernel = mutate(kernel_for(bug), bug)
    report = verify(with_spec(kernel))
    assert report.status == "violated"
    hits = [c for c in report.counterexamples if c["kind"] == bug.kind and c["point"] == bug.at]
    assert hits, [(c["kind"], c["point"]) for c in report.counterexamples]
