"""The smt verifier on the GEMM, its contracts (unknown is never verified), tag erasure,
split-K lowering, plugin registration, and the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from argus_core.types import Policy
from argus_plugins.dsl.tile.frontend import TileFrontend
from argus_plugins.verifiers.smt import SmtVerifier
from tests.plugins.verifiers.smt.conftest import GEMM, HERE, expected, parse, verify


@pytest.mark.parametrize(
    "tiles",
    [(16, 16, 16, 1), (32, 64, 32, 4), (64, 64, 32, 8), (128, 256, 64, 8)],
    ids=lambda t: "x".join(map(str, t)),
)
def test_gemm_verifies(tiles):
    bm, bn, bk, g = tiles
    ir = parse(GEMM)
    report = SmtVerifier().verify(
        ir, Policy({"BM": bm, "BN": bn, "BK": bk, "GROUP": g}, {"num_warps": 8}), {}
    )
    assert report.status == "verified", report.summary
    assert report.assertions >= 15 and report.seconds < 5


def test_timeout_is_unknown_never_verified():
    _ir, _pol, report = verify(GEMM, {"timeout_ms": 1, "probe_ms": 0})
    assert report.status == "unknown"
    assert report.summary.startswith("unknown")


def test_config_options_are_flattened():
    # the pipeline passes dict(cfg.verifier): nested `options` reach the solver
    _ir, _pol, report = verify(
        GEMM, {"name": "smt", "timeout_ms": 10000, "options": {"timeout_ms": 1, "probe_ms": 0}}
    )
    assert report.status == "unknown"


def test_missing_policy_constant_is_unknown():
    ir = parse(GEMM)
    report = SmtVerifier().verify(ir, Policy({"BM": 64}), {})
    assert report.status == "unknown" and "BN" in report.summary


def test_counterexample_thread_comes_from_blocked_layout():
    _ir, _pol, report = verify(HERE / "planted" / "missing_load_mask.py")
    cex = report.counterexamples[0]
    th, (i, j) = cex["thread"], cex["element"]
    # default blocked layout of a (64, 32) tile, 4 warps of 64 lanes: 32 lanes along the
    # columns, 2 along the rows, then the 4 warps along the rows
    assert (th["lane"], th["warp"]) == ((i % 2) * 32 + j % 32, (i // 2) % 4)
    assert f"warp {th['warp']} lane {th['lane']}" in cex["text"]


def _strip_tags(src: str) -> str:
    # blank the tag lines rather than drop them, so line comments in the lowering match
    return "\n".join(
        "" if "al.tag(" in line or "al.assert_tag" in line else line for line in src.splitlines()
    )


def test_tags_vanish_from_lowered_code():
    path = HERE / "correct" / "gemm_tagged.py"
    src = path.read_text()
    plain = _strip_tags(src)
    assert plain != src
    fe = TileFrontend()
    pol = Policy({"BM": 64, "BN": 32, "BK": 32, "GROUP": 4})
    tagged_ir, plain_ir = fe.parse(src, "gemm", str(path)), fe.parse(plain, "gemm", str(path))
    assert any(getattr(op, "erased", False) for op in tagged_ir.walk())
    assert fe.lower(tagged_ir, pol).source == fe.lower(plain_ir, pol).source


def test_splitk_lowers_to_atomic_add():
    ir = parse(HERE / "correct" / "splitk_ok.py")
    src = TileFrontend().lower(ir, Policy({"BM": 64, "BN": 32, "BK": 32, "SPLIT": 4})).source
    assert "tl.atomic_add(c + (" in src and "tl.store(" not in src
    compile(src, "<lowered>", "exec")


def test_registered_as_plugin():
    from argus_plugins.verifiers import argus_register_verifiers

    names = [v.name for v in argus_register_verifiers()]
    assert names == ["none", "smt"]


def _cli(*args: str) -> tuple[int, dict]:
    env = {**os.environ, "PYTHONPATH": str(HERE.parents[3])}
    p = subprocess.run(
        [sys.executable, "-m", "argus_core.verify", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    return p.returncode, (json.loads(p.stdout) if p.stdout.strip() else {}), p.stderr


def test_cli_exit_codes(tmp_path):
    code, out, _ = _cli(
        str(GEMM), "--kernel", "gemm", "--policy", "BM=64,BN=64,BK=32,GROUP=8", "--num-warps", "4"
    )
    assert (code, out["status"], out["kernel"]) == (0, "verified", "gemm") and out["seconds"] > 0
    planted = HERE / "planted" / "wrong_k_offset.py"
    code, out, _ = _cli(str(planted))
    assert (code, out["status"]) == (1, "violated")
    assert out["counterexamples"][0]["program_point"]["line"] == expected(planted)[1]
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from argus_plugins.dsl.tile import lang as al\n\n@al.kernel\n"
        "def k(a: al.Tensor['M'], B: al.constexpr):\n"
        "    (p,) = al.program_ids((al.cdiv(a.shape[0], B),))\n"
        "    al.store(a.tile(B, B)[p], al.zeros((B,)))\n"
    )
    code, out, err = _cli(str(bad))
    assert (code, out["status"]) == (2, "unknown")
    assert f"{bad}:6" in out["error"] and f"{bad}:6" in err
