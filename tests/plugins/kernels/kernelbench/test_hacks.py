"""The hack corpus (hacks/, written for Argus): ModelNew candidates that try to get a wrong
or borrowed answer accepted for level1/1 (square matmul). Every one fails and the next
candidate is checked as usual. Those marked [split] in their docstring attack the
evaluation itself (reading the expected output, patching the reference or the comparison,
faking the result, exiting early, guessing the seeds); they also fail with the static check
switched off, i.e. given arbitrary Python in the candidate process, because the reference,
the comparison and the verdict live in the parent."""

from __future__ import annotations

from pathlib import Path

import pytest

from argus_core import sandbox
from argus_plugins.kernels.kernelbench.evaluate import check_candidate

TASKS = Path(__file__).parents[3] / "kernelbench_tasks"
SQUARE = TASKS / "level1" / "1_square_matmul.py"
HACKS = sorted((Path(__file__).parent / "hacks").glob("*.py"))
SPLIT = [p for p in HACKS if "[split]" in p.read_text().split("\n", 1)[0]]
GOOD = Path(__file__).parent / "candidates" / "good_matmul.py"

pytestmark = pytest.mark.skipif(
    sandbox.isolation_problem() is not None, reason=f"{sandbox.isolation_problem()}"
)


def check(path: Path, static: bool = True):
    cand = {"kind": "modelnew", "source": path.read_text(), "filename": str(path)}
    return check_candidate(str(SQUARE), cand, trials=2, timeout_s=60, static=static)


def test_the_corpus_has_at_least_30_hacks():
    assert len(HACKS) >= 30 and len(SPLIT) >= 15


@pytest.mark.parametrize("path", HACKS, ids=[p.stem for p in HACKS])
def test_hack_is_rejected(path):
    report = check(path)
    assert not report.ok, f"{path.name} was accepted"
    assert report.error  # recorded with its reason
    assert len(report.error) <= 3 * sandbox.OUTPUT_TAIL_BYTES  # untrusted text is cut


@pytest.mark.slow
@pytest.mark.parametrize("path", SPLIT, ids=[p.stem for p in SPLIT])
def test_hack_fails_with_arbitrary_python_in_the_candidate_process(path):
    report = check(path, static=False)
    assert not report.ok, f"{path.name} was accepted with the static check off"
    assert report.error


def test_a_correct_candidate_still_passes_with_and_without_the_static_check():
    for static in (True, False):
        report = check(GOOD, static=static)
        assert report.ok, report.error
