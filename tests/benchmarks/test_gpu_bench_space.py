"""benchmarks/gpu_bench.py --space without a GPU: the cheapest cases first, each policy
timed as its compile finishes (twins once), what the time limit cut recorded as not timed,
and planner_bench replaying the fullest recording of a case."""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_bench as gb  # noqa: E402
import planner_bench as pb  # noqa: E402


def _done(value):
    f = Future()
    f.set_result(value)
    return f


def test_spaces_are_recorded_cheapest_first():
    cases = gb.cases()
    for c in cases:
        c.policies = [{}] * {"gemm": 10, "attention": 10, "moe": 10}[c.family]
    order = gb.space_order(cases)
    costs = [len(c.policies) * gb.SPACE_COST[c.family] for c in order]
    assert costs == sorted(costs) and order[0].family == "gemm" and order[-1].family == "moe"


def test_a_space_is_timed_as_compiled_with_twins_once_and_the_cut_recorded(monkeypatch):
    case = next(c for c in gb.cases() if c.name == "skinny 16x4096x4096")
    case.policies = [dict(BM=16, BN=bn, BK=128, GROUP=8, w=4, s=3) for bn in (32, 64, 128, 256)]
    futures = [
        _done({"ok": True, "digest": "a", "compile": {"registers": 64}}),
        _done({"ok": False, "error": "OutOfResources: out of resource: shared memory"}),
        _done({"ok": True, "digest": "a", "compile": {"registers": 64}}),  # the first's twin
        Future(),  # still compiling when the time limit comes
    ]
    monkeypatch.setattr(gb, "lower_all", lambda *a, **k: [])
    monkeypatch.setattr(gb, "runner", lambda *a, **k: None)
    prepared, timed = [], []

    def prepare(family, shape, dtype, seed, l2):
        prepared.append(shape)
        return SimpleNamespace(builds=1)

    def measure(family, run_on, shape, dtype, seed, l2, warmup_ms, rep_ms, prepared):
        timed.append(prepared)
        return {"ms": 0.02, "baselines": {"cuBLAS": 0.021}, "check": {"ok": True, "why": ""}}

    import torch  # noqa: F401  (imported before the clock starts, as the family)

    gb.family_of(case.family)
    deadline = time.time() + 3  # the last compile never finishes: 3 s, then recorded as cut
    res = gb._time_space(case, futures, 60 << 20, deadline, None, measure, prepare)
    tried = res["tried"]
    assert len(prepared) == 1 and len(timed) == 1  # inputs built once; the twin not re-timed
    assert tried[0]["ms"] == 0.02 and tried[2]["same_as"] == case.policies[0]
    assert "shared memory" in tried[1]["error"]
    assert tried[3]["error"].startswith("not timed")  # planner_bench: not a recorded failure
    assert res["best"]["baselines"] == {"cuBLAS": 0.021} and res["space_size"] == 4
    assert res["input_builds"] == 1


def test_repeated_rounds_keep_each_policys_median_and_a_failed_round_fails_it(monkeypatch):
    case = next(c for c in gb.cases() if c.name == "skinny 16x4096x4096")
    case.policies = [dict(BM=16, BN=bn, BK=128, GROUP=8, w=4, s=3) for bn in (32, 64, 128, 256)]
    futures = [
        _done({"ok": True, "digest": "a"}),
        _done({"ok": True, "digest": "b"}),
        _done({"ok": True, "digest": "a"}),  # the first's twin: timed with it, every round
        _done({"ok": True, "digest": "c"}),
    ]
    monkeypatch.setattr(gb, "lower_all", lambda *a, **k: [])
    # each policy's run_on names it; rounds: a 3, 1, 2 (median 2); b 1.5 always; c fails once
    monkeypatch.setattr(gb, "runner", lambda f, k, tiles, compiler: tiles)
    times = {"a": [3.0, 1.0, 2.0], "b": [1.5, 1.5, 1.5], "c": [1.0, None, 1.0]}
    key = {32: "a", 64: "b", 256: "c"}
    calls = []

    def measure(family, run_on, shape, dtype, seed, l2, warmup_ms, rep_ms, prepared, **kw):
        name = key[run_on["BN"]] if isinstance(run_on, dict) else "a"
        calls.append((name, kw.get("with_baselines", True)))
        ms = times[name][sum(1 for c in calls if c[0] == name) - 1]
        return {"ms": ms, "tflops": 10.0 / ms if ms else None, "baselines": {"cuBLAS": 1.0}}

    monkeypatch.setattr(gb, "split", lambda case, p: ({"BN": p["BN"]}, {}))
    gb.family_of(case.family)
    res = gb._time_space(
        case,
        futures,
        60 << 20,
        time.time() + 60,
        None,
        measure,
        lambda *a: SimpleNamespace(builds=1),
        repeat=3,
    )
    a, b, twin, c = res["tried"]
    assert a["ms_rounds"] == [3.0, 1.0, 2.0] and a["ms"] == 2.0
    assert abs(a["tflops"] - 5.0) < 1e-9  # the rate follows the median
    assert twin["ms"] == 2.0 and twin["ms_rounds"] == a["ms_rounds"]
    assert c["ms"] is None and c["failed_round"] == 1
    assert res["best"]["ms"] == 1.5 and res["best"]["policy"] == case.policies[1]
    assert (
        len(calls) == 9 and [c for c in calls if not c[1]] == calls[3:]
    )  # rounds 2-3: no baselines


def test_planner_bench_replays_the_fullest_recording_of_a_case(tmp_path):
    def run(name, timed):
        tried = [{"policy": {"BM": 16}, "ms": 1.0}] * timed + [{"policy": {}, "error": "x"}]
        path = tmp_path / name
        path.write_text(
            json.dumps({"meta": {"n": timed}, "cases": [{"name": "c", "tried": tried}]})
        )
        return path

    full, partial = run("a.json", 5), run("b.json", 2)  # b sorts later but timed less
    measured, metas = pb.load_measured([full, partial])
    assert sum(1 for t in measured["c"]["tried"] if t.get("ms")) == 5
    assert set(metas) == {"a.json", "b.json"}


def test_planner_bench_replays_the_recording_that_covers_the_current_space():
    """An old run of a larger space (many policies the space no longer has, a time limit's
    leftovers) loses to a later run that reached every point of the current space, though
    the old one timed more; each recording counts only the current points it reached."""
    from argus_core.types import Policy

    points = [Policy({"BM": bm}, {"num_warps": 4}) for bm in (16, 32, 64)]

    def rec(policies, name):
        return {"name": name, "tried": policies}

    def t(bm, ms=None, error=""):
        return {"policy": {"BM": bm, "w": 4}, "ms": ms, "error": error}

    old = rec([t(16, 1.0), t(32, 1.1), t(128, 0.9), t(256, 0.8), t(64, error="not timed: x")], "o")
    new = rec([t(16, 1.0), t(32, 1.1), t(64, error="OutOfResources")], "n")
    assert pb.fullest([old, new], points) is new  # 3 current points reached against 2
    grown = rec([t(16, 1.0), t(32, 1.1), t(64, 0.7)], "g")
    assert pb.fullest([grown, new], points) is grown  # a tie on reach: the more timed
    assert pb.fullest([new, rec(list(new["tried"]), "later")], points)["name"] == "later"
