"""The front end's planted-bug corpus (`tests/plugins/verifiers/smt/frontend/planted`: an
emitted kernel of a KernelBench task with one mistake each) checked against the spec of
its task's graph (issue #19, Done-when line 1): with every hand-written tag and assertion
deleted, each bug is still `violated` once the invariants synthesized from the reference
are added, and the unmodified emission of the same task is proved from them."""

from __future__ import annotations

import functools
import pathlib

import pytest

from argus_core.frontend import capture_task
from argus_core.types import Policy
from argus_plugins.dsl.tile.frontend import TileFrontend
from argus_plugins.kernels.kernelbench import match, tasks
from argus_plugins.kernels.kernelbench.family import emission_spec
from argus_plugins.verifiers.smt.synth import check, strip_hand_written
from tests.plugins.verifiers.smt.conftest import target_spec
from tests.plugins.verifiers.smt.frontend.test_frontend_corpus import (
    ENTRY,
    HEADER,
    PLANTED,
    TASKS,
    tiles_of,
)

# the bugs a synthesized invariant reports first (the reads the reference makes); the
# others are reported first by an implied one (bounds, masks, pairing, coverage), which
# synthesis keeps
SYNTH_FIRST = {
    "conv_input_stride_wrong",
    "conv_row_width_wrong",
    "conv_tap_offset_wrong",
    "conv_weight_tap_shifted",
    "elementwise_operand_transposed",
    "matmul_bias_by_row_tile",
    "pool_window_offset",
    "rowreduce_store_next_rows",
}


@functools.cache
def _task(key: str):
    gm, _ = capture_task(tasks.load_module(tasks.resolve(TASKS, key).path), key)
    em = match.match(gm, key)
    return em, emission_spec(gm, em)


@pytest.mark.parametrize("path", PLANTED, ids=lambda p: p.stem)
def test_planted_front_end_bug_caught_from_synthesized_invariants(path: pathlib.Path):
    em, spec = _task(HEADER.search(path.read_text()).group(1))
    pol = Policy(tiles_of(path), {"num_warps": 4})
    ok = TileFrontend().parse(em.source, em.entry, f"<{path.stem}: emitted>")
    pol_ok = Policy({c.name: tiles_of(path)[c.name] for c in ok.constexprs}, {"num_warps": 4})
    r = check(strip_hand_written(ok), pol_ok, spec, target_spec())
    assert r.status == "verified", r.summary
    bad = TileFrontend().parse(path.read_text(), ENTRY, str(path))
    rb = check(strip_hand_written(bad), pol, spec, target_spec())
    assert rb.status == "violated", rb.summary
    first = rb.counterexamples[0]["assertion"]
    assert (first == "synth_dataflow") == (path.stem in SYNTH_FIRST), first
