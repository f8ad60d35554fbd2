"""A GEMM whose row epilogue one program cannot hold (issue #14: level2/14, 18, 22, 30, 56, 64,
66, 80, 84, 99 at N = 8192..32768; level2/37, 62, 88, 94: a GroupNorm of more than 32
groups) is lowered as a program: the GEMM, with the elementwise ops before the first row op
as its epilogue, writes a buffer; the row ops are a second kernel over it. Short rows keep
the fused `matmul_rows` kernel."""

from __future__ import annotations

import pytest

from argus_core.types import Policy
from argus_plugins.backends.mi300x.spec import MI300X
from argus_plugins.dsl.tile.frontend import TileFrontend
from argus_plugins.kernels.kernelbench import fastp, harness, match, tasks
from argus_plugins.verifiers.smt import SmtVerifier

TASK = """import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, N)
        self.gn = nn.GroupNorm(G, N)
        self.weight = nn.Parameter(torch.randn(N))
        self.scale = nn.Parameter(torch.tensor(1.5))
        self.bias4 = nn.Parameter(torch.randn(N).view(1, -1, 1, 1))
    def forward(self, x):
BODY
def get_inputs():
    return [torch.randn(4, 16)]
def get_init_inputs():
    return []
"""
SOFTMAX = "        return torch.softmax(torch.nn.functional.gelu(self.fc(x)) * 0.5, dim=1)"
SUM = "        return torch.sum(torch.sigmoid(self.fc(x)), dim=1, keepdim=True) * self.scale"
LSE = (
    "        x = self.fc(x) * 2.0\n"
    "        x = torch.logsumexp(x + x, dim=1, keepdim=True)\n"
    "        return x * torch.nn.functional.mish(x)"
)
OUTER = (  # level2/75's tail: a row min [M, 1] plus a [1, N, 1, 1] bias: [1, N, M, 1]
    "        x = torch.min(self.fc(x), dim=1, keepdim=True)[0]\n        return x + self.bias4"
)
GROUP_NORM = (
    "        x = self.gn(self.fc(x))\n"
    "        x = x * torch.sigmoid(x)\n"
    "        return x * self.weight"
)


def _task(n: int, body: str, groups: int = 16) -> str:
    return TASK.replace("BODY", body).replace("N)", f"{n})").replace("(G,", f"({groups},")


def _emit(tmp_path, text: str) -> match.Emission:
    from argus_core.frontend import capture_task

    (tmp_path / "level2").mkdir(exist_ok=True)
    (tmp_path / "level2" / "1_long.py").write_text(text)
    gm, _ = capture_task(tasks.load_module(tasks.resolve(tmp_path, "level2/1").path), "t")
    return match.match(gm, "level2/1")


def _templates(em: match.Emission) -> list[str]:
    return [
        em.source.split(f"def {e}(")[0].rsplit("(template `", 1)[1].split("`")[0]
        for e in em.entries
    ]


def _verified(em: match.Emission) -> list[str]:
    out = []
    for entry in em.entries or (em.entry,):
        ir = TileFrontend().parse(em.source, entry, "<t>")
        policy = Policy({c.name: em.tiles[c.name][0] for c in ir.constexprs})
        out.append(SmtVerifier().verify(ir, policy, {"timeout_ms": 20000}, MI300X).status)
    return out


@pytest.mark.parametrize("body", [SOFTMAX, SUM, LSE])
def test_a_short_row_epilogue_stays_one_fused_kernel(tmp_path, body):
    for n in (64, match.WHOLE_ROW_MAX_N):
        em = _emit(tmp_path, _task(n, body))
        assert em.template == "matmul_rows" and not em.entries, n


@pytest.mark.parametrize(
    "body, second, epilogue",
    [
        (SOFTMAX, "softmax", "e1 = (e0 * 0.5)"),  # gelu, then * 0.5
        (SUM, "rowprog", "e0 = al.sigmoid(acc)"),
        (LSE, "rowprog", "e1 = (e0 + e0)"),  # * 2.0, then x + x
    ],
)
def test_a_long_row_epilogue_is_the_gemm_then_a_row_kernel_over_its_buffer(
    tmp_path, body, second, epilogue
):
    import torch

    em = _emit(tmp_path, _task(4096, body))
    assert em.template == "program" and em.entries == ("kb_k0", "kb_k1")
    assert _templates(em) == ["matmul", second]
    plan = em.binding[match.PROGRAM]
    gemm, rows = plan["launches"]
    assert gemm["binding"]["c"] == {"from": "buffer", "name": "t0"}
    # the buffer is the GEMM's [M, N] output, sized from the call's input
    shape = harness.buffer_shape(plan["buffers"]["t0"], [torch.empty(7, 16, device="meta")])
    assert shape == (7, 4096)
    assert {"from": "buffer", "view": "2d", "name": "t0"} in rows["binding"].values()
    # the elementwise ops before the first row op are the GEMM's epilogue
    k0 = em.source.split("def kb_k0(")[1].split("def kb_k1(")[0]
    assert epilogue in k0 and "al.max(" not in k0 and "al.sum(" not in k0
    assert _verified(em) == ["verified", "verified"]


