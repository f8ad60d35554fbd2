"""Attention whose head dim one `sdpa` tile cannot hold (level1/97: D = 1024 took 329728
bytes of shared memory on sm_90, past the 232448 a block has): a program of `sdpa_scores`
(softmax(Q Kᵀ * scale) into a buffer, D walked in steps) and `sdpa_pv` (P V)."""

from __future__ import annotations

from argus_plugins.kernels.kernelbench import fastp, match, tasks

WIDE = """import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, Q, K, V):
        return torch.nn.functional.scaled_dot_product_attention(Q, K, V)

def get_inputs():
    return [torch.rand(2, 2, 12, 300), torch.rand(2, 2, 20, 300), torch.rand(2, 2, 20, 40)]

def get_init_inputs():
    return []
"""


def _task_dir(tmp_path):
    (tmp_path / "level1").mkdir()
    (tmp_path / "level1" / "1_sdpa_wide.py").write_text(WIDE)
    (tmp_path / "level1" / "2_sdpa_narrow.py").write_text(WIDE.replace("300", "64"))
    return tmp_path


def test_a_wide_head_is_a_program_of_scores_and_values_and_a_narrow_one_is_not(tmp_path):
    from argus_core.frontend import capture_task

    root = _task_dir(tmp_path)
    gm, _ = capture_task(tasks.load_module(tasks.resolve(root, "level1/1").path), "level1/1")
    em = match.match(gm, "level1/1")
    assert [t for t, _ in em.parts] == ["sdpa_scores", "sdpa_pv"]
    plan = em.binding[match.PROGRAM]
    assert plan["buffers"] == {"t0": ["s[0][0]", "s[0][1]", "s[0][2]", "s[1][2]"]}
    assert em.tiles["k0_BT"] == [32] and match.library_calls(em.source) == []
    gm, _ = capture_task(tasks.load_module(tasks.resolve(root, "level1/2").path), "level1/2")
    assert match.match(gm, "level1/2").template == "sdpa"


def test_a_wide_head_is_verified_and_correct_in_the_interpreter(tmp_path):
    """Through the whole pipeline: both kernels verified, the program against
    F.scaled_dot_product_attention on fresh inputs and at sizes it never saw."""
    out = fastp.evaluate_task(str(_task_dir(tmp_path)), "level1/1", "interpret", 1, None,
                              trials=1)  # fmt: skip
    assert out.correct, out.note
    assert out.unseen == "2/2"


def test_a_scores_kernel_reading_one_key_chunk_for_every_step_is_a_counterexample(tmp_path):
    """The implied dot assertion pairs the query's and the key's head-dim index: a key
    tile that stays at the first chunk while the query walks D is caught, not run."""
    from argus_core.frontend import capture_task
    from argus_core.types import Policy
    from argus_plugins.backends.mi300x.spec import MI300X
    from argus_plugins.dsl.tile.frontend import TileFrontend
    from argus_plugins.verifiers.smt import SmtVerifier

    root = _task_dir(tmp_path)
    gm, _ = capture_task(tasks.load_module(tasks.resolve(root, "level1/1").path), "level1/1")
    em = match.match(gm, "level1/1")

    def verify(source: str, entry: str):
        ir = TileFrontend().parse(source, entry, "<level1/1>")
        policy = Policy({c.name: em.tiles[c.name][0] for c in ir.constexprs})
        return SmtVerifier().verify(ir, policy, {"timeout_ms": 20000}, MI300X)

    assert verify(em.source, "kb_k0").status == "verified"
    assert verify(em.source, "kb_k1").status == "verified"
    good = "k[b, h].tile(k0_BT, k0_BK)[0, d]"
    assert good in em.source
    bad = em.source.replace(good, "k[b, h].tile(k0_BT, k0_BK)[0, 0]")
    assert verify(bad, "kb_k0").status == "violated"
