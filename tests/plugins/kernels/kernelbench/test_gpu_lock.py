"""A GPU shared by several checks of a suite run (`evaluate.gpu_slot`, `evaluate.GpuShare`):
the locks are held by the process that starts the sandboxed checks, which ask for the GPU
through a gate of two pipes (`GpuShare.gate`, `worker._Gate`); uses of the GPU hold it
shared, a timing waits until no use holds it and then holds it alone, while a timing waits
no new use gets in, and what a dead process held is released."""

from __future__ import annotations

import fcntl
import sys
import threading
import time

import pytest

from argus_core.sandbox import isolation_problem, run_isolated
from argus_plugins.kernels.kernelbench import evaluate
from argus_plugins.kernels.kernelbench.evaluate import GpuShare


def _probe(folder, mode):
    """True when an outsider could take the GPU's lock in `mode` right now."""
    with open(folder / "gpu0.timing.lock", "a+") as f:
        try:
            fcntl.flock(f, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(f, fcntl.LOCK_UN)
        return True


def test_checks_share_the_gpu_and_a_timing_holds_it_alone(tmp_path):
    a, b = GpuShare(str(tmp_path), 0), GpuShare(str(tmp_path), 0)
    with a.shared(), b.shared():  # two checks at once
        assert not _probe(tmp_path, fcntl.LOCK_EX)  # no timing while they run
        assert _probe(tmp_path, fcntl.LOCK_SH)
    with a.exclusive():
        assert not _probe(tmp_path, fcntl.LOCK_SH)  # no check while a timing runs
    assert _probe(tmp_path, fcntl.LOCK_EX)  # free again


def test_a_waiting_timing_keeps_new_checks_out(tmp_path):
    check, timing, late = (GpuShare(str(tmp_path), 0) for _ in range(3))
    order: list[str] = []
    with check.shared():
        t = threading.Thread(target=lambda: _hold(timing.exclusive(), order, "timing", 0.3))
        t.start()
        time.sleep(0.3)  # the timing now waits, holding the turnstile
        u = threading.Thread(target=lambda: _hold(late.shared(), order, "late check", 0.0))
        u.start()
        time.sleep(0.3)
        assert order == []  # neither got in while the first check runs
    t.join(10)
    u.join(10)
    assert order == ["timing", "late check"]  # the timing first: writers are preferred
    assert timing.waited > 0 and late.waited > 0


def _hold(ctx, order, name, seconds):
    with ctx:
        order.append(name)
        time.sleep(seconds)


def test_gpu_slot_gives_a_share_only_to_shared_gpus(tmp_path, monkeypatch):
    monkeypatch.setenv(evaluate.GPU_SLOTS_ENV, str(tmp_path))
    with evaluate.gpu_slot("cpu") as (where, share):
        assert (where, share) == ("cpu", None)
    monkeypatch.setenv(evaluate.CHECKS_PER_GPU_ENV, "1")
    with evaluate.gpu_slot("cuda") as (where, share):
        assert where == "cuda:0" and share is None  # the slot alone is exclusive
    monkeypatch.setenv(evaluate.CHECKS_PER_GPU_ENV, "3")
    with evaluate.gpu_slot("cuda") as (w1, s1), evaluate.gpu_slot("cuda") as (w2, s2):
        assert w1 == w2 == "cuda:0" and isinstance(s1, GpuShare) and isinstance(s2, GpuShare)


CHILD = """
import sys, time
from argus_plugins.kernels.kernelbench.worker import _Gate
gate = _Gate((int(sys.argv[1]), int(sys.argv[2])))
with gate.held(sys.argv[3].encode()):
    print(f"{time.time():.6f}")  # when it got the GPU
"""


@pytest.mark.skipif(isolation_problem() is not None, reason="needs the OS sandbox")
def test_a_sandboxed_timing_waits_at_its_gate_for_a_check_holding_the_gpu(tmp_path):
    other, mine = GpuShare(str(tmp_path), 0), GpuShare(str(tmp_path), 0)
    trial = other.shared()  # another check's trial holds the GPU for a while
    trial.__enter__()
    released: list[float] = []

    def release() -> None:
        released.append(time.time())  # before the unlock: no grant can precede it
        trial.__exit__(None, None, None)

    timer = threading.Timer(1.5, release)
    timer.start()
    with mine.gate() as fds:
        run = run_isolated([sys.executable, "-c", CHILD, str(fds[0]), str(fds[1]), "x"], b"",
                           60, what="a gate test", pass_fds=fds)  # fmt: skip
    timer.join()
    assert run.returncode == 0, run.stderr
    assert float(run.stdout.decode().strip()) >= released[0]  # not during the trial
    assert _probe(tmp_path, fcntl.LOCK_EX)  # and nothing is left held once it exited


@pytest.mark.skipif(isolation_problem() is not None, reason="needs the OS sandbox")
def test_what_a_killed_process_held_is_released(tmp_path):
    share = GpuShare(str(tmp_path), 0)
    hang = CHILD.replace("print(", "time.sleep(60); print(")
    with share.gate() as fds:
        run = run_isolated([sys.executable, "-c", hang, str(fds[0]), str(fds[1]), "x"], b"",
                           3, what="a gate test", pass_fds=fds)  # fmt: skip
        assert run.timed_out
    assert _probe(tmp_path, fcntl.LOCK_SH)  # the GPU is free for the next check


def test_a_check_out_of_memory_on_a_shared_gpu_runs_again_with_it_alone(tmp_path, monkeypatch):
    import contextlib

    from argus_core.types import CorrectnessReport

    share = GpuShare(str(tmp_path), 0)

    @contextlib.contextmanager
    def slot(device):
        yield "cpu", share

    calls = []

    def ask(request, runner, timeout_s, gate):
        alone = not _probe(tmp_path, fcntl.LOCK_SH)  # nobody else may use the GPU now
        calls.append((gate is not None, alone))
        if len(calls) == 1:
            return {"ok": False, "error": "memory: out of device memory during the check"}, "", 1.0
        return {"ok": True, "error": "", "unseen": [], "phases": {}}, "", 2.0

    monkeypatch.setattr(evaluate, "gpu_slot", slot)
    monkeypatch.setattr(evaluate, "_ask_worker", ask)
    task = tmp_path / "t.py"
    task.write_text("")
    report = CorrectnessReport(ok=False, runner="interpret")
    out = evaluate._check_dsl(str(task), {}, report, "fp32", 1, 0, 42, 60, None)
    assert calls == [(True, False), (False, True)]  # shared through the gate, then alone
    assert out.ok and out.phases["shared_check"] == 1.0 and out.phases["check"] == 2.0
