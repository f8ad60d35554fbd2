"""Tracing DSL source into the IR: ops, loops, program points, and malformed programs."""

from __future__ import annotations

import random
import textwrap
from pathlib import Path

import pytest

from argus_core.errors import DSLError
from argus_core.ir import Dot, Let, Load, Loop, Store, Zeros
from argus_plugins.dsl.tile.frontend import TileFrontend

GEMM = Path(__file__).parents[4] / "plugins" / "kernels" / "gemm" / "kernel.py"


def parse(src: str, entry: str = "k", filename: str = "/virtual/k.py"):
    return TileFrontend().parse(textwrap.dedent(src), entry, filename)


def line_of(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if needle in ln)


@pytest.fixture(scope="module")
def gemm_ir():
    return TileFrontend().parse(GEMM.read_text(), "gemm", str(GEMM))


def test_gemm_traces_one_symbolic_loop_with_a_carried_accumulator(gemm_ir):
    top = [type(op) for op in gemm_ir.ops]
    assert top.count(Loop) == 1, "the K loop must stay a loop, not be unrolled"
    loop = next(op for op in gemm_ir.ops if isinstance(op, Loop))
    assert [type(op) for op in loop.body] == [Load, Load, Dot]
    assert loop.var.kind == "loop" and loop.var.name == "k"
    (carry,) = loop.carried
    dot = loop.body[2]
    assert dot.acc is carry.arg and dot.out is carry.yielded
    assert isinstance(next(op for op in gemm_ir.ops if isinstance(op, Zeros)), Zeros)
    assert carry.init is next(op.out for op in gemm_ir.ops if isinstance(op, Zeros))
    store = gemm_ir.ops[-1]
    assert isinstance(store, Store) and store.view.tensor.name == "c"
    assert gemm_ir.written == ["c"]
    assert [t.name for t in gemm_ir.tensors] == ["a", "b", "c"]
    assert [s.name for s in gemm_ir.shape_syms] == ["M", "K", "N"]
    assert gemm_ir.shape_bindings["N"] == ("b", 1)


def test_every_op_records_its_dsl_program_point(gemm_ir):
    text = GEMM.read_text()
    loads = [op for op in gemm_ir.walk() if isinstance(op, Load)]
    assert loads[0].point.line == line_of(text, "x = al.load")
    assert loads[1].point.line == line_of(text, "y = al.load")
    assert loads[0].point.file == str(GEMM) and loads[0].point.op == "load"
    dot = next(op for op in gemm_ir.walk() if isinstance(op, Dot))
    assert dot.point.line == line_of(text, "al.dot(")
    assert gemm_ir.ops[-1].point.line == line_of(text, "al.store(")
    assert all(op.point.line > 0 for op in gemm_ir.walk())


def test_tile_view_coordinates_offsets_and_bounds_evaluate_correctly(gemm_ir):
    x = next(op for op in gemm_ir.walk() if isinstance(op, Load))
    rng = random.Random(0)
    for _ in range(50):
        env = {
            "M": rng.randint(1, 500),
            "K": rng.randint(1, 500),
            "BM": 64,
            "BK": 32,
            "a_stride0": rng.randint(1, 900),
            "a_stride1": rng.randint(1, 3),
            "pid_m": rng.randint(0, 9),
            "k": rng.randint(0, 9),
            "_i0": rng.randint(0, 63),
            "_i1": rng.randint(0, 31),
        }
        row = env["pid_m"] * 64 + env["_i0"]
        col = env["k"] * 32 + env["_i1"]
        assert x.view.coords[0].evaluate(env) == row
        assert x.view.coords[1].evaluate(env) == col
        assert x.view.offset.evaluate(env) == row * env["a_stride0"] + col * env["a_stride1"]
        assert bool(x.view.in_bounds.evaluate(env)) == (row < env["M"] and col < env["K"])
        assert bool(x.mask.evaluate(env)) == (row < env["M"] and col < env["K"])


