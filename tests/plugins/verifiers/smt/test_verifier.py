"""The smt verifier on the GEMM, its contracts (unknown is never verified), counterexample
threads of the target verified for, tag erasure, split-K lowering, plugin registration, its
transfer-function table, its module layering, and the command line."""

from __future__ import annotations

import ast
import json
import os
import pathlib
import subprocess
import sys

import pytest

from argus_core.ir import Op, ProgramPoint
from argus_core.types import Policy
from argus_plugins.dsl.tile.frontend import TileFrontend
from argus_plugins.verifiers.smt import SmtVerifier
from argus_plugins.verifiers.smt.transfer import TRANSFER
from tests.plugins.verifiers.smt.conftest import (
    GEMM,
    HERE,
    expected,
    lowering_backend,
    parse,
    target_spec,
    verify,
)

SMT = pathlib.Path(__file__).parents[4] / "plugins" / "verifiers" / "smt"


@pytest.mark.parametrize(
    "tiles",
    [(16, 16, 16, 1), (32, 64, 32, 4), (64, 64, 32, 8), (128, 256, 64, 8)],
    ids=lambda t: "x".join(map(str, t)),
)
def test_gemm_verifies(tiles, target):
    bm, bn, bk, g = tiles
    ir = parse(GEMM)
    report = SmtVerifier().verify(
        ir, Policy({"BM": bm, "BN": bn, "BK": bk, "GROUP": g}, {"num_warps": 8}), {}, target
    )
    assert report.status == "verified", report.summary
    assert report.assertions >= 15  # its time: benchmarks/verify_bench.py


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


def test_missing_policy_constant_is_unknown(target):
    ir = parse(GEMM)
    report = SmtVerifier().verify(ir, Policy({"BM": 64}), {}, target)
    assert report.status == "unknown" and "BN" in report.summary


def test_counterexample_thread_comes_from_blocked_layout():
    _ir, _pol, report = verify(HERE / "planted" / "missing_load_mask.py")
    cex = report.counterexamples[0]
    th, (i, j) = cex["thread"], cex["element"]
    # default blocked layout of a (64, 32) tile, 4 warps of 64 lanes: 32 lanes along the
    # columns, 2 along the rows, then the 4 warps along the rows
    assert (th["lane"], th["warp"]) == ((i % 2) * 32 + j % 32, (i // 2) % 4)
    assert f"warp {th['warp']} lane {th['lane']}" in cex["text"]


@pytest.mark.parametrize("backend,lanes", [("h200", 32), ("mi300x", 64)])
def test_counterexample_names_lanes_of_the_target(backend, lanes):
    """The lanes and warps of a counterexample are the target's: the backend's declared
    spec (`wave_size`) reaches the verifier, so on h200 lanes are 0..31."""
    spec = target_spec(backend)
    assert spec.wave_size == lanes
    _ir, pol, report = verify(HERE / "planted" / "missing_load_mask.py", target=backend)
    assert report.status == "violated"
    cex = report.counterexamples[0]
    th, (i, j) = cex["thread"], cex["element"]
    warps = pol.compiler["num_warps"]
    assert 0 <= th["lane"] < lanes and 0 <= th["warp"] < warps
    assert f"warp={lanes})" in th["layout"]
    # default blocked layout of a (64, 32) tile over 4 warps: a 32-lane warp spans one row
    # of 32 columns (warps along the rows); a 64-lane wavefront spans two rows
    rows_per_warp = lanes // 32
    assert th["lane"] == (i % rows_per_warp) * 32 + j % 32
    assert th["warp"] == (i // rows_per_warp) % warps
    assert f"(warp {th['warp']} lane {th['lane']})" in cex["text"]


def _op_types(cls: type) -> set[type]:
    out = set()
    for sub in cls.__subclasses__():
        if sub.__module__.startswith("argus_core."):  # the IR's ops, not a test's
            out |= {sub} | _op_types(sub)
    return out


def test_every_ir_op_has_a_transfer_function():
    ops = _op_types(Op)
    assert len(ops) >= 20
    assert ops <= set(TRANSFER), sorted(c.__name__ for c in ops - set(TRANSFER))


def test_an_op_without_a_rule_is_a_clear_error(target):
    class Mystery(Op):
        kind = "mystery"

    ir = parse(GEMM)
    ir.ops.insert(0, Mystery(ProgramPoint("k.py", 3, "mystery")))
    report = SmtVerifier().verify(
        ir, Policy({"BM": 64, "BN": 32, "BK": 32, "GROUP": 4}), {}, target
    )
    assert report.status == "unknown"
    assert "k.py:3" in report.summary and "'mystery'" in report.summary
    assert "Mystery" in report.summary and "Load" in report.summary  # the op; the known ones


def test_smt_modules_import_at_module_level_only():
    """The verifier's modules are layered: every import is at the top of its module (a
    function-level import is how a cycle hides), and none names another plugin."""
    for path in sorted(SMT.glob("*.py")):
        tree = ast.parse(path.read_text())
        top = {id(n) for n in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                assert id(node) in top, f"{path.name}:{node.lineno} imports inside a function"
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
                for name in names:
                    if name.startswith("argus_plugins."):
                        assert name.startswith("argus_plugins.verifiers."), (path.name, name)


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
    fe, backend = TileFrontend(), lowering_backend()
    pol = Policy({"BM": 64, "BN": 32, "BK": 32, "GROUP": 4})
    tagged_ir, plain_ir = fe.parse(src, "gemm", str(path)), fe.parse(plain, "gemm", str(path))
    assert any(getattr(op, "erased", False) for op in tagged_ir.walk())
    run = {"dtype": "bf16"}
    assert backend.lower(tagged_ir, pol, run).source == backend.lower(plain_ir, pol, run).source


def test_splitk_lowers_to_atomic_add():
    ir = parse(HERE / "correct" / "splitk_ok.py")
    pol = Policy({"BM": 64, "BN": 32, "BK": 32, "SPLIT": 4})
    src = lowering_backend().lower(ir, pol, {"dtype": "bf16"}).source
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
