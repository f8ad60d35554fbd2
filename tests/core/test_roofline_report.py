"""`argus report`'s roofline plot per task, from the runs' params and candidate times."""

from __future__ import annotations

import pytest

from argus_core.report.roofline import write_rooflines
from argus_core.report.store import CandidateRecord, RunRecord
from argus_core.report.table import Row

pytest.importorskip("matplotlib")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _row(kernel: str, shape: dict[str, int], times: list[tuple[float, str]]) -> Row:
    params = {"kernel": kernel, "backend": "h200", "planner": "icrl"}
    params |= {"config.kernel.dtype": "bf16"}
    params |= {f"config.kernel.shape.{k}": str(v) for k, v in shape.items()}
    cands = [
        CandidateRecord("r", i, f"c{i:03d}", "", True, True, ms, kind, None, 1.0)
        for i, (ms, kind) in enumerate(times)
    ]
    run = RunRecord("r", "run", "FINISHED", 0, "0", params=params, candidates=cands)
    return Row(run.task, "icrl", None, times[0][1], [run])


def test_one_roofline_per_task_and_unknown_tasks_named(tmp_path):
    gemm = _row("gemm", {"M": 4096, "N": 4096, "K": 4096}, [(0.2, "measured"), (0.3, "measured")])
    est = _row("gemm", {"M": 16, "N": 4096, "K": 4096}, [(0.02, "estimated")])
    unknown = _row("no_such_family", {"M": 1}, [(1.0, "estimated")])
    paths, notes = write_rooflines([gemm, est, unknown], tmp_path)
    assert len(paths) == 2
    for p in paths:
        assert p.name.startswith("roofline_") and p.read_bytes()[:8] == PNG_MAGIC
    assert len(notes) == 1 and "no_such_family" in notes[0]
