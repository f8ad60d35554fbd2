"""Helpers: parse a DSL file, verify it for a target, and replay a counterexample
concretely.

Targets are the backends' declared specs, from the registry (`target_spec("h200")`); the
helpers verify for `mi300x` (64-lane wavefronts) unless told otherwise.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pathlib
import re

import pytest

from argus_core.ir import KernelIR, Let
from argus_core.plugin_manager import Registry, default_plugin_manager
from argus_core.target import TargetSpec
from argus_core.types import Policy, VerifyReport
from argus_plugins.dsl.tile.frontend import TileFrontend
from argus_plugins.verifiers.smt import SmtVerifier

HERE = pathlib.Path(__file__).parent
KERNELS = HERE.parents[3] / "plugins" / "kernels"  # the built-in families' DSL kernels
GEMM = KERNELS / "gemm" / "kernel.py"
TILES = {"BM": 64, "BN": 32, "BK": 32, "GROUP": 4, "SPLIT": 4}
EXPECT = re.compile(r"# <- violated: (\w+)")
TARGET = "mi300x"  # the backend whose spec the helpers verify for


@functools.cache
def target_spec(backend: str = TARGET) -> TargetSpec:
    """The target spec backend `backend` declares (through the plugin registry)."""
    return Registry(default_plugin_manager()).get("backend", backend).spec


@functools.cache
def lowering_backend(name: str = TARGET):
    """A backend from the registry, to lower with (`backend.lower(ir, policy, options)`)."""
    return Registry(default_plugin_manager()).get("backend", name)


def parse(path: pathlib.Path, entry: str = "gemm") -> KernelIR:
    return TileFrontend().parse(path.read_text(), entry, str(path))


def policy_for(ir: KernelIR, **tiles: int) -> Policy:
    t = {**TILES, **tiles}
    return Policy({c.name: t[c.name] for c in ir.constexprs}, {"num_warps": 4})


def verify(
    path: pathlib.Path, options: dict | None = None, target: str = TARGET, **tiles: int
) -> tuple[KernelIR, Policy, VerifyReport]:
    ir = parse(path)
    pol = policy_for(ir, **tiles)
    return ir, pol, SmtVerifier().verify(ir, pol, options or {}, target_spec(target))


def expected(path: pathlib.Path) -> tuple[str, int]:
    """(assertion, line) named by the file's '# <- violated: NAME' marker."""
    for n, line in enumerate(path.read_text().splitlines(), 1):
        m = EXPECT.search(line)
        if m:
            return m.group(1), n
    raise AssertionError(f"{path} has no '# <- violated:' marker")


CAUSE = re.compile(r"#\s*(root cause|BUG)")


def cause_line(path: pathlib.Path) -> int | None:
    """The line of the planted mistake: marked `# root cause` (or `# BUG`) where it is not
    the line whose assertion fails, else that line; None for a marker on a line of its own
    (a missing statement: no line to name)."""
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if CAUSE.search(line):
            return None if line.lstrip().startswith("#") else n
    return expected(path)[1]


def cause_rank(cex: dict, path: pathlib.Path) -> int | None:
    """Where the planted mistake ranks in the counterexample's causes (0: named first)."""
    line = cause_line(path)
    if line is None:
        return None
    for n, c in enumerate(cex["causes"]):
        if c["lines"][0] <= line <= c["lines"][1]:
            return n
    return None


class CauseRanks:
    """Where each planted bug's mistake ranks in its counterexample's causes, as the family's
    own planted-bug test found it: test_corpus's likely-cause census reads these instead of
    verifying every planted bug a second time (it verifies any bug not recorded yet, e.g.
    run alone). Shared by the session's xdist workers through a directory of theirs (keyed
    by the file's text), so only what the same verify call returned is reused."""

    def __init__(self, root: pathlib.Path) -> None:
        self.root = root

    def _file(self, path: pathlib.Path) -> pathlib.Path:
        key = hashlib.sha256(f"{path.resolve()}\0{path.read_text()}".encode()).hexdigest()
        return self.root / f"{key[:32]}.json"

    @staticmethod
    def rank_of(report: VerifyReport, path: pathlib.Path) -> dict:
        """{"caught": the expected assertion fails at its line, "rank": cause_rank or None}."""
        assertion, line = expected(path)
        cex = next(
            (
                c
                for c in report.counterexamples
                if c["assertion"] == assertion and c["program_point"]["line"] == line
            ),
            None,
        )  # None: not caught this run (a time-out on a loaded machine): a miss
        return {"caught": cex is not None, "rank": None if cex is None else cause_rank(cex, path)}

    def put(self, path: pathlib.Path, report: VerifyReport) -> None:
        target = self._file(path)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.rank_of(report, path)))
        tmp.replace(target)  # whole records only, for a reader in another worker

    def get(self, path: pathlib.Path) -> dict | None:
        target = self._file(path)
        return json.loads(target.read_text()) if target.is_file() else None


@pytest.fixture(scope="session")
def cause_ranks(tmp_path_factory: pytest.TempPathFactory) -> CauseRanks:
    base = tmp_path_factory.getbasetemp()
    # under xdist each worker's basetemp is <session basetemp>/<worker id>: share the parent
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    root = shared / "smt-cause-ranks"
    root.mkdir(exist_ok=True)
    return CauseRanks(root)


def check_cause(cex: dict, path: pathlib.Path) -> None:
    """The counterexample's backward slice holds the planted mistake, its first entry is
    the one-line form's likely cause, and its values are minimized (no variable can be
    lowered and still violate), unless it rests on prefix sums (moe_align), whose models
    are confirmed by recomputing the sums instead."""
    rank = cause_rank(cex, path)
    assert rank is not None or cause_line(path) is None, (cause_line(path), cex["causes"])
    top = cex["causes"][0]
    assert cex["cause"] == top
    assert f"likely cause: line {top['line']} " in cex["text"]
    assert cex["minimized"] or "data" in cex, cex["text"]


def program_env(ir: KernelIR, pol: Policy, cex: dict) -> dict[str, int]:
    """Concrete values of every scalar of the counterexample's program, computed in Python
    (Expr.evaluate), independently of z3: shapes, tiles, contiguous strides, the Let chain,
    the iteration and the element."""
    env: dict[str, int] = {s.name: 1 for s in ir.shape_syms}
    env.update(cex["shapes"])
    env.update(pol.tiles)
    for t in ir.tensors:
        acc = 1
        for d in reversed(range(len(t.dims))):
            env[t.strides[d].name] = acc
            acc *= env[t.dims[d].name]
    env["program_id_0"] = cex["program_id"] if cex["program_id"] is not None else 0
    for op in ir.walk():
        if isinstance(op, Let):
            e = op.expr
            env[op.sym.name] = e if isinstance(e, int) else e.evaluate(env)
    env.update(cex.get("iteration") or {})
    for d, v in enumerate(cex.get("element") or []):
        env[f"_i{d}"] = v
    return env


@pytest.fixture(scope="session")
def gemm_path() -> pathlib.Path:
    return GEMM


@pytest.fixture(scope="session")
def target() -> TargetSpec:
    """The spec the verifier tests verify for by default (mi300x's)."""
    return target_spec(TARGET)
