"""Who a job of a sweep is (its sweep, number and overrides), and what it left behind.

Every job of one Hydra multirun agrees on its sweep's identity without talking to the
others, even from other processes or hosts (joblib, Slurm, Ray): the identity is derived
from the sweep directory, which Hydra resolves once for the whole sweep
(`hydra.sweep.dir`). MLflow parent runs carry it as the tags below, which `argus report`
groups by. Each job also leaves a small status file in its output directory; the `argus`
process reads those back for the sweep's exit status, and `resume=true` reads them when
the tracker is not MLflow.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SWEEP_ID_TAG = "argus.sweep_id"
SWEEP_NAME_TAG = "argus.sweep_name"
JOB_NUM_TAG = "argus.job_num"
JOB_OVERRIDES_TAG = "argus.job_overrides"

JOB_FILE = ".argus_job.json"  # in each job's output directory
INVOCATION_ENV = "ARGUS_SWEEP_INVOCATION"  # set by `argus -m`; names the files it reads back

# keys that do not change what a job computes: `resume=true` re-runs the same jobs
NOT_IDENTITY_KEYS = frozenset({"resume"})


@dataclass(frozen=True)
class SweepJob:
    """One job of a multirun, as Hydra numbered it."""

    sweep_dir: str  # absolute
    sweep_name: str
    num: int
    overrides: str  # `job_identity` of the job's task overrides
    output_dir: str  # absolute

    @property
    def sweep_id(self) -> str:
        return sweep_id(self.sweep_dir)

    def tags(self) -> dict[str, str]:
        """The tags every parent run of this sweep carries (exact names: `argus report`)."""
        return {
            SWEEP_ID_TAG: self.sweep_id,
            SWEEP_NAME_TAG: self.sweep_name,
            JOB_NUM_TAG: str(self.num),
            JOB_OVERRIDES_TAG: self.overrides,
        }

    def run_name(self, kernel: str, planner: str) -> str:
        """A readable parent-run name, unique within the sweep: `gemm-icrl-3`."""
        return f"{kernel}-{planner}-{self.num}"


def sweep_id(sweep_dir: str | os.PathLike[str]) -> str:
    """A stable id for the sweep in `sweep_dir`: its name plus a hash of its absolute path,
    so two sweeps with the same directory name in different places never merge."""
    path = os.path.abspath(sweep_dir)
    digest = hashlib.sha1(path.encode()).hexdigest()[:8]
    return f"{os.path.basename(path.rstrip(os.sep)) or 'sweep'}-{digest}"


def job_identity(overrides: Iterable[str]) -> str:
    """A job's task overrides as one string, sorted so the command line's order does not
    matter, without the keys that do not change the job (NOT_IDENTITY_KEYS)."""
    kept = [o for o in overrides if o.lstrip("+~").split("=", 1)[0] not in NOT_IDENTITY_KEYS]
    return " ".join(sorted(kept))


def current_job(sweep_name: str | None = None) -> SweepJob | None:
    """The job this process runs, when it runs one of a multirun; None for a single run
    (or outside Hydra). `sweep_name` overrides the default name, the sweep directory's."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode
    except ImportError:
        return None
    if not HydraConfig.initialized():
        return None
    hc = HydraConfig.get()
    if hc.mode != RunMode.MULTIRUN:
        return None
    sweep_dir = os.path.abspath(str(hc.sweep.dir))
    return SweepJob(
        sweep_dir=sweep_dir,
        sweep_name=sweep_name or os.path.basename(sweep_dir.rstrip(os.sep)),
        num=int(hc.job.num),
        overrides=job_identity(hc.overrides.task),
        output_dir=os.path.abspath(str(hc.runtime.output_dir)),
    )


# ---------------------------------------------------------------------- job status files


def write_job_file(job: SweepJob, exit_status: int, *, finished: bool, skipped: bool) -> Path:
    """Record how the job ended in `<output_dir>/.argus_job.json`; return its path.

    `finished` means the pipeline ran to its end (MLflow status FINISHED); `skipped`
    that resume=true found it finished before and did not run it again.
    """
    record = {
        "sweep_id": job.sweep_id,
        "job_num": job.num,
        "overrides": job.overrides,
        "exit_status": int(exit_status),
        "finished": bool(finished),
        "skipped": bool(skipped),
        "invocation": os.environ.get(INVOCATION_ENV),
        "time": time.time(),
    }
    path = Path(job.output_dir) / JOB_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record, indent=2))
    tmp.replace(path)  # readers never see half a file
    return path


def read_job_files(sweep_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every readable job status file under `sweep_dir` (a job's subdir may be nested when
    an override's value holds a '/'), each with its `path` added."""
    records = []
    for path in sorted(Path(sweep_dir).rglob(JOB_FILE)):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # a file being replaced, or not ours
        if isinstance(record, dict):
            records.append({**record, "path": str(path)})
    return records


def finished_in_dir(job: SweepJob) -> str | None:
    """The status file of an earlier run of this job (same sweep, same overrides) that ran
    to its end, and whose results.json is still there; None when there is none."""
    for record in read_job_files(job.sweep_dir):
        if (
            record.get("sweep_id") == job.sweep_id
            and record.get("overrides") == job.overrides
            and record.get("finished")
            and (record.get("skipped") or Path(record["path"]).with_name("results.json").is_file())
        ):
            return record["path"]
    return None


def invocation_statuses(sweep_dir: str | os.PathLike[str], invocation: str) -> dict[str, int]:
    """Exit status per job (by overrides) that the `argus` invocation `invocation` ran."""
    return {
        str(r.get("overrides")): int(r.get("exit_status", 1))
        for r in read_job_files(sweep_dir)
        if r.get("invocation") == invocation
    }
