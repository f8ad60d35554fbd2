"""A run's results on disk, written so that a fault loses nothing that had finished.

Each candidate's record is appended to `results.jsonl` in the run directory as soon as it
finishes (one JSON line, flushed and fsynced), so a run killed by SIGKILL, or one whose disk
fills up, keeps every candidate that finished before. At the end `results.json` (the whole
list) is written atomically: to a temporary file beside it, then renamed over it, so it is
either the previous complete file or the new complete one, never a truncated one.

`load_records` reads `results.jsonl` back (a last line cut by the kill is dropped), and
`result_from_dict` rebuilds a `CandidateResult`, which `resume=true` replays to the planner
instead of evaluating the candidate again.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from argus_core.types import (
    Candidate,
    CandidateResult,
    CompileReport,
    CorrectnessReport,
    LoweredKernel,
    Policy,
    TimingReport,
    VerifyReport,
)

RECORDS = "results.jsonl"
RESULTS = "results.json"


def write_atomic(path: str | Path, text: str) -> None:
    """Write `text` to `path` through a temporary file in the same directory and a rename;
    on any error the temporary file is removed and `path` is left as it was."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # as open() would make it, not mkstemp's 0600
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class ResultsLog:
    """The run directory's `results.jsonl`, one record appended per finished candidate."""

    def __init__(self, run_dir: str | Path):
        self.path = Path(run_dir) / RECORDS
        self._extra: dict[int, dict[str, Any]] = {}  # per candidate index, beside to_dict()

    def begin(self) -> Path | None:
        """Start this run's records: an earlier run's file in the same directory (a rerun
        with a fixed hydra.run.dir, a resumed sweep job) is renamed aside, not appended to;
        returns its new path."""
        if not self.path.exists():
            return None
        n = 1
        while (old := self.path.with_name(f"{RECORDS}.{n}.old")).exists():
            n += 1
        self.path.rename(old)
        return old

    def append(self, result: CandidateResult, **extra: Any) -> None:
        """Append one record (`extra` keys are added to it, and to its entry in results.json:
        `cache`, the stages served from the result cache); on a failed write (disk full)
        the file is cut back to the records before it, so it never ends in half a record."""
        self._extra[result.index] = extra
        line = (json.dumps({**result.to_dict(), **extra}, default=str) + "\n").encode()
        # raw descriptor writes, not a buffered file: a buffered file's truncate() flushes
        # first, and with the disk full that flush fails again before anything is cut
        # back (and close() would append the rest of the buffer after the cut)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            try:
                view = memoryview(line)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            except OSError:
                os.ftruncate(fd, size)
                raise
        finally:
            os.close(fd)

    def write_final(self, results: list[CandidateResult]) -> Path:
        out = self.path.with_name(RESULTS)
        records = [{**r.to_dict(), **self._extra.get(r.index, {})} for r in results]
        write_atomic(out, json.dumps(records, indent=2, default=str))
        return out


def load_records(run_dir: str | Path) -> list[dict[str, Any]]:
    """The records of `run_dir/results.jsonl` in order; a line the kill cut short (the
    last) is left out. Empty when there is no such file."""
    path = Path(run_dir) / RECORDS
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            break  # the line being written when the process died
    return out


def read_results(run_dir: str | Path) -> list[dict[str, Any]]:
    """A run's candidate records: `results.json` when it is whole, else the per-candidate
    `results.jsonl` of a run that never ended. ValueError when the run has neither."""
    run_dir = Path(run_dir)
    final = run_dir / RESULTS
    if final.is_file():
        try:
            return list(json.loads(final.read_text()))
        except (json.JSONDecodeError, TypeError):
            pass  # fall back to the per-candidate records
    records = load_records(run_dir)
    if not records and not final.is_file():
        raise ValueError(f"{run_dir} has no {RESULTS} or {RECORDS}")
    return records


def _build(cls: Any, d: dict[str, Any] | None) -> Any:
    if d is None:
        return None
    names = set(cls.__dataclass_fields__)
    return cls(**{k: v for k, v in d.items() if k in names})


def result_from_dict(d: dict[str, Any]) -> CandidateResult:
    """A `CandidateResult` from its `to_dict()` record (the assembly text is not kept)."""
    cand = dict(d["candidate"])
    cand["policy"] = Policy.from_dict(cand.get("policy") or {})
    lowered = d.get("lowered")
    return CandidateResult(
        candidate=_build(Candidate, cand),
        index=int(d.get("index", 0)),
        verify=_build(VerifyReport, d.get("verify")) or VerifyReport(),
        lowered=LoweredKernel.from_dict(lowered) if lowered else None,
        compile=_build(CompileReport, d.get("compile")),
        correctness=_build(CorrectnessReport, d.get("correctness")),
        timing=_build(TimingReport, d.get("timing")),
        reward=d.get("reward"),
        failure=d.get("failure"),
        backend=str(d.get("backend") or ""),
        seconds=float(d.get("seconds") or 0.0),
        planner=dict(d.get("planner") or {}),
    )
