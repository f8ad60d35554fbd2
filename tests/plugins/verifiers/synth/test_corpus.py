"""The corpus: LLM-style kernels without tags whose data flow differs from their
reference in a way the implied assertions (dot pairing, bounds, stores) do not see. Each is
`verified` by the plain verifier and `violated` once the spec's assertions are synthesized,
at the line marked `# <- synth` (a read it never makes: at the store), with a counterexample naming the output element, the
input element it should have read and the one it read."""

from __future__ import annotations

import pathlib
import re

import pytest

from argus_core.types import Policy
from argus_plugins.dsl.tile.frontend import TileFrontend
from argus_plugins.verifiers.smt import SmtVerifier
from argus_plugins.verifiers.smt.synth import check
from tests.plugins.verifiers.smt.conftest import target_spec
from tests.plugins.verifiers.synth.specs import spec

CORPUS = sorted((pathlib.Path(__file__).parent / "corpus").glob("*.py"))
TILES = {"BM": 32, "BN": 32, "BK": 32, "GROUP": 4, "HEAD_D": 64, "ROWS": 4, "BR": 16, "BC": 32}


def load(path: pathlib.Path):
    text = path.read_text()
    ir = TileFrontend().parse(text, TileFrontend().kernels(text, str(path))[0], str(path))
    pol = Policy({c.name: TILES[c.name] for c in ir.constexprs}, {"num_warps": 4})
    name = re.search(r"# spec: (\w+)", text).group(1)
    line = next(n for n, ln in enumerate(text.splitlines(), 1) if "# <- synth" in ln)
    return ir, pol, spec(name), line


def test_corpus_size():
    assert len(CORPUS) >= 5


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_implied_assertions_miss_it(path):
    ir, pol, _spec, _line = load(path)
    report = SmtVerifier().verify(ir, pol, {}, target_spec())
    assert report.status == "verified", report.summary


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_synthesized_invariants_catch_it(path):
    ir, pol, sp, line = load(path)
    r = check(ir, pol, sp, target_spec())
    assert r.status == "violated", r.summary
    cex = r.counterexamples[0]
    # a wrong read is flagged at its load; a read the kernel never makes, at the store
    if "no load feeding the store" in cex["text"]:
        assert cex["program_point"]["line"] == max(op.point.line for op in ir.walk()), cex["text"]
        assert path.read_text().splitlines()[line - 1].split("# <- synth")[0].strip()
    else:
        assert cex["program_point"]["line"] == line, cex["text"]
    assert cex["assertion"] == "synth_dataflow"
    assert cex["should_read"] != cex["reads"]
    assert "should read" in cex["text"]
