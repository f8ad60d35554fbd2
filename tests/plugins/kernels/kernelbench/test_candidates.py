"""Candidates checked against a task's Model in the child worker (interpreter, fresh inputs,
poisoned outputs, one permuted+scaled trial, a time limit): hacks fail, correct ones pass."""

from __future__ import annotations

from pathlib import Path

from argus_plugins.kernels.kernelbench.evaluate import check_candidate

TASKS = Path(__file__).parents[3] / "kernelbench_tasks"
SQUARE = TASKS / "level1" / "1_square_matmul.py"
CANDIDATES = Path(__file__).with_name("candidates")


def check(name: str, timeout_s: float = 60.0, trials: int = 3):
    path = CANDIDATES / name
    cand = {"kind": "modelnew", "source": path.read_text(), "filename": str(path)}
    return check_candidate(str(SQUARE), cand, trials=trials, seed=0, timeout_s=timeout_s)


def test_a_correct_modelnew_triton_kernel_passes():
    report = check("good_matmul.py")
    assert report.ok, report.error
    assert report.max_abs_err is not None and report.max_abs_err < 1e-3


def test_a_constant_output_fails_the_first_trial():
    report = check("hack_constant.py")
    assert not report.ok and report.error.startswith("trial 0")


def test_an_answer_precomputed_from_the_seed_a_run_used_to_draw_fails_the_first_trial():
    # the trial seeds are fresh random bits on every check: the seed it guessed is not used
    report = check("hack_cached.py")
    assert not report.ok
    assert report.error.startswith("trial 0"), report.error


def test_a_kernel_that_writes_part_of_the_output_is_caught_by_poisoning():
    report = check("hack_partial_write.py", trials=1)
    assert not report.ok and "NaN: never written" in report.error


def test_compute_the_ast_cannot_see_trips_the_runtime_guard():
    report = check("hack_builtin_abs.py", trials=1)
    assert not report.ok and report.error.startswith("guard:") and "'abs'" in report.error


def test_a_hanging_candidate_times_out_and_the_caller_goes_on():
    report = check("hack_hang.py", timeout_s=8, trials=1)
    assert not report.ok and report.error == "timeout after 8s"
    assert check("good_matmul.py", trials=1).ok  # the next candidate runs as usual


def test_static_rejection_happens_before_any_child_runs(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text((CANDIDATES / "good_matmul.py").read_text().replace("return C", "return A @ B"))
    cand = {"kind": "modelnew", "source": bad.read_text(), "filename": str(bad)}
    report = check_candidate(str(SQUARE), cand, trials=1)
    assert not report.ok and report.error.startswith("static: line") and ": @:" in report.error
    assert report.seconds == 0.0
