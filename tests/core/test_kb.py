"""The knowledge base: the shipped entries load and cover the required topics, queries
filter by family/target/kind/shape, and every kind of malformed entry is an error that
names its file and field."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

import argus_conf
from argus_core import kb
from argus_core.kb import KBError, Vocabulary
from argus_plugins.backends.hopper.backend import POLICY_SPACE as HOPPER_SPACE
from argus_plugins.backends.mi300x.backend import POLICY_SPACE as MI300X_SPACE

REQUIRED_TOPICS = {
    "tile_shape": "tile shape selection",
    "warps": "warp count selection",
    "program_order": "grouped/swizzled program ordering",
    "pipelining": "software pipelining depth",
    "split_k": "split-K",
    "stream_k": "stream-K",
    "persistent": "persistent kernels",
    "bank_conflicts": "shared-memory padding and XOR swizzles",
    "vectorization": "vectorized 16-byte loads",
    "mfma": "MFMA 16x16 vs 32x32",
    "kpack": "kpack",
    "occupancy": "waves_per_eu against VGPR pressure",
    "buffer_loads": "buffer loads",
    "scheduling": "instruction-scheduling hints",
    "tma": "TMA on Hopper",
    "warp_specialization": "warp specialization on Hopper",
    "causal": "FA causal block skipping",
    "softmax": "exp2 with folded scale",
    "gqa": "GQA head packing",
    "moe_alignment": "MoE token sorting / alignment block size",
    "fusion": "fused gate-up with SiLU",
    "weight_streaming": "decode-time expert weight streaming",
}
REQUIRED_IDS = {
    "split_k",
    "stream_k",
    "persistent_grid",
    "smem_padding",
    "smem_xor_swizzle",
    "mfma_instr_nonkdim",
    "kpack",
    "waves_per_eu",
    "buffer_loads",
    "sched_hints_mi300x",
    "tma_loads",
    "warp_specialization",
    "causal_block_skip",
    "exp2_folded_scale",
    "gqa_head_packing",
    "fused_gate_up_silu",
    "moe_decode_weight_streaming",
}


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return Vocabulary.discover()


@pytest.fixture(scope="module")
def shipped(vocab: Vocabulary) -> kb.KnowledgeBase:
    return kb.load(vocab=vocab)


# ------------------------------------------------------------------- the shipped KB


def test_shipped_kb_has_at_least_25_entries_covering_every_required_topic(shipped):
    assert len(shipped) >= 25
    assert REQUIRED_IDS <= set(shipped.ids())
    missing = {t: what for t, what in REQUIRED_TOPICS.items() if not shipped.query(topic=t)}
    assert not missing, f"topics without an entry: {missing}"


def test_every_entry_has_prose_references_and_its_own_file(shipped):
    for t in shipped:
        assert Path(t.path).stem == t.id
        assert len(t.body) > 400, f"{t.id}: prose too short"
        for section in ("What it does", "How to apply it in Argus", "Evidence", "When it hurts"):
            assert section in t.body, f"{t.id}: no '{section}' section"
        assert t.references and all(r.title for r in t.references)
        assert all(r.url is None or r.url.startswith("https://") for r in t.references)


def test_default_path_is_the_repo_kb_and_env_overrides_it(tmp_path, monkeypatch, vocab):
    assert kb.default_paths() == [Path(kb.__file__).resolve().parent.parent / "kb"]
    write(tmp_path, "only_one", entry("only_one"))
    monkeypatch.setenv("ARGUS_KB_PATH", str(tmp_path))
    assert kb.load(vocab=vocab).ids() == ["only_one"]


def test_policy_actions_name_options_of_the_backends_and_tiles_of_the_kernel_configs(shipped):
    """Independent of the loader's own vocabulary: the backends' POLICY_SPACE and
    `conf/kernel/*.yaml` read directly."""
    spaces = {"mi300x": MI300X_SPACE, "hopper": HOPPER_SPACE}
    conf = Path(argus_conf.__file__).parent / "kernel"
    tiles = {f: set(yaml.safe_load((conf / f"{f}.yaml").read_text())["tiles"]) for f in kb.FAMILIES}
    policies = shipped.query(kind="policy")
    assert len(policies) >= 10
    for t in policies:
        targets = kb.TARGETS if "any" in t.targets else t.targets
        families = kb.FAMILIES if "any" in t.families else t.families
        for opt, values in t.action.compiler.items():
            for target in targets:
                assert opt in spaces[target], f"{t.id}: {opt} not in {target}'s POLICY_SPACE"
                assert set(values) <= set(spaces[target][opt]), f"{t.id}: {opt}={values}"
        for name in t.action.tiles:
            for fam in families:
                assert name in tiles[fam], f"{t.id}: {name} is not a tile of {fam}"
        assert t.action.tiles or t.action.compiler


# ------------------------------------------------------------------------- queries


def test_query_by_family_and_target(shipped):
    gemm_hopper = {t.id for t in shipped.query(family="gemm", target="hopper")}
    assert {"split_k", "grouped_ordering", "large_tile_hopper", "tma_loads"} <= gemm_hopper
    assert not {"mfma_instr_nonkdim", "kpack", "waves_per_eu", "large_tile_mi300x"} & gemm_hopper
    assert not {"causal_block_skip", "moe_block_m_small"} & gemm_hopper
    # a backend name resolves to its target
    assert {t.id for t in shipped.query(family="gemm", target="h200")} == gemm_hopper


def test_mi300x_only_techniques_never_reach_hopper(shipped):
    for tid in ("mfma_instr_nonkdim", "kpack", "waves_per_eu", "buffer_loads"):
        assert shipped.get(tid).targets == ("mi300x",)
        for fam in kb.FAMILIES:
            on_hopper = [t.id for t in shipped.query(family=fam, target="hopper")]
            assert tid not in on_hopper
    assert "mfma_instr_nonkdim" in [
        t.id for t in shipped.query(family="attention", target="mi300x")
    ]
    # the interpreter has no target-specific options: only `any` techniques
    assert all(t.targets == ("any",) for t in shipped.query(target="interpret"))


def test_query_by_kind_and_by_shape(shipped):
    rewrites = shipped.query(family="gemm", kind="rewrite")
    assert "split_k" in [t.id for t in rewrites]
    assert all(t.kind == "rewrite" for t in rewrites)
    assert shipped.get("split_k").action.params == {"splits": [2, 4, 8]}
    skinny = {"M": 16, "N": 14336, "K": 4096}
    square = {"M": 4096, "N": 4096, "K": 4096}
    ids_skinny = {t.id for t in shipped.query(family="gemm", shape=skinny)}
    ids_square = {t.id for t in shipped.query(family="gemm", shape=square)}
    assert "split_k" in ids_skinny and "split_k" not in ids_square
    assert "large_tile_hopper" in ids_square and "large_tile_hopper" not in ids_skinny
    decode = {"T": 16, "E": 8, "TOPK": 2, "H": 4096, "I": 14336}
    prefill = {**decode, "T": 4096}
    assert "moe_decode_weight_streaming" in {t.id for t in shipped.query("moe", shape=decode)}
    assert "moe_decode_weight_streaming" not in {t.id for t in shipped.query("moe", shape=prefill)}
    assert "moe_block_m_large" in {t.id for t in shipped.query("moe", shape=prefill)}


def test_query_and_get_reject_unknown_names(shipped):
    for kwargs, word in (
        ({"family": "conv"}, "gemm"),
        ({"target": "a100"}, "mi300x"),
        ({"kind": "magic"}, "policy"),
    ):
        with pytest.raises(KBError, match=word):
            shipped.query(**kwargs)
    with pytest.raises(KBError, match="split_k"):
        shipped.get("split_j")


def test_conditions_are_parsed_and_evaluated():
    tree = kb.parse_condition("T * TOPK <= 32 * E")
    assert tree is not None and kb.condition_names(tree) == {"T", "TOPK", "E"}
    assert kb.eval_condition(tree, {"T": 16, "TOPK": 2, "E": 8}) is True
    assert kb.eval_condition(tree, {"T": 4096, "TOPK": 2, "E": 8}) is False
    assert kb.eval_condition(tree, {"T": 16}) is None  # unknown names do not decide
    assert kb.parse_condition("every tensor smaller than 2 GiB") is None
    assert kb.parse_condition("__import__('os').system('x') == 0") is None  # calls never run
    assert kb.parse_condition("M") is None  # a bare name is not a condition


# ------------------------------------------------------------------ malformed entries


GOOD = {
    "title": "A technique",
    "families": ["gemm"],
    "targets": ["any"],
    "preconditions": ["M <= 128"],
    "action": {"kind": "policy", "set": {"num_stages": [3]}},
    "invariants": ["dot_contract"],
    "effect": "faster",
    "hurts": "never",
    "references": [{"title": "Triton tutorial"}],
}


def entry(tid: str, **changes) -> str:
    meta = {"id": tid, **GOOD, **changes}
    meta = {k: v for k, v in meta.items() if v is not DROP}
    return "---\n" + yaml.safe_dump(meta, sort_keys=False) + "---\n\nProse about it.\n"


DROP = object()


def write(folder: Path, stem: str, text: str) -> Path:
    path = folder / f"{stem}.md"
    path.write_text(text)
    return path


def test_a_good_entry_loads(tmp_path, vocab):
    write(tmp_path, "good", entry("good"))
    tech = kb.load(tmp_path, vocab).get("good")
    assert tech.action.compiler == {"num_stages": (3,)} and tech.action.tiles == {}
    assert tech.body == "Prose about it."


MALFORMED = [
    ("missing field", entry("bad", effect=DROP), "effect", "missing required field"),
    ("unknown family", entry("bad", families=["conv"]), "families", "valid choices"),
    ("unknown target", entry("bad", targets=["a100"]), "targets", "mi300x"),
    ("id not the stem", entry("other"), "id", "file name"),
    (
        "option no target has",
        entry("bad", action={"kind": "policy", "set": {"warp_spec": [1]}}),
        "action.set.warp_spec",
        "neither a tile",
    ),
    (
        "mi300x option on hopper",
        entry("bad", targets=["hopper"], action={"kind": "policy", "set": {"kpack": [2]}}),
        "action.set.kpack",
        "target hopper",
    ),
    (
        "value outside the space",
        entry("bad", action={"kind": "policy", "set": {"num_stages": [9]}}),
        "action.set.num_stages",
        "[9]",
    ),
    ("bad YAML", "---\nid: bad\ntitle: [unclosed\n---\nProse.\n", "front matter", "bad YAML"),
    ("no front matter", "# just prose\n", "front matter", "---"),
    (
        "unknown rewrite",
        entry("bad", action={"kind": "rewrite", "rewrite": "magic"}),
        "action.rewrite",
        "split_k",
    ),
    ("unknown action kind", entry("bad", action={"kind": "tune"}), "action.kind", "policy"),
    ("unknown invariant", entry("bad", invariants=["vibes"]), "invariants", "store_once"),
    (
        "condition over names the family lacks",
        entry("bad", preconditions=["T <= 64"]),
        "preconditions",
        "['T']",
    ),
    (
        "unchecked when",
        entry("bad", action={"kind": "policy", "set": {"BM": [16]}, "when": "small"}),
        "action.when",
        "checkable",
    ),
    ("no references", entry("bad", references=[]), "references", "non-empty"),
    ("unknown field", entry("bad", colour="red"), "colour", "valid choices"),
    (
        "bad reference url",
        entry("bad", references=[{"title": "x", "url": "ftp://x"}]),
        "references",
        "https://",
    ),
]


@pytest.mark.parametrize(
    "text, field, message", [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED]
)
def test_malformed_entry_names_file_and_field(tmp_path, vocab, text, field, message):
    path = write(tmp_path, "bad", text)
    with pytest.raises(KBError) as err:
        kb.load(tmp_path, vocab)
    assert err.value.file == str(path) and err.value.field == field
    assert str(path) in str(err.value) and repr(field) in str(err.value)
    assert message in str(err.value)


def test_duplicate_ids_across_folders_are_an_error(tmp_path, vocab):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    write(tmp_path / "a", "twin", entry("twin"))
    write(tmp_path / "b", "twin", entry("twin"))
    with pytest.raises(KBError, match="also defined"):
        kb.load([tmp_path / "a", tmp_path / "b"], vocab)


def test_missing_folder_is_an_error(tmp_path, vocab):
    with pytest.raises(KBError, match="does not exist"):
        kb.load(tmp_path / "nowhere", vocab)


def test_entry_without_prose_is_an_error(tmp_path, vocab):
    write(tmp_path, "bare", textwrap.dedent(entry("bare")).replace("Prose about it.\n", ""))
    with pytest.raises(KBError, match="no prose"):
        kb.load(tmp_path, vocab)
