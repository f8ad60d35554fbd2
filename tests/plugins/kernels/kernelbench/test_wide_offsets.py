"""A task whose tensors reach 2^31 elements gets kernels with 64-bit offsets.

level1/4 (a [2048, 1048576] matrix times a vector: 2^31 elements) was refused on the H200:
the lowered offsets are int32 and only per-sample kernels could be launched per batch slice.
Now the family sees the largest tensor of the meta-captured graph (`costs.largest_numel`)
and sets `wide_offsets`; the lowering then casts every shape and stride parameter to int64
on entry (the run fact `offsets: i64`), and the harness launches such a kernel whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from argus_core.config import compose
from argus_core.errors import DSLError
from argus_core.pipeline import Stages
from argus_core.plugin_manager import Registry, default_plugin_manager
from argus_core.types import LoweredKernel, Policy
from argus_plugins.kernels.kernelbench import fastp, harness

TASKS = Path(__file__).parents[3] / "kernelbench_tasks"

MATVEC = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)


M = ROWS
K = 1048576


def get_inputs():
    return [torch.rand(M, K), torch.rand(K, 1)]


def get_init_inputs():
    return []
"""


def _stages(tmp_path, rows: int, backend: str = "h200") -> Stages:
    (tmp_path / "level1").mkdir(exist_ok=True)
    (tmp_path / "level1" / "4_matvec.py").write_text(MATVEC.replace("ROWS", str(rows)))
    cfg = compose(["+kernel=kernelbench", f"kernel.path={tmp_path}", "kernel.task=level1/4",
                   f"backend={backend}", "tracking=none"])  # fmt: skip
    return Stages.from_config(cfg, Registry(default_plugin_manager()))


def _ir_policy(stages: Stages):
    """The task's kernel IR and the first policy of its tile grid."""
    fam = stages.family
    ir = stages.dsl.parse(fam.source(), fam.entry, "<t>")
    tiles = {c.name: stages.cfg.kernel.tiles[c.name][0] for c in ir.constexprs}
    return ir, Policy(tiles, {"num_warps": 4, "num_stages": 2})


def _lowered(stages: Stages) -> tuple[LoweredKernel, Policy]:
    ir, policy = _ir_policy(stages)
    return stages.backend.lower(ir, policy, stages._lowering_facts()), policy


def test_only_a_tensor_of_2_31_elements_widens_the_offsets(tmp_path):
    # captured on meta tensors: the 8 GiB matrix is never allocated
    assert _stages(tmp_path, 2048).family.wide_offsets  # 2048 x 2^20 = 2^31 elements
    assert not _stages(tmp_path, 2047).family.wide_offsets


@pytest.mark.parametrize("backend", ["h200", "mi300x"])
def test_wide_kernels_cast_shapes_and_strides_and_compile(tmp_path, backend):
    stages = _stages(tmp_path, 2048, backend)
    low, policy = _lowered(stages)
    ints = [p.name for p in low.params if p.kind == "int" and p.binding[0] in ("shape", "stride")]
    assert ints and all(f"{n} = tl.cast({n}, tl.int64)" in low.source for n in ints)
    assert low.wide_offsets and LoweredKernel.from_dict(low.to_dict()).wide_offsets
    fp32 = {p.binding[1]: "fp32" for p in low.params if p.kind == "ptr"}
    rep = stages.backend.compile(low, fp32, policy)
    assert rep.ok, rep.error
    narrow, _ = _lowered(_stages(tmp_path, 2047, backend))
    assert not narrow.wide_offsets and "tl.int64" not in narrow.source


def test_an_unknown_offset_width_is_refused_by_name(tmp_path):
    stages = _stages(tmp_path, 16)
    ir, policy = _ir_policy(stages)
    with pytest.raises(DSLError, match=r"offsets.*'i16'.*i32.*i64"):
        stages.backend.lower(ir, policy, {"dtype": "fp32", "offsets": "i16"})


@pytest.mark.slow
@pytest.mark.parametrize("task", ["level1/1", "level1/17"])  # a matmul; a per-sample conv
def test_wide_kernels_are_correct_in_the_interpreter_and_launch_whole(monkeypatch, task):
    """Every tensor counts as past int32 (the threshold lowered to one element): the family
    widens, the check's process launches each kernel whole (no batch slices), and the
    result is correct against the Model."""
    monkeypatch.setattr(harness, "INT32_ELEMS", 1)
    out = fastp.evaluate_task(str(TASKS), task, "interpret", 1, None, trials=1)
    assert out.correct, out.note
