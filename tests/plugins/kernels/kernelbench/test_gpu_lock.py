"""The GPU shared by several checks of a suite run (`evaluate.gpu_slot`, `worker._GpuLock`):
the lock descriptors reach the check's process through the OS sandbox, trials hold the lock
shared, and a timing waits until no trial holds it (and holds it alone)."""

from __future__ import annotations

import fcntl
import sys
import time

from argus_core.sandbox import run_isolated
from argus_plugins.kernels.kernelbench.worker import _GpuLock

CHILD = """
import fcntl, sys, time
from argus_plugins.kernels.kernelbench.worker import _GpuLock
turn, lock, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
gpu = _GpuLock((turn, lock))
t0 = time.monotonic()
gpu.exclusive() if mode == "ex" else gpu.shared()
print(f"{time.monotonic() - t0:.2f}")
"""


def _files(tmp_path):
    return open(tmp_path / "turn.lock", "a+"), open(tmp_path / "timing.lock", "a+")  # noqa: SIM115


def test_a_timing_in_the_sandbox_waits_for_a_trial_holding_the_gpu(tmp_path):
    turn, lock = _files(tmp_path)
    reader_turn, reader_lock = _files(tmp_path)  # another check: its own open files
    trials = _GpuLock((reader_turn.fileno(), reader_lock.fileno()))
    trials.shared()
    fds = (turn.fileno(), lock.fileno())
    start = time.monotonic()

    import threading

    threading.Timer(1.5, trials.release).start()  # the trials end 1.5 s from now
    run = run_isolated(
        [sys.executable, "-c", CHILD, str(fds[0]), str(fds[1]), "ex"],
        b"",
        60,
        what="a lock test",
        pass_fds=fds,
    )
    assert run.returncode == 0, run.stderr
    waited = float(run.stdout.decode().strip())
    assert waited >= 1.0, waited  # it could not time while the trials held the GPU
    assert time.monotonic() - start >= 1.5


def test_trials_share_the_gpu_and_a_timing_holds_it_alone(tmp_path):
    a_turn, a_lock = _files(tmp_path)
    b_turn, b_lock = _files(tmp_path)
    a = _GpuLock((a_turn.fileno(), a_lock.fileno()))
    b = _GpuLock((b_turn.fileno(), b_lock.fileno()))
    a.shared()
    b.shared()  # two checks' trials at once
    c_turn, c_lock = _files(tmp_path)
    probe = c_lock.fileno()
    try:  # an exclusive holder cannot get in while they run
        fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        raise AssertionError("a timing got the GPU during trials")
    except BlockingIOError:
        pass
    a.release()
    b.release()
    a.exclusive()
    try:  # nor a trial while a timing runs
        fcntl.flock(probe, fcntl.LOCK_SH | fcntl.LOCK_NB)
        raise AssertionError("a trial got the GPU during a timing")
    except BlockingIOError:
        pass
    a.release()
    fcntl.flock(probe, fcntl.LOCK_SH | fcntl.LOCK_NB)  # free again


def test_without_descriptors_the_lock_does_nothing():
    gpu = _GpuLock(None)
    gpu.shared()
    gpu.exclusive()
    gpu.release()