def test_grouped_program_order_visits_every_tile_once(gemm_ir):
    lets = [op for op in gemm_ir.ops if isinstance(op, Let)]
    for M, N, BM, BN, G in [(500, 300, 64, 64, 8), (64, 1000, 64, 32, 4), (1000, 70, 32, 64, 3)]:
        n_m, n_n = -(-M // BM), -(-N // BN)
        seen = set()
        for pid in range(n_m * n_n):
            env = {"program_id_0": pid, "M": M, "N": N, "BM": BM, "BN": BN, "GROUP": G}
            for let in lets:
                env[let.sym.name] = (
                    let.expr.evaluate(env) if hasattr(let.expr, "evaluate") else let.expr
                )
            seen.add((env["pid_m"], env["pid_n"]))
        assert seen == {(i, j) for i in range(n_m) for j in range(n_n)}


@pytest.mark.parametrize(
    ("src", "message", "needle"),
    [
        ("def k(:\n    pass\n", "syntax error", "def k(:"),
        (
            """
            from argus_plugins.dsl.tile import lang as al
            @al.kernel
            def k(a: al.Tensor["M"], BM):
                pass
            """,
            "needs an annotation",
            "def k(",
        ),
        (
            """
            from argus_plugins.dsl.tile import lang as al
            @al.kernel
            def k(a: al.Tensor["M"], BM: al.constexpr):
                (p,) = al.program_ids(al.cdiv(a.shape, (BM,)))
                if p > 3:
                    pass
                al.store(a.tile(BM)[p], al.zeros((BM,)))
            """,
            "no truth value",
            "if p > 3",
        ),
        (
            """
            from argus_plugins.dsl.tile import lang as al
            @al.kernel
            def k(a: al.Tensor["M", "K"], b: al.Tensor["K", "N"], c: al.Tensor["M", "N"], BM: al.constexpr, BK: al.constexpr):
                pm, pn = al.program_ids(al.cdiv(c.shape, (BM, BM)))
                x = al.load(a.tile(BM, BK)[pm, 0])
                y = al.load(b.tile(BM, BM)[0, pn])
                al.store(c.tile(BM, BM)[pm, pn], al.dot(x, y))
            """,
            "dot contracts",
            "al.dot(x, y)",
        ),
        (
            """
            from argus_plugins.dsl.tile import lang as al
            @al.kernel
            def k(a: al.Tensor["M"], BM: al.constexpr):
                (p,) = al.program_ids(al.cdiv(a.shape, (BM,)))
                off = p * BM
                for i in al.range(4):
                    off = off + BM
                al.store(a.tile(BM)[p], al.zeros((BM,)))
            """,
            "loop-carried scalar 'off'",
            "for i in al.range",
        ),
        (
            """
            from argus_plugins.dsl.tile import lang as al
            @al.kernel
            def k(a: al.Tensor["M"], BM: al.constexpr):
                (p,) = al.program_ids(al.cdiv(a.shape, (BM,)))
                for i in al.range(4):
                    t = al.load(a.tile(BM)[i])
                al.store(a.tile(BM)[p], t)
            """,
            "made inside a loop body",
            "al.store(",
        ),
        (
            """
            from argus_plugins.dsl.tile import lang as al
            @al.kernel
            def k(a: al.Tensor["M"], BM: al.constexpr):
                al.store(a.tile(BM)[0], al.zeros((BM,)))
            """,
            "never calls al.program_ids",
            "def k(",
        ),
    ],
    ids=[
        "syntax",
        "annotation",
        "python-if",
        "dot-shape",
        "carried-scalar",
        "escaping-tile",
        "no-grid",
    ],
)
def test_malformed_programs_fail_with_the_line(src, message, needle):
    with pytest.raises(DSLError) as info:
        parse(src)
    assert message in str(info.value)
    assert info.value.where == f"/virtual/k.py:{line_of(textwrap.dedent(src), needle)}"


def test_unknown_entry_lists_the_kernels_found():
    with pytest.raises(DSLError, match=r"no @al.kernel named 'nope'.*kernels found: gemm"):
        TileFrontend().parse(GEMM.read_text(), "nope", str(GEMM))
