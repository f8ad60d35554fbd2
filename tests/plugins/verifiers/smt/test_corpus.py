"""The planted-bug corpus: every bug is `violated` at the right line with a counterexample
whose values replay concretely; every correct kernel is `verified` (no false alarm)."""

from __future__ import annotations

import pathlib

import pytest

from argus_core.ir import Dot, Load, Loop, Store
from tests.plugins.verifiers.smt.conftest import (
    HERE,
    check_cause,
    expected,
    program_env,
    verify,
)

PLANTED = sorted((HERE / "planted").glob("*.py"))
CORRECT = sorted((HERE / "correct").glob("*.py"))


def test_corpus_size():
    assert len(PLANTED) >= 15


@pytest.mark.parametrize("path", CORRECT, ids=lambda p: p.stem)
def test_correct_kernels_verify(path: pathlib.Path):
    _ir, _pol, report = verify(path)
    assert report.status == "verified", report.summary
    assert report.counterexamples == [] and report.assertions > 5


def _op_at(ir, line: int, kind):
    ops = [op for op in ir.walk() if op.point.line == line and isinstance(op, kind)]
    assert ops, f"no {kind.__name__} at line {line}"
    return ops[0]


def _producer(ir, value):
    return next((op for op in ir.walk() if getattr(op, "out", None) is value), None)


def _summed_k(ir, pol, cex, env, reset: bool) -> set[int]:
    """Brute force: the K coordinates summed into the counterexample's output element, by
    every program that writes it (split-K: all splits), replayed in Python."""
    loop = next(op for op in ir.walk() if isinstance(op, Loop))
    store = next(op for op in ir.walk() if isinstance(op, Store))
    target = [_eval(c, env) for c in store.view.coords]
    bk, grid = pol.tiles["BK"], _eval(ir.grid[0], env)
    summed: set[int] = set()
    for pid in range(grid):
        penv = program_env(ir, pol, {**cex, "program_id": pid})
        if [_eval(c, penv) for c in store.view.coords] != target:
            continue
        ks = list(range(_eval(loop.start, penv), _eval(loop.stop, penv), _eval(loop.step, penv)))
        for k in ks[-1:] if reset else ks:
            summed |= {k * bk + kk for kk in range(bk) if k * bk + kk < env["K"]}
    return summed


def _eval(e, env):
    return e if isinstance(e, int) else e.evaluate(env)


@pytest.mark.parametrize("path", PLANTED, ids=lambda p: p.stem)
def test_planted_bug_is_caught(path: pathlib.Path, cause_ranks):
    ir, pol, report = verify(path)
    cause_ranks.put(path, report)
    assertion, line = expected(path)
    assert report.status == "violated", report.summary
    hits = [c for c in report.counterexamples if c["assertion"] == assertion]
    assert hits, f"expected {assertion}, got {[c['assertion'] for c in report.counterexamples]}"
    cex = hits[0]
    pp = cex["program_point"]
    assert (pathlib.Path(pp["file"]).name, pp["line"]) == (path.name, line)
    assert cex["text"] and f"{path.name}:{line}" in cex["text"]
    assert report.summary.startswith(report.counterexamples[0]["text"])
    check_cause(cex, path)
    env = program_env(ir, pol, cex)
    lhs, rhs = cex["lhs"], cex["rhs"]
    if assertion in ("bounds", "store_cover"):
        op = _op_at(ir, line, (Load, Store))
        coords = [_eval(c, env) for c in op.view.coords]
        dims = [env[d.name] for d in op.view.tensor.dims]
        assert coords == lhs and dims == rhs
        inside = all(0 <= c < d for c, d in zip(coords, dims))
        assert inside == (assertion == "store_cover")
        if assertion == "store_cover":  # the element really is masked off
            assert not _eval(op.mask, env)
    elif assertion == "layout":
        op = _op_at(ir, line, Load)
        coords = [_eval(c, env) for c in op.view.coords]
        true = sum(c * env[s.name] for c, s in zip(coords, op.view.tensor.strides))
        assert (lhs, rhs) == ([_eval(op.view.offset, env)], [true]) and lhs != rhs
    elif assertion == "store_tag":
        op = _op_at(ir, line, Store)
        assert lhs == [_eval(c, env) for c in op.view.coords]
        # the value is the GEMM accumulator: its tag is the product's (row of a's tile,
        # column of b's tile), replayed from the loads the dot multiplies
        i, j = cex["element"]
        dot = next(op for op in ir.walk() if isinstance(op, Dot))
        xa, yb = _producer(ir, dot.a), _producer(ir, dot.b)
        row = _eval(xa.view.coords[0], {**env, "_i0": i, "_i1": 0})
        col = _eval(yb.view.coords[1], {**env, "_i0": 0, "_i1": j})
        assert rhs == [row, col] and lhs != rhs
    elif assertion == "dot_contract":
        dot = _op_at(ir, line, Dot)
        i, j = cex["element"]
        kk = cex["k_element"]
        for side, val, e_env, dim in (
            ("a", dot.a, {"_i0": i, "_i1": kk}, 1),
            ("b", dot.b, {"_i0": kk, "_i1": j}, 0),
        ):
            load = _producer(ir, val)
            if (
                isinstance(load, Load)
                and not getattr(load.view, "_permuted", False)
                and "permute" not in load.view.desc
            ):
                got = _eval(load.view.coords[dim], {**env, **e_env})
                assert got == (lhs if side == "a" else rhs)[0], side
        assert lhs != rhs
    elif assertion in ("contraction_gap", "contraction_start"):
        k_ext = rhs[0]
        assert 0 <= lhs[0] < k_ext and k_ext == env["K"]
        assert lhs[0] not in _summed_k(ir, pol, cex, env, reset="reset" in path.stem)
    elif assertion == "contraction_once":
        # two products: of other (program, k-element, iteration), or of two different dots
        first, second = cex["contributions"]
        assert lhs == rhs and (cex["this"] != cex["other"] or first != second)
    elif assertion == "store_once":
        assert lhs != [cex["program_id"], *cex["element"]]
        op = _op_at(ir, line, Store)
        other = program_env(ir, pol, {**cex, "program_id": lhs[0], "element": lhs[1:]})
        mine = [_eval(c, env) for c in op.view.coords]
        assert mine == [_eval(c, other) for c in op.view.coords]  # both really land there
        assert _eval(op.mask, env) and _eval(op.mask, other)
    else:
        assert lhs != rhs


