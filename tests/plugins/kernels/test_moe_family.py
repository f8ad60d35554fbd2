"""The MoE family: routing, block alignment and its checker, reference, counts, tolerances."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import yaml

from argus_core.errors import ConfigError
from argus_core.evaluate.outputs import compare
from argus_plugins.kernels.moe import MoEFamily
from argus_plugins.kernels.moe.family import (
    CHECK_SHAPES,
    PRESETS,
    expected_blocks,
    experts_hit,
    moe_dims,
)
from argus_plugins.kernels.moe.routing import align_blocks, check_alignment, padded_capacity, route

CONF = Path(__file__).parents[3] / "conf" / "kernel"


def shape(t=7, e=4, topk=2, h=16, i=24, renorm=1) -> dict[str, int]:
    return {"T": t, "E": e, "TOPK": topk, "H": h, "I": i, "RENORM": renorm}


def dense_float64(x: dict) -> torch.Tensor:
    """Every token through every expert in float64, combined by a one-hot routing matrix
    built from float64 softmax and argsort (independent of `route` and the expert loop)."""
    logits = x["router_logits"].double()
    probs = torch.softmax(logits, -1)
    ids = torch.argsort(logits, dim=-1, descending=True)[:, : x["topk"]]
    w = probs.gather(-1, ids)
    if x["renorm"]:
        w = w / w.sum(-1, keepdim=True)
    routing = torch.zeros_like(probs).scatter(-1, ids, w)  # [T, E]
    xs, w1, w2 = x["x"].double(), x["w1"].double(), x["w2"].double()
    inter = w2.shape[-1]
    gate = torch.einsum("th,eih->eti", xs, w1[:, :inter])
    up = torch.einsum("th,eih->eti", xs, w1[:, inter:])
    y = torch.einsum("eti,ehi->eth", F.silu(gate) * up, w2)  # [E, T, H]
    return torch.einsum("te,eth->th", routing, y)


def blocked_kernel(x: dict, block_m: int = 16, bug: str | None = None) -> torch.Tensor:
    """What the fused kernels compute, in PyTorch: route, align into blocks, per block the
    grouped GEMMs with the intermediate rounded to the input dtype, each slot's weighted
    result rounded too, then summed per token. `bug` plants a known mistake: "slot" (the
    weight of the token's other slot), "pad" (a padding row's result added to the last
    slot), "scatter" (each token's sum written to the next token's row)."""
    xs, w1, w2, dt = x["x"], x["w1"], x["w2"], x["x"].dtype
    inter = w2.shape[-1]
    ids, w = route(x["router_logits"], x["topk"], bool(x["renorm"]))
    t, k = ids.shape
    if bug == "slot":
        w = w.flip(-1)
    sorted_ids, block_expert, _ = align_blocks(ids, w1.shape[0], block_m)
    per_slot = torch.zeros(t * k + 1, xs.shape[1])  # the last row catches padding
    w_row = torch.cat([w.flatten(), torch.ones(1)])
    for b, e in enumerate(block_expert.tolist()):
        rows = sorted_ids[b * block_m : (b + 1) * block_m].long()
        xe = xs[torch.clamp(rows // k, max=t - 1)].float()
        h = (F.silu(xe @ w1[e, :inter].float().T) * (xe @ w1[e, inter:].float().T)).to(dt)
        per_slot[rows] = ((h.float() @ w2[e].float().T) * w_row[rows][:, None]).to(dt).float()
    if bug == "pad":
        per_slot[t * k - 1] += per_slot[t * k]
    out = per_slot[: t * k].view(t, k, -1).sum(1)
    return (out.roll(1, 0) if bug == "scatter" else out).to(dt)


# --------------------------------------------------------------------------- routing


def test_route_is_softmax_top_k_by_descending_weight():
    logits = torch.tensor([[0.1, 2.0, -1.0, 1.0], [3.0, 0.0, 0.5, 0.2]])
    ids, w = route(logits, 2, renorm=False)
    assert ids.dtype == torch.int32 and w.dtype == torch.float32
    assert ids.tolist() == [[1, 3], [0, 2]]
    probs = torch.softmax(logits, -1)
    assert torch.allclose(w, torch.stack([probs[0, [1, 3]], probs[1, [0, 2]]]))
    ids_r, w_r = route(logits, 2, renorm=True)
    assert torch.equal(ids_r, ids) and torch.allclose(w_r.sum(-1), torch.ones(2))
    assert torch.allclose(w_r, w / w.sum(-1, keepdim=True))


def test_route_breaks_ties_towards_the_lower_expert():
    ids, w = route(torch.tensor([[1.0, 5.0, 5.0, 5.0, 0.0]]), 2, renorm=True)
    assert ids.tolist() == [[1, 2]] and torch.allclose(w, torch.tensor([[0.5, 0.5]]))


def test_route_rejects_topk_outside_one_to_e():
    with pytest.raises(ConfigError, match="topk 5; must be in \\[1, E=4\\]"):
        route(torch.zeros(2, 4), 5, renorm=False)


# --------------------------------------------------------------------------- alignment

EXAMPLE = torch.tensor([[0, 2], [2, 1], [0, 2]], dtype=torch.int32)  # T=3, topk=2, E=4


def test_align_blocks_by_hand():
    sorted_ids, block_expert, total = align_blocks(EXAMPLE, num_experts=4, block_m=2)
    # expert 0: slots 0, 4; expert 1: slot 3 + pad; expert 2: slots 1, 2, 5 + pad; expert 3: none
    assert sorted_ids.tolist() == [0, 4, 3, 6, 1, 2, 5, 6]
    assert block_expert.tolist() == [0, 1, 2, 2]
    assert total == 8 and sorted_ids.dtype == block_expert.dtype == torch.int32
    assert check_alignment(sorted_ids, block_expert, EXAMPLE, 2) == []


@pytest.mark.parametrize("block_m", [1, 4, 16, 64])
@pytest.mark.parametrize("t,e,topk", [(37, 8, 2), (5, 16, 4), (3, 64, 6), (300, 128, 8)])
def test_align_blocks_passes_its_checker_within_capacity(t, e, topk, block_m):
    gen = torch.Generator().manual_seed(t * block_m)
    ids, _ = route(torch.randn(t, e, generator=gen), topk, renorm=False)
    sorted_ids, block_expert, total = align_blocks(ids, e, block_m)
    assert check_alignment(sorted_ids, block_expert, ids, block_m) == []
    assert total == sorted_ids.numel() == block_expert.numel() * block_m
    assert total <= padded_capacity(t * topk, e, block_m)


def test_capacity_is_reached_when_every_expert_gets_one_slot():
    ids = torch.arange(8, dtype=torch.int32).view(4, 2)  # 8 experts, one slot each
    assert align_blocks(ids, 8, 16)[2] == padded_capacity(8, 8, 16) == 8 * 16


def test_align_blocks_rejects_an_unknown_expert():
    with pytest.raises(ConfigError, match="expert id 4 in topk_ids; valid: 0..3"):
        align_blocks(EXAMPLE + 2, num_experts=4, block_m=2)


def corrupt(rows: list[int], blocks: list[int] | None = None) -> list[str]:
    """check_alignment of the hand example with sorted_ids (and block_expert) replaced."""
    sorted_ids = torch.tensor(rows, dtype=torch.int32)
    block_expert = torch.tensor(blocks or [0, 1, 2, 2], dtype=torch.int32)
    return check_alignment(sorted_ids, block_expert, EXAMPLE, 2)


def test_checker_reports_a_row_moved_to_another_experts_block():
    # rows 1 and 4 swapped: slot 4 (expert 0) now in block 2 (expert 2) and slot 1 in block 0
    problems = corrupt([0, 1, 3, 6, 4, 2, 5, 6])
    assert sorted(problems) == [
        "row 1 of block 0 (expert 0) holds slot 1 (token 0, choice 1) routed to expert 2",
        "row 4 of block 2 (expert 2) holds slot 4 (token 2, choice 0) routed to expert 0",
    ]


def test_checker_reports_a_duplicated_slot():
    problems = corrupt([0, 4, 3, 6, 2, 2, 5, 6])  # slot 1 overwritten by slot 2
    assert problems == [
        "slot 2 (token 1, choice 0) appears 2 times, at rows [4, 5]",
        "slot 1 (token 0, choice 1) appears in no row",
    ]


def test_checker_reports_padding_in_the_middle_of_an_experts_blocks():
    problems = corrupt([0, 4, 3, 6, 6, 2, 5, 1])  # expert 2's padding moved to its first row
    assert problems == [
        "padding row 4 precedes real row 7 among expert 2's blocks; padding may only follow "
        "an expert's real rows"
    ]


def test_checker_reports_bad_values_sizes_and_padding_blocks():
    assert (
        "holds 9: neither a slot in [0, 6) nor the padding sentinel 6"
        in corrupt([0, 4, 3, 9, 1, 2, 5, 6])[0]
    )
    assert corrupt([0, 4, 3, 6, 1, 2, 5]) == ["sorted_ids has 7 rows; 4 blocks of block_m 2 need 8"]
    extra = corrupt([0, 4, 3, 6, 1, 2, 5, 6, 6, 6], [0, 1, 2, 2, 1])
    assert extra == [
        "expert 1 has 3 padding rows; at most block_m - 1 = 1 "
        "(a block of padding only is wasted work)"
    ]


def test_checker_lists_five_instances_then_counts():
    ids = torch.zeros(20, 1, dtype=torch.int32)  # 20 tokens, all routed to expert 0
    sorted_ids, _, _ = align_blocks(ids, 2, 4)
    problems = check_alignment(sorted_ids, torch.ones(5, dtype=torch.int32), ids, 4)
    assert len(problems) == 6 and problems[-1] == "... and 15 more rows in another expert's block"


# --------------------------------------------------------------------------- family


def test_identity():
    f = MoEFamily()
    assert (f.name, f.entry, f.outputs) == ("moe", "moe", ("out",))


@pytest.mark.parametrize("dtype,tdt", [("bf16", torch.bfloat16), ("fp16", torch.float16)])
def test_inputs_have_shapes_dtypes_scalars_and_no_zeros(dtype, tdt):
    x = MoEFamily().make_inputs(shape(t=7, e=4, topk=3, h=16, i=24, renorm=0), dtype, 0, "cpu")
    assert x["x"].shape == x["out"].shape == (7, 16)
    assert x["router_logits"].shape == (7, 4) and x["router_logits"].dtype == torch.float32
    assert x["w1"].shape == (4, 48, 16) and x["w2"].shape == (4, 16, 24)
    assert {x[n].dtype for n in ("x", "w1", "w2", "out")} == {tdt}
    assert all(bool((x[n] != 0).all()) for n in ("x", "router_logits", "w1", "w2"))
    assert (x["topk"], x["renorm"]) == (3, 0)


def test_inputs_are_reproducible_per_seed_and_fresh_across_seeds():
    f = MoEFamily()
    x0, x0b, x1 = (f.make_inputs(shape(), "bf16", s, "cpu") for s in (5, 5, 6))
    assert all(torch.equal(x0[n], x0b[n]) for n in ("x", "router_logits", "w1", "w2"))
    assert not torch.equal(x0["w2"], x1["w2"])


@pytest.mark.parametrize("sh", [*CHECK_SHAPES, shape(t=1, e=8, topk=8, renorm=0)])
def test_reference_matches_dense_one_hot_float64(sh):
    f = MoEFamily()
    x = f.make_inputs(sh, "fp16", 3, "cpu")
    ref = f.reference(x)["out"]
    assert ref.dtype == torch.float16 and ref.shape == (sh["T"], sh["H"])
    assert torch.allclose(ref.double(), dense_float64(x), atol=2e-3, rtol=2e-3)


def test_outputs_are_order_one():
    f = MoEFamily()
    out = f.reference(f.make_inputs(CHECK_SHAPES[0], "fp16", 0, "cpu"))["out"]
    assert 0.4 < float(out.float().std()) < 1.5


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("sh", CHECK_SHAPES, ids=lambda s: f"T{s['T']}-E{s['E']}")
def test_tolerance_passes_a_blocked_kernel_and_fails_planted_bugs(dtype, sh):
    f = MoEFamily()
    x = f.make_inputs(sh, dtype, 4, "cpu")
    ref = f.reference(x)["out"]
    atol, rtol = f.tolerance(dtype)
    assert compare(blocked_kernel(x, 16), ref, atol, rtol)[0]
    assert compare(blocked_kernel(x, 64), ref, atol, rtol)[0]
    for bug in ("slot", "pad", "scatter"):
        ok, max_abs, _, _ = compare(blocked_kernel(x, 16, bug), ref, atol, rtol)
        assert not ok and max_abs > 5 * atol, bug


def test_flops_and_bytes_by_hand():
    f = MoEFamily()
    one = shape(t=1, e=8, topk=2, h=16, i=24)
    assert f.flops(one) == 2 * 1 * 2 * (16 * 48 + 24 * 16)
    # one token hits exactly its 2 experts: their weights, then x, out, logits
    assert experts_hit(1, 8, 2) == pytest.approx(2.0)
    assert f.bytes(one, "bf16") == pytest.approx(2 * 3 * 16 * 24 * 2 + 2 * 16 * 2 + 8 * 4)
    assert f.bytes(one, "fp16") == f.bytes(one, "bf16")
    # prefill hits every expert (to within rounding)
    assert experts_hit(4096, 8, 2) == pytest.approx(8.0)


def test_decode_is_weight_streaming_bound():
    f = MoEFamily()
    for name, sh in PRESETS.items():
        hit = experts_hit(sh["T"], sh["E"], sh["TOPK"])
        assert hit <= min(sh["E"], sh["T"] * sh["TOPK"]) + 1e-9, name
        weights = hit * 3 * sh["H"] * sh["I"] * 2
        if sh["T"] <= 64:
            assert weights / f.bytes(sh, "bf16") > 0.99, name


@pytest.mark.parametrize(
    "bad,match",
    [
        ({"TOPK": 5}, "TOPK 5; must be <= E \\(4\\)"),
        ({"RENORM": 2}, "RENORM 2; valid choices: 0, 1"),
        ({"I": 0}, "I 0; must be >= 1"),
    ],
)
def test_bad_shapes_are_named(bad, match):
    with pytest.raises(ConfigError, match=match):
        moe_dims({**shape(), **bad})
    with pytest.raises(ConfigError, match="lacks \\['RENORM'\\]"):
        MoEFamily().flops({k: v for k, v in shape().items() if k != "RENORM"})


def test_dtype_choices():
    with pytest.raises(ConfigError, match="moe dtype 'fp32'; valid choices: bf16, fp16"):
        MoEFamily().tolerance("fp32")


def test_yaml_draft_agrees_with_the_module():
    path = CONF / "moe.yaml" if (CONF / "moe.yaml").exists() else CONF / "moe.yaml.draft"
    cfg = yaml.safe_load(path.read_text())
    assert cfg["name"] == "moe" and cfg["shape"] == PRESETS["mixtral-prefill"]
    assert cfg["check_shapes"] == CHECK_SHAPES and cfg["options"]["presets"] == PRESETS
    assert set(PRESETS) >= {"mixtral-decode1", "deepseek-v2-lite-prefill", "qwen3-30b-a3b-decode64"}


def test_source_reads_the_kernel_file(tmp_path):
    (tmp_path / "kernel.py").write_text("def moe(): ...\n")
    assert MoEFamily(tmp_path / "kernel.py").source() == "def moe(): ...\n"
    with pytest.raises(FileNotFoundError, match="missing.py"):
        MoEFamily(tmp_path / "missing.py").source()
    assert MoEFamily().source_path.parent.name == "moe"


def test_expected_blocks_follow_the_binomial_slot_count():
    """E[ceil(c / BM)] for c ~ Binomial(T, p): exact on a small case, and the blocks the
    alignment gives a real routing at Mixtral decode T64 (8 experts, top 2)."""
    # T=3, p=1/2, BM=2: c = 0..3 with probability 1/8, 3/8, 3/8, 1/8 -> 0, 1, 1, 2 blocks
    assert expected_blocks(3, 0.5, 2) == pytest.approx(1.0)
    assert expected_blocks(4, 1.0, 3) == 2 and expected_blocks(4, 0.0, 3) == 0
    # a random routing of 64 tokens: the blocks the alignment makes, against the expectation
    gen = torch.Generator().manual_seed(0)
    ids, _ = route(torch.randn(64, 8, generator=gen), 2, True)
    counts = torch.bincount(ids.flatten().long(), minlength=8)
    blocks16 = int(((counts + 15) // 16).sum())
    assert blocks16 > 8  # some experts need two 16-row blocks: the mean count (16) hides it
    assert abs(8 * expected_blocks(64, 2 / 8, 16) - blocks16) <= 2
    assert 8 * expected_blocks(64, 2 / 8, 64) == pytest.approx(8.0, abs=1e-6)
    fam = MoEFamily()
    shape = {"T": 64, "E": 8, "TOPK": 2, "H": 4096, "I": 14336, "RENORM": 1}
    rows16 = fam.gemm_problems(shape, {"BM": 16})[0]["M"]
    assert rows16 > 128 and rows16 % 16 == 0  # more than the 128 slots: padding blocks
    assert fam.gemm_problems(shape, {"BM": 64})[0]["M"] == 512
