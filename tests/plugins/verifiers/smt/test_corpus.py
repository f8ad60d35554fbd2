"""The planted-bug corpus: every bug is `violated` at the right line with a counterexample
whose values replay concretely; every correct kernel is `verified` (no false alarm)."""

from __future__ import annotations

import pathlib

import pytest

from argus_core.ir import Dot, Load, Loop, Store
from tests.plugins.verifiers.smt.conftest import HERE, expected, program_env, verify

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
        ks = list(range(_eval(loop.start, penv), _eval(loop.stop, penv)))
        for k in ks[-1:] if reset else ks:
            summed |= {k * bk + kk for kk in range(bk) if k * bk + kk < env["K"]}
    return summed


def _eval(e, env):
    return e if isinstance(e, int) else e.evaluate(env)


@pytest.mark.parametrize("path", PLANTED, ids=lambda p: p.stem)
def test_planted_bug_is_caught(path: pathlib.Path):
    ir, pol, report = verify(path)
    assertion, line = expected(path)
    assert report.status == "violated", report.summary
    hits = [c for c in report.counterexamples if c["assertion"] == assertion]
    assert hits, f"expected {assertion}, got {[c['assertion'] for c in report.counterexamples]}"
    cex = hits[0]
    pp = cex["program_point"]
    assert (pathlib.Path(pp["file"]).name, pp["line"]) == (path.name, line)
    assert cex["text"] and f"{path.name}:{line}" in cex["text"]
    assert report.summary.startswith(report.counterexamples[0]["text"])
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
        # the value is the GEMM accumulator: its tag is the product's (row, col)
        i, j = cex["element"]
        assert rhs == [env["pid_m"] * pol.tiles["BM"] + i, env["pid_n"] * pol.tiles["BN"] + j]
        assert lhs != rhs
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
        assert lhs == rhs and cex["this"] != cex["other"]
    elif assertion == "store_once":
        assert lhs != [cex["program_id"], *cex["element"]]
        op = _op_at(ir, line, Store)
        other = program_env(ir, pol, {**cex, "program_id": lhs[0], "element": lhs[1:]})
        mine = [_eval(c, env) for c in op.view.coords]
        assert mine == [_eval(c, other) for c in op.view.coords]  # both really land there
        assert _eval(op.mask, env) and _eval(op.mask, other)
    else:
        assert lhs != rhs
