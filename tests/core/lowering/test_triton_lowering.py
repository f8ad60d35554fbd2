"""The generic Triton rules (`argus_core.lowering.triton`), their golden files, and the rule
table targets extend. Refresh the golden files with ARGUS_UPDATE_GOLDEN=1 and read the diff."""

from __future__ import annotations

from pathlib import Path

import pytest
from golden_files import check_golden

from argus_core.errors import DSLError
from argus_core.ir import Dot, KernelIR, Load, Store
from argus_core.ir.nodes import AtomicAdd
from argus_core.lowering.rules import RuleTable
from argus_core.lowering.triton import TRITON_RULES, TritonLowering
from argus_core.plugin_manager import Registry, default_plugin_manager
from argus_core.types import Policy

HERE = Path(__file__).parent
POLICY = Policy({"BM": 64, "BN": 64, "BK": 32, "GROUP": 8}, {"num_warps": 4})


@pytest.fixture(scope="module")
def registry():
    return Registry(default_plugin_manager())


@pytest.fixture(scope="module")
def triton(registry):
    """The generic rules alone (the spec is one a backend declares; no generic rule reads it)."""
    return TritonLowering(TRITON_RULES, registry.get("backend", "mi300x").spec)


def parse(registry, family: str, entry: str):
    fam = registry.get("kernel", family)
    return registry.get("dsl", "tile").parse(fam.source(), entry, str(fam.source_path))


@pytest.fixture(scope="module")
def gemm_ir(registry):
    return parse(registry, "gemm", "gemm")


def test_gemm_lowers_to_the_golden_triton(triton, gemm_ir):
    lowered = triton.lower(gemm_ir, POLICY, {"dtype": "bf16"})
    check_golden(HERE / "golden" / "gemm.triton.expected", lowered.source)
    assert lowered.grid == "(triton.cdiv(M, BM) * triton.cdiv(N, BN),)"
    assert lowered.constexprs == POLICY.tiles
    assert [p.binding for p in lowered.params[:6]] == [
        ("tensor", "a"),
        ("tensor", "b"),
        ("tensor", "c"),
        ("shape", "a", 0),
        ("shape", "a", 1),
        ("shape", "b", 1),
    ]


@pytest.mark.parametrize(
    ("family", "entries", "tiles"),
    [
        ("attention", ["attention"], {"BM": 64, "BN": 32, "HEAD_D": 128}),
        (
            "moe",
            ["moe_route", "moe_align", "moe_up", "moe_down", "moe_combine"],
            {"BT": 32, "BE": 128, "BM": 16, "BS": 256, "BN": 32, "BK": 32, "BH": 64},
        ),
    ],
)
def test_family_kernels_lower_to_their_golden_triton(registry, triton, family, entries, tiles):
    sources = []
    for entry in entries:
        ir = parse(registry, family, entry)
        names = {c.name for c in ir.constexprs}
        policy = Policy({k: v for k, v in tiles.items() if k in names})
        sources.append(triton.lower(ir, policy, {"dtype": "bf16"}).source)
    check_golden(HERE / "golden" / f"{family}.triton.expected", "\n\n".join(sources))


def test_lowered_source_is_valid_python_and_defines_the_jit_kernel(triton, gemm_ir):
    src = triton.lower(gemm_ir, POLICY, {"dtype": "bf16"}).source
    compile(src, "lowered.py", "exec")
    assert "@triton.jit\ndef gemm(a, b, c, M, K, N," in src


def test_policy_must_bind_exactly_the_kernel_constexprs(triton, gemm_ir):
    with pytest.raises(DSLError, match=r"missing \['GROUP'\], unknown \['BX'\]"):
        triton.lower(gemm_ir, Policy({"BM": 64, "BN": 64, "BK": 32, "BX": 1}), {"dtype": "bf16"})


def test_an_fp32_run_gets_ieee_dots_and_only_the_dots_change(triton, gemm_ir):
    bf16 = triton.lower(gemm_ir, POLICY, {"dtype": "bf16"}).source.splitlines()
    fp32 = triton.lower(gemm_ir, POLICY, {"dtype": "fp32"}).source.splitlines()
    changed = [(a, b) for a, b in zip(bf16, fp32) if a != b]
    assert len(bf16) == len(fp32) and len(changed) == 1
    assert "tl.dot(x, y, acc, input_precision='ieee')" in changed[0][1]
    assert "input_precision" not in "\n".join(bf16)


