"""Planted bugs in the KernelBench front end's emitted kernels (plugins/kernels/kernelbench
templates): each file under planted/ is an emitted kernel (match.match on a task of
tests/kernelbench_tasks, named in its first line) with one mistake; each is `violated` at
its marked line with the planted mistake in the ranked slice and a minimized
counterexample. The unmodified emissions of the same tasks verify (no false alarm)."""

from __future__ import annotations

import pathlib
import re

import pytest

from argus_core.types import Policy, VerifyReport
from argus_plugins.dsl.tile.frontend import TileFrontend
from argus_plugins.verifiers.smt import SmtVerifier
from tests.plugins.verifiers.smt.conftest import (
    cause_line,
    cause_rank,
    check_cause,
    expected,
    target_spec,
)

HERE = pathlib.Path(__file__).parent
PLANTED = sorted((HERE / "planted").glob("*.py"))
TASKS = HERE.parents[3] / "kernelbench_tasks"
ENTRY = "kb_kernel"
HEADER = re.compile(r"emitted by match\.match for tests/kernelbench_tasks/(level\d/\d+)")
TILES = re.compile(r"^# tiles: (.*)$", re.M)

# one task per template (two for pool: max and average), the tasks the planted bugs start from
EMITTED = {
    "level1/3": "matmul",
    "level1/5": "softmax",
    "level1/7": "rowreduce",
    "level1/8": "elementwise",
    "level1/12": "rowprog",
    "level1/15": "midreduce",
    "level1/17": "conv",
    "level1/20": "chanprog",
    "level1/21": "pool",
    "level1/22": "pool",
    "level2/8": "matmul_rows",
}


def tiles_of(path: pathlib.Path) -> dict[str, int]:
    """The policy a planted file was emitted with (its `# tiles: BM=32, ...` line)."""
    m = TILES.search(path.read_text())
    assert m, f"{path.name} has no '# tiles:' line"
    return {k: int(v) for k, v in (kv.split("=") for kv in m.group(1).split(", "))}


def verify(path: pathlib.Path) -> VerifyReport:
    ir = TileFrontend().parse(path.read_text(), ENTRY, str(path))
    return SmtVerifier().verify(ir, Policy(tiles_of(path), {"num_warps": 4}), {}, target_spec())


def emitted(key: str):
    """(emission, IR, policy) of task `key` through the family's own capture and match."""
    from argus_core.frontend import capture_task
    from argus_plugins.kernels.kernelbench import match, tasks

    gm, _ = capture_task(tasks.load_module(tasks.resolve(TASKS, key).path), key)
    em = match.match(gm, key)
    ir = TileFrontend().parse(em.source, em.entry, f"<{key}>")
    return em, ir, Policy({k: v[0] for k, v in em.tiles.items()}, {"num_warps": 4})


def test_corpus_covers_the_front_end():
    """>= 12 planted bugs, over at least eight of the front end's templates."""
    assert len(PLANTED) >= 12
    templates = {EMITTED[HEADER.search(p.read_text()).group(1)] for p in PLANTED}
    assert len(templates) >= 8, templates


@pytest.mark.parametrize("key", sorted(EMITTED), ids=lambda k: k.replace("/", "_"))
def test_emitted_kernels_verify(key):
    em, ir, pol = emitted(key)
    assert em.template == EMITTED[key]
    report = SmtVerifier().verify(ir, pol, {}, target_spec())
    assert report.status == "verified", report.summary
    assert report.assertions > 5


@pytest.mark.parametrize("path", PLANTED, ids=lambda p: p.stem)
def test_planted_front_end_bug_is_caught(path: pathlib.Path, cause_ranks):
    report = verify(path)
    cause_ranks.put(path, report)
    assertion, line = expected(path)
    assert report.status == "violated", report.summary
    hits = [
        c
        for c in report.counterexamples
        if c["assertion"] == assertion and c["program_point"]["line"] == line
    ]
    assert hits, (assertion, line, [c["text"] for c in report.counterexamples])
    cex = hits[0]
    check_cause(cex, path)  # the mistake is in the slice; the values are minimized
    assert cex["minimized"], cex["text"]
    assert f"{path.name}:{line}" in cex["text"]


@pytest.mark.slow
def test_the_likely_cause_is_the_planted_mistake():
    """The one-line form names the planted line first for all but at most one bug in six
    (measured 2026-12-01: 16 of 17; the miss, two loads of one line's operands, names
    the other load)."""
    ranks = []
    for path in PLANTED:
        assertion, line = expected(path)
        report = verify(path)
        cex = next(
            c
            for c in report.counterexamples
            if c["assertion"] == assertion and c["program_point"]["line"] == line
        )
        assert cause_line(path) is not None
        ranks.append(cause_rank(cex, path))
    assert sum(r == 0 for r in ranks) >= len(ranks) * 5 // 6, ranks
