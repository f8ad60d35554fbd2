"""Faults lose nothing (issue #13): SIGTERM, SIGKILL and resume, a full disk, a read-only
run directory, a tracking store that cannot be used, a corrupt values file. Each runs the
real `argus` command in a child process (interpreter backend, no GPU) and checks the exact
outcome: the exit status, the message, and that every candidate that finished is on disk
(results.jsonl, one record per line) and in MLflow."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

FAST = ["+kernel=gemm", "backend=interpret", "verifier=none", "progress=off"]


def _env() -> dict[str, str]:
    env = {**os.environ, "HYDRA_FULL_ERROR": "0"}  # conftest set the offline variables
    env.pop("TRITON_INTERPRET", None)
    return env


def _start(cwd: Path, *args: str, **kw) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "argus_core.cli", *args],
        cwd=cwd,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def _records(run_dir: Path) -> list[dict]:
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]  # every line a whole record


def _run_dirs(cwd: Path) -> list[Path]:
    return sorted((cwd / ".argus" / "runs").iterdir())


def _wait_for_records(cwd: Path, proc: subprocess.Popen[str], n: int, timeout: float = 300):
    """Block until the run in `cwd` has `n` records on disk (the process still running)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        runs = _run_dirs(cwd) if (cwd / ".argus" / "runs").is_dir() else []
        path = runs[-1] / "results.jsonl" if runs else None
        if path is not None and path.is_file() and len(path.read_text().splitlines()) >= n:
            return runs[-1]
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"no {n} records within {timeout} s: {proc.communicate()}")


def _parents(uri: str) -> list:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("argus")
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    return sorted(parents, key=lambda r: r.info.start_time), runs


def test_sigterm_stops_like_ctrl_c_and_records_what_finished(tmp_path):
    uri = f"sqlite:///{tmp_path}/store.db"
    proc = _start(tmp_path, *FAST, "budget=8", f"tracking.uri={uri}")
    _wait_for_records(tmp_path, proc, 1)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, out + err
    assert "terminated (SIGTERM); what finished is recorded" in err
    (run_dir,) = _run_dirs(tmp_path)
    records = _records(run_dir)
    final = json.loads((run_dir / "results.json").read_text())
    assert 1 <= len(records) < 8 and final == records
    (parent,), runs = _parents(uri)
    assert parent.info.status == "KILLED"
    assert len(runs) - 1 == len(records)  # a child run per recorded candidate
    children = [r for r in runs if r is not parent]
    assert all(r.info.end_time >= r.info.start_time for r in children)
    assert "config.yaml" in {a.path for a in _artifacts(uri, parent.info.run_id)}


def _artifacts(uri: str, run_id: str) -> list:
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=uri).list_artifacts(run_id)


def test_kill_9_is_marked_failed_by_the_next_run_which_resumes_it(tmp_path):
    uri = f"sqlite:///{tmp_path}/store.db"
    args = [*FAST, "budget=6", f"tracking.uri={uri}"]
    proc = _start(tmp_path, *args)
    killed_dir = _wait_for_records(tmp_path, proc, 2)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    done = _records(killed_dir)
    assert not (killed_dir / "results.json").exists()
    (parent,), _ = _parents(uri)
    assert parent.info.status == "RUNNING"  # what the kill left behind
    time.sleep(1.1)  # a new second: a new run directory

    resumed = subprocess.run(
        [sys.executable, "-m", "argus_core.cli", *args, "resume=true"],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert f"resuming the killed run in {killed_dir}: {len(done)} candidates done" in (
        resumed.stdout
    )
    new_dir = _run_dirs(tmp_path)[-1]
    final = json.loads((new_dir / "results.json").read_text())
    assert len(final) == 6
    for old, new in zip(done, final):  # replayed as they were, not evaluated again
        assert new["candidate"]["id"] == old["candidate"]["id"]
        assert new["seconds"] == old["seconds"] and new["timing"] == old["timing"]
    (dead, alive), _ = _parents(uri)
    assert dead.info.status == "FAILED" and alive.info.status == "FINISHED"
    assert "ended without closing this run" in dead.data.tags["mlflow.note.content"]


def _small_file_limit(limit: int):
    def apply() -> None:
        _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))

    return apply