def test_a_group_norm_of_more_than_32_groups_is_a_norm_kernel_over_the_gemm_buffer(tmp_path):
    em = _emit(tmp_path, _task(256, GROUP_NORM, groups=64))  # short rows, too many groups
    assert _templates(em) == ["matmul", "rownorm", "rowprog"]  # the [N] weight: a row kernel
    gemm, norm, rows = em.binding[match.PROGRAM]["launches"]
    assert norm["binding"]["x"] == {"from": "buffer", "view": "gns:64", "name": "t0"}
    assert {"from": "buffer", "view": "2d", "name": "t1"} in rows["binding"].values()
    assert {"from": "param", "attr": "weight", "view": "1d"} in rows["binding"].values()
    assert _verified(em) == ["verified"] * 3
    em = _emit(tmp_path, _task(4096, GROUP_NORM, groups=16))  # few groups, long rows
    assert _templates(em) == ["matmul", "rownorm", "rowprog"]
    assert _verified(em) == ["verified"] * 3
    em = _emit(tmp_path, _task(256, GROUP_NORM, groups=16))  # both fit: one fused kernel
    assert em.template == "matmul_rows"


@pytest.mark.slow
@pytest.mark.parametrize(
    "n, groups, body",
    # the row kernels over a GEMM's buffer (rowprog's sum and logsumexp are the same program
    # shape as softmax's; interpreted, each case costs 20-90 s of CI). The softmax's rows are
    # just past WHOLE_ROW_MAX_N (2048): a program, whose GEMM's last column tile is ragged
    [(2064, 16, SOFTMAX), (128, 64, GROUP_NORM), (64, 16, OUTER)],
)
def test_long_row_programs_are_correct_in_the_interpreter(tmp_path, capsys, n, groups, body):
    (tmp_path / "level2").mkdir()
    (tmp_path / "level2" / "1_long.py").write_text(_task(n, body, groups))
    assert (
        fastp.main(
            ["--path", str(tmp_path), "--tasks", "level2/1", "--budget", "1", "--trials", "1"]
        )
        == 0
    )
    assert f"{'level2/1':<12} yes" in capsys.readouterr().out


def test_an_outer_sum_is_a_broadcast_kernel_of_rows_and_columns(tmp_path):
    """`[M, 1] + [1, N, 1, 1]` is `[1, N, M, 1]` (level2/75): the last kernel sees the output
    as [N, M] ("rows:2"), the row min as its row and the bias as its column; the verifier
    proves where each element lands (the outer sum's tags meet, one per axis)."""
    em = _emit(tmp_path, _task(4096, OUTER))
    assert em.template == "program" and _templates(em)[-1] == "bcast"
    last = em.binding[match.PROGRAM]["launches"][-1]["binding"]
    assert last["y"] == {"from": "output", "view": "rows:2"}
    assert last["col1"] == {"from": "param", "attr": "bias4", "view": "1d"}
    assert last["row0"]["from"] == "buffer"
    assert set(_verified(em)) == {"verified"}


def test_a_program_gets_an_estimate_for_the_h200_without_a_gpu(tmp_path):
    """backend=h200 on a machine without one: cross-compiled, and its time an estimate
    (the eager baseline's estimate failed: AttributeError on the cost model's family)."""
    from argus_core.config import compose
    from argus_core.pipeline import Stages
    from argus_core.plugin_manager import Registry, default_plugin_manager

    (tmp_path / "level2").mkdir()
    (tmp_path / "level2" / "1_long.py").write_text(_task(4096, OUTER))
    cfg = compose(["+kernel=kernelbench", f"kernel.path={tmp_path}", "kernel.task=level2/1",
                   "backend=h200", "evaluate.correctness=off", "tracking=none"])  # fmt: skip
    registry = Registry(default_plugin_manager())
    stages = Stages.from_config(cfg, registry)
    session = registry.get("planner", "baseline").create(
        cfg.planner,
        {"family": stages.family, "dsl": stages.dsl, "backend": stages.backend,
         "kernel_cfg": cfg.kernel, "backend_cfg": stages.backend_cfg, "seed": 0,
         "budget": 1, "llm": None},
    )  # fmt: skip
    (cand,) = session.propose(1)
    res, _ = stages.evaluate(cand, 0, None)
    assert res.failure is None, res.failure
    assert res.compile.ok and res.timing.estimated and res.timing.baseline_ms > 0
