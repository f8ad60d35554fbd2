"""Speed without changing verdicts: the proof cache (by IR content, tile constants and
options; num_warps, num_stages and the warp size never re-verify) and the fast z3 term
conversion (the same terms as `argus_core.ir.to_z3`)."""

from __future__ import annotations

import z3

import argus_plugins.verifiers.smt as smt
from argus_core.ir import to_z3
from argus_core.ir.expr import Call, Select, Sym, as_expr, land
from argus_core.types import Policy
from argus_plugins.verifiers.smt import SmtVerifier, clear_proof_cache, ir_key
from argus_plugins.verifiers.smt.z3terms import Converter
from tests.plugins.verifiers.smt.conftest import GEMM, HERE, parse, target_spec

GEMM_TILES = {"BM": 64, "BN": 64, "BK": 32, "GROUP": 8}


def _no_analysis(*_a, **_k):
    raise AssertionError("re-verified: the proof should have come from the cache")


def test_num_warps_and_stages_never_reverify(monkeypatch):
    clear_proof_cache()
    ir = parse(GEMM)
    first = SmtVerifier().verify(ir, Policy(GEMM_TILES, {"num_warps": 4}), {}, target_spec())
    assert first.status == "verified"
    monkeypatch.setattr(smt, "analyse", _no_analysis)
    again = parse(GEMM)  # traced again: other tile numbers, the same content
    assert ir_key(again) == ir_key(ir)
    for compiler in ({"num_warps": 8, "num_stages": 3}, {"num_warps": 2, "num_stages": 1}):
        for backend in ("mi300x", "h200"):
            r = SmtVerifier().verify(again, Policy(GEMM_TILES, compiler), {}, target_spec(backend))
            assert (r.status, r.assertions, r.summary) == (
                first.status,
                first.assertions,
                first.summary,
            )


def test_tile_constants_and_options_reverify(monkeypatch):
    clear_proof_cache()
    ir = parse(GEMM)
    SmtVerifier().verify(ir, Policy(GEMM_TILES, {"num_warps": 4}), {}, target_spec())
    calls = []
    real = smt.analyse

    def counting(*a, **k):
        calls.append(a[1].tiles)
        return real(*a, **k)

    monkeypatch.setattr(smt, "analyse", counting)
    other = {**GEMM_TILES, "BK": 64}
    assert SmtVerifier().verify(ir, Policy(other, {}), {}, target_spec()).status == "verified"
    SmtVerifier().verify(ir, Policy(GEMM_TILES, {}), {"max_extent": 4096}, target_spec())
    SmtVerifier().verify(ir, Policy(GEMM_TILES, {}), {"cache": False}, target_spec())
    assert len(calls) == 3


def test_a_violation_names_the_threads_of_each_layout(monkeypatch):
    # counterexamples name warps and lanes: a violated report is kept per thread layout
    clear_proof_cache()
    bug = HERE / "planted" / "missing_store_mask.py"
    ir = parse(bug)
    tiles = {c.name: GEMM_TILES.get(c.name, 4) for c in ir.constexprs}
    r4 = SmtVerifier().verify(ir, Policy(tiles, {"num_warps": 4}), {}, target_spec())
    r8 = SmtVerifier().verify(ir, Policy(tiles, {"num_warps": 8}), {}, target_spec())
    assert r4.status == r8.status == "violated"
    assert "num_warps=4" in r4.counterexamples[0]["thread"]["layout"]
    assert "num_warps=8" in r8.counterexamples[0]["thread"]["layout"]
    monkeypatch.setattr(smt, "analyse", _no_analysis)
    again = SmtVerifier().verify(ir, Policy(tiles, {"num_warps": 8}), {}, target_spec())
    assert again.counterexamples == r8.counterexamples


def test_fast_terms_are_the_reference_terms():
    i, j, n = (Sym(x, "elem") for x in ("i", "j", "n"))
    env = {"i": z3.Int("i"), "j": z3.Int("j"), "n": z3.Int("n")}
    exprs = [
        (i * 4 + j) // n,
        (i - j) % 8,
        (i < n) & (j >= 0),
        (i.eq(j)) | (j.ne(n)),
        (i < n) + j,  # a predicate as a number (1 or 0)
        Call("min", (i, n)) + Call("max", (j, as_expr(0))) + Call("cdiv", (n, as_expr(16))),
        Select(i < 4, j, as_expr(7)) * 2,
        land(j.eq(0), 3 < i),
    ]
    for e in exprs:
        fast, ref = Converter(env)(e), to_z3(e, env)
        assert fast.eq(ref), (e, fast, ref)  # structurally the same term
