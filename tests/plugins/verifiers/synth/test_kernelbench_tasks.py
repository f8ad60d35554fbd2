"""Every KernelBench task of `tests/kernelbench_tasks` the front end emits a kernel for:
the spec derived from the task's captured graph (`KernelBenchFamily.reference_specs`,
through `emission_spec`) is proved of the emitted kernel, hand-written tags deleted; a task
it cannot be written for fails for one of the reasons `NO_SPEC` names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from argus_core.errors import ConfigError
from argus_core.frontend.capture import capture_task
from argus_core.types import Policy
from argus_plugins.dsl.tile.frontend import TileFrontend
from argus_plugins.kernels.kernelbench.family import emission_spec
from argus_plugins.kernels.kernelbench.match import NoTemplate, match
from argus_plugins.kernels.kernelbench.tasks import load_module
from argus_plugins.verifiers.smt.synth import check, strip_hand_written
from tests.plugins.verifiers.smt.conftest import target_spec

TASKS = sorted((Path(__file__).parents[3] / "kernelbench_tasks").glob("level*/*.py"))
# why a task may have no spec of its kernel: a program whose buffers no graph node is (a
# split reduction's partial sums); conv and pool windows over merged positions, and a
# conv's channel bias [C, 1, ...] under `go:1`, have one since 2026-12-03, each kernel of
# a program of the front end (its part of the graph, `Emission.segments`) too, and a
# grouped transposed conv (its output channels `w_1 * G` divided by the view, its weight's
# dim 0 the input's channels) too (`PROVED` must be proved: a program's every kernel)
NO_SPEC = re.compile(r"a program of \d+ kernels whose buffers")
PROVED = {
    "level1/17_conv2d_strided_padded_dilated",
    "level1/18_conv_transpose2d_grouped",
    "level1/19_depthwise_conv1d",
    "level1/21_maxpool2d_dilated_then_scale",
    "level1/22_avgpool3d_padded",
    "level2/2_conv_relu",
    "level2/11_conv3d_batchnorm_residual_hardswish",
    "level2/13_conv_softmax_min_over_channels",
    "level2/12_conv_maxpool",
    "level2/14_conv_spatial_mean_subtract_tanh",
    "level2/15_convtranspose_global_avgpool_flatten_linear",
}


def test_task_corpus_size():
    assert len(TASKS) >= 30
    assert PROVED <= {f"{p.parent.name}/{p.stem}" for p in TASKS}


@pytest.mark.slow
@pytest.mark.parametrize("path", TASKS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_emitted_kernel_proved_against_the_task_graph(path: Path):
    gm, _ = capture_task(load_module(path), path.stem)
    try:
        em = match(gm, path.stem)
    except NoTemplate:
        pytest.skip("no template (the front end's coverage, not the spec's)")
    tiles = {k: v[0] for k, v in em.tiles.items()}
    for entry in em.entries or (em.entry,):  # a program's kernels, each its part of the graph
        try:
            spec = emission_spec(gm, em, entry)
        except (ConfigError, ValueError) as exc:
            assert f"{path.parent.name}/{path.stem}" not in PROVED, str(exc)
            assert NO_SPEC.search(str(exc)), str(exc)
            continue
        ir = TileFrontend().parse(em.source, entry, f"<{path.stem}>")
        pol = Policy({c.name: tiles[c.name] for c in ir.constexprs}, {"num_warps": 4})
        r = check(strip_hand_written(ir), pol, spec, target_spec())
        assert r.status == "verified", (entry, r.summary)
        assert r.synthesized >= 1
