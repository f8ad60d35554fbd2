"""Every front-end template (issue #19): for a small task of each, the emitted kernel with
its hand-written tags and assertions deleted is proved from the invariants synthesized
from the task's graph, and a data-flow bug planted in it is caught (by a synthesized
invariant where the implied ones miss it: `SYNTH_ONLY`)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from argus_core.frontend.capture import capture, capture_task
from argus_core.types import Policy
from argus_plugins.dsl.tile.frontend import TileFrontend
from argus_plugins.kernels.kernelbench.family import emission_spec
from argus_plugins.kernels.kernelbench.match import match
from argus_plugins.kernels.kernelbench.tasks import load_module
from argus_plugins.verifiers.smt import SmtVerifier
from argus_plugins.verifiers.smt.synth import check, strip_hand_written
from tests.plugins.verifiers.smt.conftest import target_spec

TASKS = Path(__file__).parents[3] / "kernelbench_tasks"


class Bmm(torch.nn.Module):
    def forward(self, a, b):
        return torch.bmm(a, b) * 2.0


class Bcast(torch.nn.Module):
    def forward(self, x, row):
        return x * row + 1.0


class LayerNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = torch.nn.LayerNorm(64)

    def forward(self, x):
        return self.ln(x)


class Mse(torch.nn.Module):
    def forward(self, a, b):
        return F.mse_loss(a, b)


class Sdpa(torch.nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


INLINE = {  # lower_more's templates, on small modules (no task file of theirs here)
    "bmm": (Bmm, lambda: [torch.randn(2, 16, 8), torch.randn(2, 8, 16)]),
    "bcast": (Bcast, lambda: [torch.randn(8, 16), torch.randn(16)]),
    "sdpa": (Sdpa, lambda: [torch.randn(2, 2, 16, 8) for _ in range(3)]),
    "rownorm": (LayerNorm, lambda: [torch.randn(8, 64)]),
    "lossreduce": (Mse, lambda: [torch.randn(8, 64), torch.randn(8, 64)]),
}

# template: (task, the planted bug: (text, replacement) in the emitted source)
CASES = {
    "elementwise": ("level1/8_add_mul", ("al.load(x1.", "al.load(x2.")),
    "matmul": ("level1/3_matmul_bias_relu", ("vec0.tile(BN)[pn]", "vec0.tile(BN)[pm]")),
    "matmul_rows": (
        "level2/5_linear_gelu_softmax",
        ("a.tile(BM, BK)[pm, k]", "a.tile(BM, BK)[pm, 0]"),
    ),
    "rowprog": ("level1/12_rms_norm_rows", ("x0.tile(ROWS, BN)[pm, 0]", "x0.tile(ROWS, BN)[0, 0]")),
    "softmax": ("level1/5_row_softmax", ("x.tile(ROWS, BN)[pm, 0]", "x.tile(ROWS, BN)[0, 0]")),
    "rowreduce": ("level1/6_row_sum", ("x.tile(ROWS, BN)[pm, 0]", "x.tile(ROWS, BN)[0, 0]")),
    "midreduce": (
        "level1/15_max_over_middle_dim",
        ("x.tile(1, BR, BC)[pa, 0, pc]", "x.tile(1, BR, BC)[0, 0, pc]"),
    ),
    # (a scan's column window is matched by role only: a bug reading column tile 0 for
    # every tile is left to the correctness check; a wrong row is caught)
    "scan": ("level1/11_cumsum", ("x0.tile(ROWS, BN)[pm, cc]", "x0.tile(ROWS, BN)[0, cc]")),
    "bmm": ("bmm", ("b[pb].tile(BK, BN)[k, pn]", "b[0].tile(BK, BN)[k, pn]")),
    "bcast": ("bcast", ("al.load(row1.tile(BC)[pc])", "al.load(row1.tile(BC)[0])")),
    "sdpa": ("sdpa", ("al.load(v[b, h]", "al.load(v[0, h]")),
    "rownorm": ("rownorm", ("al.load(b.tile(BL)[c3])", "al.load(w.tile(BL)[c3])")),
    "lossreduce": ("lossreduce", ("al.load(x1.", "al.load(x0.")),
}
SYNTH_ONLY = {
    "elementwise",
    "bmm",
    "sdpa",
    "rownorm",
    "lossreduce",
}  # the implied assertions prove the bugged kernel


def _emission(case: str):
    task, _ = CASES[case]
    if task in INLINE:
        build, inputs = INLINE[task]
        gm, _ = capture(build, inputs, task)
    else:
        path = TASKS / f"{task}.py"
        gm, _ = capture_task(load_module(path), path.stem)
    em = match(gm, task)
    assert em.template == case, em.template
    return em, emission_spec(gm, em)


def _parse(em, source: str):
    ir = TileFrontend().parse(source, em.entry, f"<{em.template}>")
    tiles = {k: v[0] for k, v in em.tiles.items()}
    return ir, Policy({c.name: tiles[c.name] for c in ir.constexprs}, {"num_warps": 4})


@pytest.mark.parametrize("case", list(CASES))
def test_template_proved_and_planted_bug_caught(case):
    em, spec = _emission(case)
    ir, pol = _parse(em, em.source)
    r = check(strip_hand_written(ir), pol, spec, target_spec())
    assert r.status == "verified", r.summary
    assert r.synthesized >= 1
    old, new = CASES[case][1]
    assert old in em.source, em.source
    bad, pol = _parse(em, em.source.replace(old, new))
    rb = check(strip_hand_written(bad), pol, spec, target_spec())
    assert rb.status == "violated", rb.summary
    if case in SYNTH_ONLY:
        plain = SmtVerifier().verify(strip_hand_written(bad), pol, {}, target_spec())
        assert plain.status == "verified", plain.summary
        assert rb.counterexamples[0]["assertion"] == "synth_dataflow"
