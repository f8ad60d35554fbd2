"""The end-of-run table: columns, the estimated-time footnote, failures, the best mark."""

from __future__ import annotations

from argus_core.summary import (
    ESTIMATED_FOOTNOTE,
    best_result,
    failure_parts,
    format_ms,
    is_correct,
    render_reasons,
    render_table,
)
from argus_core.types import (
    Candidate,
    CandidateResult,
    CompileReport,
    CorrectnessReport,
    Policy,
    TimingReport,
)


def result(
    cid: str,
    ms: float | None,
    correct: bool | None = True,
    failure: str | None = None,
    registers: int | None = 96,
) -> CandidateResult:
    policy = Policy({"BM": 128, "BN": 128, "BK": 64, "G": 8}, {"num_warps": 4, "num_stages": 2})
    cand = Candidate(id=cid, kernel="gemm", source="", entry="gemm", policy=policy)
    compile_report = CompileReport(
        "gfx942",
        ok=True,
        registers=registers,
        spills=0,
        occupancy=4,
        shared_bytes=65536,
        mma_count=128,
    )
    correctness = None if correct is None else CorrectnessReport(ok=correct)
    timing = None if ms is None else TimingReport(ms=ms, estimated=True)
    return CandidateResult(
        cand, compile=compile_report, correctness=correctness, timing=timing, failure=failure
    )


def rows(table: str) -> dict[str, str]:
    return {line.split()[0]: line for line in table.splitlines()[2:] if line[:1] == "c"}


def cells(table: str) -> dict[str, dict[str, str]]:
    """{candidate: {header: cell}}, cut at the column spans of the dashed rule line."""
    lines = table.splitlines()
    spans, start = [], 0
    for dashes in lines[1].split("  "):
        spans.append((start, start + len(dashes)))
        start += len(dashes) + 2
    heads = [lines[0][a:b].strip() for a, b in spans]
    return {
        line.split()[0]: {h: line[a:b].strip() for h, (a, b) in zip(heads, spans)}
        for line in lines[2:]
        if line[:1] == "c"
    }


def sample() -> list[CandidateResult]:
    return [
        result("c000", 0.5),
        result("c001", 0.412),
        result("c002", 0.3, correct=False, failure="correctness: max abs err 3.1"),
        result("c003", None, correct=None, failure="compile: out of registers", registers=None),
    ]


def test_estimated_header_and_footnote():
    table = render_table(sample(), estimated=True)
    header = table.splitlines()[0]
    assert "est. ms*" in header and table.splitlines()[-1] == ESTIMATED_FOOTNOTE
    for name in (
        "candidate",
        "policy",
        "correct?",
        "VGPRs",
        "spills",
        "LDS bytes",
        "occupancy",
        "MFMA count",
        "status",
    ):
        assert name in header


def test_measured_has_no_footnote():
    table = render_table(sample(), estimated=False)
    assert ESTIMATED_FOOTNOTE not in table and "*" not in table
    assert table.splitlines()[0].split()[-2:] == ["ms", "status"]


def test_failed_rows_show_stage_and_dashes():
    r = rows(render_table(sample(), estimated=True))
    assert r["c003"].endswith("FAILED compile")
    assert r["c002"].endswith("FAILED correctness")
    c = cells(render_table(sample(), estimated=True))["c003"]
    assert (c["correct?"], c["VGPRs"], c["est. ms*"]) == ("-", "-", "-")
    assert c["MFMA count"] == "128" and c["policy"] == "BM128 BN128 BK64 G8 | w4 s2"
    assert cells(render_table(sample(), estimated=True))["c002"]["correct?"] == "no"


def test_best_is_fastest_correct_not_fastest():
    r = rows(render_table(sample(), estimated=True))
    assert r["c001"].endswith("BEST") and r["c000"].endswith("ok")
    assert " 0.412 " in r["c001"] and " 0.300 " in r["c002"]


def test_columns_align():
    lines = render_table(sample(), estimated=True).splitlines()[:-1]
    status_at = lines[0].index("status")
    assert all(len(line) >= status_at for line in lines)
    assert {line[status_at - 2 : status_at] for line in lines[2:]} == {"  "}
    time_end = lines[0].index("est. ms*") + len("est. ms*")
    assert lines[3][:time_end].endswith("0.412")  # right-aligned numbers


def test_empty():
    table = render_table([], estimated=False)
    assert table.splitlines()[-1] == "(no candidates)"


def test_helpers():
    res = sample()
    assert failure_parts(res[3]) == ("compile", "out of registers")
    assert failure_parts(res[0]) == ("", "")
    assert [is_correct(r) for r in res] == [True, True, False, False]
    assert best_result(res) is res[1]
    assert best_result([res[2], res[3]]) is None
    assert (
        format_ms(None) == "-" and format_ms(1.23456) == "1.235" and format_ms(0.01234) == "0.01234"
    )


def test_reasons_are_wrapped_in_full_never_cut():
    cex = "counterexample: lane=17 k=63 row=4095 col=4096 out of bounds of c[M, N]; " * 6
    failed = result("c009", None, correct=None, failure=f"verify: {cex}\nsecond line END")
    text = render_reasons([*sample(), failed], width=80)
    lines = text.splitlines()
    assert lines[0] == "Failures:"
    assert lines[1].startswith("c002  correctness: ") and "c003  compile: out of registers" in text
    assert all(len(ln) <= 80 for ln in lines) and "..." not in text
    joined = " ".join(ln.strip() for ln in lines)
    assert " ".join(cex.split()) in joined and joined.endswith("second line END")


def test_no_reasons_when_nothing_failed():
    assert render_reasons([r for r in sample() if r.failure is None]) == ""
