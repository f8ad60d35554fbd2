"""A declared shape domain (`kernel.domain`, issue #18): bounds checked at start, assumed
by the verifier (real z3), per policy; carried into an exported op, which refuses calls
outside it naming the condition."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from argus_core.domain import parse_domain, predicates, with_domain
from argus_core.errors import ConfigError
from argus_core.types import Policy
from argus_core.verify import plugins

KERNEL = Path(__file__).parent / "data" / "unmasked_gemm.py"
DIVIDES = {"M": {"multiple_of": 64}, "N": {"multiple_of": 64}, "K": {"multiple_of": 32}}
DOMAIN_ARG = "kernel.domain={M: {multiple_of: 64}, N: {multiple_of: 64}, K: {multiple_of: 32}}"


@pytest.mark.parametrize(
    ("domain", "message"),
    [
        ([1, 2], "must map shape symbols to bounds"),
        ({"M": 64}, "kernel.domain.M=64 must give any of min, max, multiple_of"),
        (
            {"M": {"maximum": 64}},
            "kernel.domain.M.maximum is not a bound; valid: min, max, multiple_of",
        ),
        ({"M": {"max": 0}}, "kernel.domain.M.max=0 must be a positive integer"),
        ({"M": {"max": True}}, "kernel.domain.M.max=True must be a positive integer"),
        ({"M": {"min": 9, "max": 8}}, "min=9 is above max=8"),
        ({"M": {"max": 2**21}}, "above the verifier's max_extent 1048576"),
    ],
)
def test_bad_domains_name_the_value_and_the_choices(domain, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("[", r"\[")):
        parse_domain(domain, max_extent=2**20)


def test_bounds_become_preconditions():
    preds = predicates(parse_domain({"M": {"min": 2, "max": 8192, "multiple_of": 16}}))
    assert [repr(p) for _, p in preds] == ["M >= 2", "M <= 8192", "M % 16 == 0"]
    assert predicates(parse_domain({"M": {"min": 1, "multiple_of": 1}})) == []


def test_the_verifier_proves_an_unmasked_kernel_only_inside_the_declared_domain():
    dsl, verifier, backend, options = plugins("tile", "smt", "mi300x")
    ir = dsl.parse(KERNEL.read_text(), "gemm", str(KERNEL))
    tiles = {"BM": 64, "BN": 64, "BK": 32}
    bare = verifier.verify(ir, Policy(tiles, {"num_warps": 4}), options, backend.spec)
    assert bare.status == "violated"  # a read past K (or M) at some shape
    inside = with_domain(ir, parse_domain(DIVIDES))
    assert inside is not ir and ir.ops[0] is not inside.ops[0]  # the parsed IR is untouched
    proved = verifier.verify(inside, Policy(tiles, {"num_warps": 4}), options, backend.spec)
    assert proved.status == "verified", proved.summary
    # the same domain does not cover a policy whose tiles it does not divide: M = 64, BM = 128
    wide = verifier.verify(
        inside, Policy({**tiles, "BM": 128}, {"num_warps": 4}), options, backend.spec
    )
    assert wide.status == "violated"
    (cex, *_) = wide.counterexamples
    assert cex["shapes"]["M"] % 64 == 0 and cex["shapes"]["M"] % 128 != 0
    # a weaker domain than the kernel needs is not enough
    weak = with_domain(ir, parse_domain({**DIVIDES, "K": {"multiple_of": 16}}))
    assert (
        verifier.verify(weak, Policy(tiles, {"num_warps": 4}), options, backend.spec).status
        == "violated"
    )


def _argus(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HYDRA_FULL_ERROR": "0"}
    env.pop("TRITON_INTERPRET", None)
    return subprocess.run(
        [sys.executable, "-m", "argus_core.cli", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


COMMON = [
    "+kernel=gemm", "backend=interpret", "tracking=none", "progress=off",
    f"kernel.source={KERNEL}", "kernel.tiles={BM: [64, 128], BN: [64], BK: [32]}",
    "~kernel.tiles.GROUP", "kernel.shape={M: 128, N: 64, K: 96}",
    "kernel.check_shapes=[{M: 64, N: 128, K: 64}]",
]  # fmt: skip


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "kernel.domain={Q: {max: 4}}",
            "kernel.domain names ['Q'], not shape symbols of the kernel; valid: K, M, N",
        ),
        ("kernel.domain={M: {maximum: 4}}", "kernel.domain.M.maximum is not a bound"),
    ],
)
def test_a_bad_domain_stops_the_run_before_any_candidate(tmp_path, override, message):
    done = _argus(tmp_path, *COMMON, "budget=1", override)
    assert done.returncode == 2, done.stderr[-2000:]
    assert message in done.stderr
    assert not list(tmp_path.glob(".argus/runs/*/results.jsonl"))


@pytest.mark.slow
def test_a_run_in_a_declared_domain_proves_per_policy_and_exports_the_domain(tmp_path):
    done = _argus(tmp_path, *COMMON, "budget=2", DOMAIN_ARG)
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = sorted((tmp_path / ".argus" / "runs").iterdir())
    records = {
        r["candidate"]["policy"]["tiles"]["BM"]: r
        for r in json.loads((run / "results.json").read_text())
    }
    assert records[64]["failure"] is None and records[64]["verify"]["status"] == "verified"
    assert records[64]["correctness"]["ok"] is True
    assert records[128]["failure"].startswith("verify: load at")  # BM=128 leaves the domain

    from argus_core.export import build
    from argus_core.export import runtime as rt

    pkg = build([run], tmp_path / "pkg")
    op = json.loads((pkg / "argus_gemm" / "manifest.json").read_text())["ops"]["gemm"]
    texts = [r["text"] for r in op["domain"]["requires"]]
    assert texts == ["(M % 64) == 0", "(N % 64) == 0", "(K % 32) == 0"]
    import torch

    a, b = torch.zeros(64, 64, dtype=torch.bfloat16), torch.zeros(64, 128, dtype=torch.bfloat16)
    assert rt.check(op, {"a": a, "b": b}, {}) == {"M": 64, "K": 64, "N": 128}
    with pytest.raises(rt.DomainError, match=r"violates \(K % 32\) == 0 \(K=48\)"):
        rt.check(op, {"a": a[:, :48], "b": b[:48]}, {})