def test_a_full_disk_keeps_every_finished_record_and_exits_non_zero(tmp_path):
    # `ulimit -S -f 20`: no file of the run may grow past 20 KiB, as on a full disk
    proc = _start(
        tmp_path, *FAST, "budget=5", "tracking=none", preexec_fn=_small_file_limit(20 * 1024)
    )
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 3, out[-3000:] + err[-3000:]
    assert "argus: not recorded: results: cannot append to" in err
    assert "File too large" in err
    (run_dir,) = _run_dirs(tmp_path)
    records = _records(run_dir)  # whole records only: the failed one was cut back
    assert 1 <= len(records) < 5
    # the records that fit, in order (a smaller later record may still fit under the limit)
    index = [r["index"] for r in records]
    assert index[0] == 0 and index == sorted(set(index)) and set(index) < set(range(5))
    # results.json is whole or absent, never truncated; no temporary file is left
    assert not (run_dir / "results.json").exists()
    assert not [p for p in run_dir.iterdir() if p.name.endswith(".tmp")]
    assert "c005" in out  # the run went on and showed every candidate


def test_a_read_only_run_directory_is_refused_before_anything_runs(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ro)])
    if mounted.returncode != 0:
        pytest.skip("cannot mount a read-only tmpfs here (needs root and mount rights)")
    try:
        uri = f"sqlite:///{tmp_path}/store.db"
        proc = _start(tmp_path, *FAST, "budget=1", f"tracking.uri={uri}", f"hydra.run.dir={ro}/r")
        out, err = proc.communicate(timeout=300)
    finally:
        subprocess.run(["umount", str(ro)], check=True)
    assert proc.returncode == 2, out + err
    assert f"hydra.run.dir='{ro}/r': cannot write in {ro} (Read-only file system)" in err
    assert not Path(tmp_path, "store.db").exists()  # nothing started


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("sqlite:////nonexistent/dir/x.db", "does not exist: /nonexistent/dir"),
        ("ftp://example.invalid/store", "ftp"),
    ],
)
def test_tracking_that_cannot_start_stops_the_run(tmp_path, uri, expected):
    proc = _start(tmp_path, *FAST, "budget=1", f"tracking.uri={uri}")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 3, out + err
    assert "argus: tracking failed at start:" in err and expected in err
    assert "tracking=none" in err
    assert not Path("/nonexistent").exists()
    (run_dir,) = _run_dirs(tmp_path)
    assert not (run_dir / "results.jsonl").exists()  # no candidate ran


def test_a_corrupt_values_file_stops_an_icrl_run_naming_it(tmp_path):
    values = tmp_path / "icrl_values.json"
    values.write_bytes(
        b'{"version": 1, "tables": {"gemm/mi300x": {"a": {"count": -3, "sum": NaN}}}}'
    )
    before = values.read_bytes()
    proc = _start(
        tmp_path, *FAST, "budget=2", "tracking=none", "planner=icrl",
        f"planner.options.values_path={values}",
    )  # fmt: skip
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, out + err
    assert f"planner.options.values_path='{values}'" in err
    assert "tables.gemm/mi300x.a.count" in err and "-3" in err
    assert values.read_bytes() == before  # not "repaired" by overwriting


def test_a_tracking_failure_mid_run_is_reported_and_makes_the_exit_non_zero(tmp_path):
    from argus_core.tracking.mlflow_tracker import open_client

    store = tmp_path / "store.db"
    uri = f"sqlite:///{store}"
    open_client(uri).create_experiment("argus")  # the store exists; it may grow 16 KiB more
    limit = store.stat().st_size + 16 * 1024
    proc = _start(
        tmp_path, *FAST, "budget=6", f"tracking.uri={uri}", preexec_fn=_small_file_limit(limit)
    )
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 3, out[-3000:] + err[-3000:]
    assert "argus: not recorded: tracking: " in err and "disk I/O error" in err
    assert "MLflow tracking incomplete:" in out
    (run_dir,) = _run_dirs(tmp_path)
    records = _records(run_dir)  # the run went on: every candidate is on disk
    assert len(records) == 6 and json.loads((run_dir / "results.json").read_text()) == records
