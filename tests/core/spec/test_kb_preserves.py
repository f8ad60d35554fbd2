"""KB entries name the synthesized data-flow invariants (issue #19) each technique must
preserve: the `preserves` field, parsed by argus_core.kb and shown in the prompt's line."""

from __future__ import annotations

from pathlib import Path

import pytest

from argus_core import kb

KB = Path(__file__).resolve().parents[3] / "kb"


def test_every_ready_entry_names_the_invariants_it_must_preserve():
    base = kb.load([KB])
    ready = base.query(status="ready")
    assert len(ready) >= 20  # the shipped ready techniques
    for t in ready:
        assert t.preserves, f"{t.id}: a ready entry must name the invariants it preserves"
        for p in t.preserves:
            assert p.split(":", 1)[0] in kb.SPEC_INVARIANTS
        assert "must preserve: " + t.preserves[0] in t.summary()  # what the prompt shows
        assert t.to_dict()["preserves"] == list(t.preserves)


def test_moe_and_attention_entries_name_their_own_invariants():
    base = kb.load([KB])
    gate_up = base.get("fused_gate_up_silu")
    assert any(p.startswith("synth_gather") for p in gate_up.preserves)
    skip = base.get("causal_block_skip")
    assert any(p.startswith("synth_window") for p in skip.preserves)


def test_an_unknown_invariant_name_is_an_error_naming_the_choices(tmp_path):
    text = (KB / "split_k.md").read_text().replace("synth_pairing:", "synth_pairs:", 1)
    (tmp_path / "split_k.md").write_text(text)
    with pytest.raises(kb.KBError) as exc:
        kb.load([tmp_path])
    msg = str(exc.value)
    assert "preserves" in msg and "'synth_pairs'" in msg and "synth_pairing" in msg
