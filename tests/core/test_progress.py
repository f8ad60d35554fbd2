"""The progress display: a bar and per-candidate lines on a terminal, silence elsewhere."""

from __future__ import annotations

import io

from argus_core.progress import BAR_WIDTH, REASON_WIDTH, Progress, candidate_line
from argus_core.types import Candidate, CandidateResult, Policy, TimingReport


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def result(i: int, ms: float | None = None, failure: str | None = None) -> CandidateResult:
    policy = Policy({"BM": 128, "BN": 128, "BK": 64, "G": 8}, {"num_warps": 4, "num_stages": 2})
    cand = Candidate(id=f"c{i:03d}", kernel="gemm", source="", entry="gemm", policy=policy)
    timing = None if ms is None else TimingReport(ms=ms, estimated=True)
    return CandidateResult(cand, index=i, timing=timing, failure=failure)


def drive(progress: Progress) -> None:
    with progress:
        progress.advance(result(1, 0.5))
        progress.advance(result(2, failure="compile: out of registers"))
        progress.advance(result(3, 0.412))


def test_not_a_tty_is_quiet():
    stream = io.StringIO()
    drive(Progress(8, stream=stream))
    assert stream.getvalue() == ""


def test_disabled_on_a_tty_is_quiet():
    stream = FakeTTY()
    drive(Progress(8, stream=stream, enabled=False))
    assert stream.getvalue() == ""


def test_tty_gets_bar_and_lines():
    stream = FakeTTY()
    progress = Progress(8, stream=stream)
    drive(progress)
    out = stream.getvalue()
    assert "\r" in out and out.endswith("\n")
    assert "[1/8] c001 BM128 BN128 BK64 G8 | w4 s2  ok  est 0.500 ms\n" in out
    assert "[2/8] c002 BM128 BN128 BK64 G8 | w4 s2  FAILED compile: out of registers\n" in out
    # what remains on screen: the lines, then the final bar (3 of 8, best so far)
    final_bar = out.rstrip("\n").split("\r")[-1]
    filled = round(3 / 8 * BAR_WIDTH)
    assert final_bar.startswith("[" + "#" * filled + "-" * (BAR_WIDTH - filled) + "]  3/8")
    assert "best est 0.412 ms" in final_bar
    assert progress.done == 3


def test_forced_on_a_pipe_draws():
    stream = io.StringIO()
    drive(Progress(3, stream=stream, enabled=True))
    assert "[" + "#" * BAR_WIDTH + "]  3/3" in stream.getvalue()


def test_long_failure_wraps_and_is_never_cut():
    reason = "verify: " + "counterexample lane=63 k=17 " * 20 + "END"
    text = candidate_line(1, 2, result(1, failure=reason))
    lines = text.splitlines()
    assert len(lines) > 1 and all(len(ln) <= REASON_WIDTH for ln in lines)
    assert lines[-1].endswith("END") and "..." not in text
    assert " ".join(ln.strip() for ln in lines).endswith(" ".join(reason.split()))


def test_measured_time_has_no_est_label():
    r = result(1)
    r.timing = TimingReport(ms=1.25, estimated=False)
    assert candidate_line(1, 1, r).endswith("ok  1.250 ms")


def test_bar_text_counts_without_a_display():
    progress = Progress(4, stream=io.StringIO())
    progress.advance(result(1, 0.5))
    progress.advance(result(2, failure="compile: out of registers"))
    assert progress.bar().startswith("[" + "#" * 20 + "-" * 20 + "]  2/4  best est 0.500 ms  ")


def test_long_failure_on_a_tty_is_drawn_in_full_above_the_bar():
    reason = "verify: " + "counterexample lane=63 k=17 " * 20 + "END"
    stream = FakeTTY()
    with Progress(2, stream=stream) as progress:
        progress.advance(result(1, failure=reason))
    printed = [ln.split("\r")[-1] for ln in stream.getvalue().split("\n")]
    body = [ln for ln in printed if ln and not ln.startswith("[#")]
    assert body[-1].endswith("END") and all(len(ln) <= REASON_WIDTH for ln in body)
    assert " ".join(ln.strip() for ln in body).endswith(" ".join(reason.split()))