def test_a_target_extends_the_table_without_changing_it(triton, gemm_ir):
    def marked_dot(em, op, ind):
        em.emit(ind, f"{em.name(op.out)} = marked()", op)

    marked = triton.extended("marked", {Dot: marked_dot})
    assert marked.rules.name == "marked" and TRITON_RULES.rule_for(gemm_ir) is not None
    assert "marked()" in marked.lower(gemm_ir, POLICY, {"dtype": "bf16"}).source
    assert "marked()" not in triton.lower(gemm_ir, POLICY, {"dtype": "bf16"}).source


def test_rules_follow_the_op_class_and_a_missing_rule_is_named(triton, gemm_ir):
    # AtomicAdd is a Store with a rule of its own: overriding Store leaves it alone
    assert TRITON_RULES.rule_for(object.__new__(AtomicAdd)) is not TRITON_RULES.rule_for(
        object.__new__(Store)
    )
    table = RuleTable("bare", {KernelIR: TRITON_RULES.rule_for(gemm_ir)})
    with pytest.raises(
        DSLError, match=r"the bare lowering has no rule for op 'let'; it has rules for: KernelIR"
    ):
        TritonLowering(table, triton.target).lower(gemm_ir, POLICY, {"dtype": "bf16"})
    assert Load in TRITON_RULES and Load not in table


def _ir_op_types(cls: type) -> set[type]:
    out: set[type] = set()
    for sub in cls.__subclasses__():
        if sub.__module__.startswith("argus_core."):  # the IR's ops, not a test's
            out |= {sub} | _ir_op_types(sub)
    return out


def test_every_ir_op_has_a_generic_triton_rule_and_every_ghost_op_is_erased():
    from argus_core.ir import Op
    from argus_core.lowering.rules import RuleTable
    from argus_core.lowering.triton import GHOST_OPS, TRITON_RULES, erase

    ops = _ir_op_types(Op)
    assert len(ops) >= 20
    missing = sorted(c.__name__ for c in ops if not _has_rule(TRITON_RULES, c))
    assert not missing, f"IR ops without a generic Triton rule: {missing}"
    erased = {c for c in ops if getattr(c, "erased", False)}
    assert erased == set(GHOST_OPS), sorted(c.__name__ for c in erased ^ set(GHOST_OPS))
    assert all(TRITON_RULES._rules[c] is erase for c in GHOST_OPS)
    assert isinstance(TRITON_RULES, RuleTable)


def _has_rule(table, cls: type) -> bool:
    return any(c in table for c in cls.__mro__)


def test_a_load_along_its_first_dim_is_made_transposed_and_transposed_back(registry, triton):
    """`al.load(view, along=0)`: the lowering builds the [BK, BM] pointer block (Triton gives
    its last dim, here the view's first, to neighbouring lanes) and `tl.trans` restores the
    tile; a full-shape mask follows the same permutation. A dim the tile lacks is refused,
    naming the valid ones."""
    src = (
        "from argus_plugins.dsl.tile import lang as al\n\n\n"
        "@al.kernel\n"
        'def k(a: al.Tensor["M", "K"], c: al.Tensor["M", "K"], BM: al.constexpr, BK: al.constexpr):\n'
        "    (pm,) = al.program_ids((al.cdiv(a.shape[0], BM),))\n"
        "    t = al.load(a.tile(BM, BK)[pm, 0], along=ALONG)\n"
        "    al.store(c.tile(BM, BK)[pm, 0], t)\n"
    )
    dsl = registry.get("dsl", "tile")
    policy = Policy({"BM": 32, "BK": 16}, {"num_warps": 4})
    plain = triton.lower(dsl.parse(src.replace("ALONG", "1"), "k", "<t>"), policy, {})
    assert "tl.trans" not in plain.source
    lowered = triton.lower(dsl.parse(src.replace("ALONG", "0"), "k", "<t>"), policy, {})
    line = next(ln for ln in lowered.source.splitlines() if "tl.load" in ln)
    assert line.strip().startswith("t = tl.trans(tl.load(a + (")
    assert "tl.arange(0, BM)[None, :]" in line and "tl.arange(0, BK)[:, None]" in line
    with pytest.raises(DSLError, match=r"along=2: a dim of the 2-D tile \(0, 1\) or None"):
        dsl.parse(src.replace("ALONG", "2"), "k", "<t>")
