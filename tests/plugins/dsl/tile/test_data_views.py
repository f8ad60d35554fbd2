"""DSL features beyond GEMM: sub-tensors, scalar arguments, broadcasting, element indices,
gathered and scattered rows, scalar loads, tile masks, cumsum, and what they lower to. (The
attention and MoE golden lowerings are in tests/core/lowering.)"""

from __future__ import annotations

import random
import textwrap

import pytest

from argus_core.errors import DSLError
from argus_core.ir import ExpandDims, Load, LoadScalar, Loop, Scan, Store, TileElem
from argus_core.plugin_manager import Registry, default_plugin_manager
from argus_core.types import Policy
from argus_plugins.dsl.tile.frontend import TileFrontend


@pytest.fixture(scope="module")
def backend():
    """A target with the generic Triton rules (the language parses, the target lowers)."""
    return Registry(default_plugin_manager()).get("backend", "mi300x")


def parse(src: str, entry: str = "k"):
    return TileFrontend().parse(textwrap.dedent(src), entry, "/virtual/k.py")


def test_sub_tensor_views_put_fixed_indices_first_and_apply_the_full_layout():
    ir = parse(
        """
        from argus_plugins.dsl.tile import lang as al
        @al.kernel
        def k(q: al.Tensor["B", "H", "S", "D"], BM: al.constexpr, BD: al.constexpr):
            pm, b, h = al.program_ids((al.cdiv(q.shape[2], BM), q.shape[0], q.shape[1]))
            t = al.load(q[b, h].tile(BM, BD)[pm, 0])
            al.store(q[b, h].tile(BM, BD)[pm, 0], t)
        """
    )
    load = next(op for op in ir.walk() if isinstance(op, Load))
    rng = random.Random(1)
    for _ in range(20):
        env = {
            "pid_1": rng.randint(0, 3),
            "pid_2": rng.randint(0, 7),
            "pid_0": rng.randint(0, 5),
            "BM": 16,
            "BD": 64,
            "_i0": rng.randint(0, 15),
            "_i1": rng.randint(0, 63),
            "S": 90,
            "D": 64,
        }
        strides = [rng.randint(1, 10**5) for _ in range(4)]
        env.update({f"q_stride{d}": s for d, s in enumerate(strides)})
        coords = [c.evaluate(env) if hasattr(c, "evaluate") else c for c in load.view.coords]
        assert coords == [env["pid_1"], env["pid_2"], env["pid_0"] * 16 + env["_i0"], env["_i1"]]
        assert load.view.offset.evaluate(env) == sum(c * s for c, s in zip(coords, strides))
        assert bool(load.view.in_bounds.evaluate(env)) == (coords[2] < 90 and coords[3] < 64)


def test_gathered_rows_index_by_data_and_mask_out_of_range_rows(backend):
    ir = parse(
        """
        from argus_plugins.dsl.tile import lang as al
        @al.kernel
        def k(x: al.Tensor["T", "H"], ids: al.Tensor["N"], blk: al.Tensor["NB"], y: al.Tensor["N", "H"],
              BM: al.constexpr, BK: al.constexpr):
            pb, pk = al.program_ids((al.cdiv(ids.shape[0], BM), al.cdiv(x.shape[1], BK)))
            ex = al.load_scalar(blk, pb)
            rows = al.load(ids.tile(BM)[pb], other=-1)
            t = al.load(x.rows(rows).tile(BK)[pk], mask=rows >= 0)
            al.store(y.rows(rows).tile(BK)[pk], t * 2.0, mask=ex >= 0)
            al.store(ids.rows(rows), al.cumsum(rows, 0), mask=rows >= 0)
        """
    )
    ops = list(ir.walk())
    assert isinstance(ops[3], LoadScalar) and ops[3].sym.kind == "data"
    gather = [op for op in ops if isinstance(op, Load)][1]
    row = gather.view.coords[0]
    assert isinstance(row, TileElem) and row.axis == 0 and row.value is ops[4].out
    assert any(isinstance(op, Scan) for op in ops)
    src = backend.lower(ir, Policy({"BM": 16, "BK": 32}), {"dtype": "bf16"}).source
    assert "blk_at = tl.load(blk + (pid_0 * blk_stride0))" in src
    assert "x + (rows[:, None] * x_stride0" in src and "(rows[:, None] < T)" in src
    assert "(t2[:, None] != 0)" in src or "[:, None] != 0" in src  # the per-row mask tile
    assert "(blk_at >= 0)" in src and "tl.cumsum(rows, axis=0)" in src
    compile(src, "lowered.py", "exec")


def test_broadcasting_expand_dims_and_index_expressions(backend):
    ir = parse(
        """
        from argus_plugins.dsl.tile import lang as al
        @al.kernel
        def k(a: al.Tensor["M", "N"], r: al.Tensor["M"], scale: al.f32, BM: al.constexpr, BN: al.constexpr):
            pm, pn = al.program_ids((al.cdiv(a.shape[0], BM), al.cdiv(a.shape[1], BN)))
            t = al.load(a.tile(BM, BN)[pm, pn])
            m = al.max(t, 1)
            i, j = al.indices((BM, BN))
            s = al.where(pm * BM + i >= pn * BN + j, t - m[:, None], float("-inf")) * scale
            al.store(r.tile(BM)[pm], al.sum(al.exp2(s), 1))
        """
    )
    assert any(isinstance(op, ExpandDims) for op in ir.walk())
    assert [s.name for s, _ in ir.scalars] == ["scale"]
    low = backend.lower(ir, Policy({"BM": 32, "BN": 16}), {"dtype": "bf16"})
    assert ("scale", "float", ("scalar", "scale")) in [
        (p.name, p.kind, p.binding) for p in low.params
    ]
    assert "m[:, None]" in low.source and 'float("-inf")' in low.source
    assert "tl.arange(0, BM)[:, None] >= pid_1 * BN + tl.arange(0, BN)[None, :]" in low.source


def test_shapes_that_do_not_broadcast_are_rejected_with_the_line():
    with pytest.raises(DSLError, match="do not broadcast") as info:
        parse(
            """
            from argus_plugins.dsl.tile import lang as al
            @al.kernel
            def k(a: al.Tensor["M", "N"], BM: al.constexpr, BN: al.constexpr):
                pm, pn = al.program_ids((al.cdiv(a.shape[0], BM), al.cdiv(a.shape[1], BN)))
                t = al.load(a.tile(BM, BN)[pm, pn])
                u = al.load(a.tile(BN, BM)[pn, pm])
                al.store(a.tile(BM, BN)[pm, pn], t + u)
            """
        )
    assert info.value.where == "/virtual/k.py:8"


def test_a_loop_does_not_clobber_a_value_that_lives_on_after_it(backend):
    ir = parse(
        """
        from argus_plugins.dsl.tile import lang as al
        @al.kernel
        def k(a: al.Tensor["M"], BM: al.constexpr):
            (pm,) = al.program_ids((al.cdiv(a.shape[0], BM),))
            x = al.load(a.tile(BM)[pm])
            y = x
            for _ in al.range(3):
                y = y * 2.0
            al.store(a.tile(BM)[pm], x + y)
        """
    )
    assert any(isinstance(op, Loop) for op in ir.walk())
    src = backend.lower(ir, Policy({"BM": 64}), {"dtype": "bf16"}).source
    assert "y = x\n" in src  # the loop works on a copy: x is read after it
    assert any(isinstance(op, Store) for op in ir.walk())