def test_counterexamples_are_minimal():
    """The loop that stops one K tile early fails first at K = BK + 1 (two tiles, one
    visited), program 0, element (0, 0), M = N = 1: the minimized counterexample says so,
    where z3's first model need not; with every shape <= BK it does not fail at all."""
    path = HERE / "planted" / "k_loop_short.py"
    _ir, _pol, report = verify(path)
    cex = next(c for c in report.counterexamples if c["assertion"] == "contraction_gap")
    assert cex["minimized"]
    assert cex["shapes"] == {"M": 1, "K": 33, "N": 1}
    assert (cex["program_id"], cex["element"]) == (0, [0, 0])
    _ir, _pol, smaller = verify(path, {"options": {"max_extent": 32}})
    assert not [c for c in smaller.counterexamples if c["assertion"] == "contraction_gap"]


ALL_PLANTED = sorted(HERE.glob("**/planted/*.py"))


def test_corpus_has_sixty_planted_bugs_over_every_family():
    families = {p.parent.parent.name for p in ALL_PLANTED}  # smt/ holds the GEMM ones
    # frontend/: the KernelBench front end's emitted kernels (frontend/test_frontend_corpus.py)
    assert len(ALL_PLANTED) >= 60 and families == {"smt", "attention", "moe", "frontend"}


@pytest.mark.slow
def test_the_likely_cause_is_the_planted_mistake_in_most_bugs(cause_ranks):
    """Over the whole corpus, the one-line form's likely cause is the planted mistake's
    line for at least 3 in 4 bugs and among the first three for 85 in 100 (measured
    2026-12-01: 53 of 64 first, 57 of 64 in the first three; one bug, a missing
    statement, has no line to name). Each bug's rank is the one its family's planted-bug
    test recorded from the same verify call (`cause_ranks`); a bug not recorded yet in this
    session is verified here."""
    from tests.plugins.verifiers.smt.attention import test_attention_verifier as att
    from tests.plugins.verifiers.smt.conftest import cause_line
    from tests.plugins.verifiers.smt.frontend import test_frontend_corpus as fe
    from tests.plugins.verifiers.smt.moe import test_moe_verifier as moe

    ranks = []
    for path in ALL_PLANTED:
        if cause_line(path) is None:
            continue
        found = cause_ranks.get(path)
        if found is None:
            family = path.parent.parent.name
            if family == "moe":
                report = moe.verify(path, moe.entry_of(path))[2]
            elif family == "attention":
                report = att.verify(path)[2]
            elif family == "frontend":
                report = fe.verify(path)
            else:
                report = verify(path)[2]
            found = cause_ranks.rank_of(report, path)
        ranks.append(found["rank"] if found["caught"] else None)
    first = sum(r == 0 for r in ranks) / len(ranks)
    top3 = sum(r is not None and r < 3 for r in ranks) / len(ranks)
    assert first >= 0.75 and top3 >= 0.85, (first, top3, ranks)
