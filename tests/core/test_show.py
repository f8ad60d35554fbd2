"""`argus show [RUN] [CANDIDATE]`: a candidate's failure, counterexamples and errors in full,
from the run directory's records (also those of a run that was killed before it ended)."""

from __future__ import annotations

from argus_core.cli import main
from argus_core.tracking.results import ResultsLog
from argus_core.types import Candidate, CandidateResult, Policy, VerifyReport

LONG = "verify: loads of a are out of bounds at " + "lane 63, k = 4095; " * 12 + "END"


def _results() -> list[CandidateResult]:
    def cand(i: int) -> Candidate:
        return Candidate(f"c00{i}", "gemm", "src", "gemm", Policy({"BM": 64 * i}))

    cex = {"lane": 63, "k": 4095, "row": 4096, "note": "past M"}
    return [
        CandidateResult(cand(1), 0, failure=LONG, verify=VerifyReport("violated", [cex])),
        CandidateResult(cand(2), 1),
    ]


def test_show_prints_the_whole_failure_and_counterexample(tmp_path, capsys, monkeypatch):
    run_dir = tmp_path / ".argus" / "runs" / "2026-01-01_00-00-00"
    run_dir.mkdir(parents=True)
    log = ResultsLog(run_dir)
    for res in _results():
        log.append(res)  # a killed run: records only, no results.json
    monkeypatch.chdir(tmp_path)
    assert main(["show"]) == 0  # the newest run
    out = capsys.readouterr().out
    assert f"Run directory: {run_dir}  (2 candidates)" in out
    joined = " ".join(line.strip() for line in out.splitlines())
    assert " ".join(LONG.split()) in joined and "..." not in out
    assert '"lane": 63' in out and '"note": "past M"' in out
    assert main(["show", str(run_dir), "c002"]) == 0
    one = capsys.readouterr().out
    assert "c002 (#1) BM128" in one and "c001" not in one and "status: ok" in one


def test_show_names_a_bad_candidate_and_the_valid_ones(tmp_path, capsys):
    ResultsLog(tmp_path).write_final(_results())
    assert main(["show", str(tmp_path), "c009"]) == 2
    assert "no candidate 'c009' in this run; valid choices: c001, c002" in capsys.readouterr().err
    assert main(["show", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_version(capsys):
    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("argus ") and "hydra-core " in out and "triton " in out


def test_a_second_run_in_the_same_directory_does_not_append_to_the_first(tmp_path):
    from argus_core.tracking.results import load_records

    first, second = ResultsLog(tmp_path), ResultsLog(tmp_path)
    assert first.begin() is None
    for res in _results():
        first.append(res)
    old = second.begin()
    assert (
        old is not None
        and old.name == "results.jsonl.1.old"
        and len(old.read_text().splitlines()) == 2
    )
    second.append(_results()[1])
    assert [r["candidate"]["id"] for r in load_records(tmp_path)] == ["c002"]


def test_show_names_the_stages_taken_from_the_result_cache(tmp_path, capsys):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    log = ResultsLog(run_dir)
    first, second = _results()
    log.append(first, cache=[])
    log.append(second, cache=["verify", "compile", "check"])
    log.write_final([first, second])
    assert main(["show", str(run_dir), "c002"]) == 0
    assert "from the result cache: verify, compile, check" in capsys.readouterr().out
    assert main(["show", str(run_dir), "c001"]) == 0
    assert "result cache" not in capsys.readouterr().out
