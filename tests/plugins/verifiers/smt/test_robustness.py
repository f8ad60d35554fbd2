"""Crash fixes: kernels the verifier once crashed on now get a verdict; and the verifier's
configuration keys are checked (a bad key names the valid ones)."""

from __future__ import annotations

import re

import pytest

from argus_core.errors import ConfigError
from argus_core.types import Policy
from argus_plugins.dsl.tile.frontend import TileFrontend
from argus_plugins.verifiers.smt import CONFIG_KEYS, OPTION_KEYS, SmtVerifier
from tests.plugins.verifiers.smt.conftest import GEMM, HERE, target_spec, verify

TASKS = HERE / "frontend" / "tasks"
CONF = HERE.parents[3] / "conf" / "verifier" / "smt.yaml"


def _emitted(key: str):
    from argus_core.frontend import capture_task
    from argus_plugins.kernels.kernelbench import match, tasks

    gm, _ = capture_task(tasks.load_module(tasks.resolve(TASKS, key).path), key)
    em = match.match(gm, key)
    ir = TileFrontend().parse(em.source, em.entry, f"<{key}>")
    return em, ir, Policy({k: v[0] for k, v in em.tiles.items()})


def test_level2_97_unary_op_on_a_tensor_typed_tile_is_not_an_index_error():
    """KernelBench level2/97's emission takes `al.sqrt` of a tile typed like a tensor
    (`like:vec2`, which value tracking does not know to be float) next to an
    `al.load_scalar` (which turns value tracking on): `_elementwise` read a second operand
    of a unary op (IndexError). It now gives the tile no value, and the kernel verifies."""
    em, ir, pol = _emitted("level2/97")
    assert "al.sqrt(" in em.source and "al.load_scalar(" in em.source
    report = SmtVerifier().verify(ir, pol, {}, target_spec())
    assert report.status == "verified", report.summary
    # and a planted bug in the same kernel is still caught (the fix hides nothing)
    bad = em.source.replace("al.load(vec0.tile(BN)[pn])", "al.load(vec0.tile(BN)[pn + 1])")
    assert bad != em.source
    ir2 = TileFrontend().parse(bad, em.entry, "<level2/97 planted>")
    report = SmtVerifier().verify(ir2, pol, {}, target_spec())
    assert report.status == "violated", report.summary


CONST_TAG = """
from argus_plugins.dsl.tile import lang as al


@al.kernel
def k(x: al.Tensor["N"], y: al.Tensor["N"], BN: al.constexpr):
    (p,) = al.program_ids((al.cdiv(x.shape[0], BN),))
    first = al.load_scalar(x, 0)  # a data op: values of integer tiles are tracked
    v = al.zeros((BN,), al.i32) + VALUE
    al.tag(v, lambda r: (r,), "t")
    v = al.expect(v, lambda _r: al.at(v) >= 0, name="t", arity=1)
    al.store(y.tile(BN)[p], al.load(x.tile(BN)[p]) + first)
"""


@pytest.mark.parametrize("value, status", [(3, "verified"), (-2, "violated")])
def test_assert_tag_whose_predicate_folds_to_a_constant(value, status, tmp_path):
    """`al.at(v) >= 0` of a constant tile folds to a constant once the tile's value is
    substituted: `assert_tag` called `.subs` on an int (AttributeError). A true constant is
    now proved, a false one violated at every element, with a counterexample."""
    path = tmp_path / "const_tag.py"
    path.write_text(CONST_TAG.replace("VALUE", str(value)))
    ir = TileFrontend().parse(path.read_text(), "k", str(path))
    report = SmtVerifier().verify(ir, Policy({"BN": 16}), {}, target_spec())
    assert report.status == status, report.summary
    if status == "violated":
        cex = report.counterexamples[0]
        assert cex["assertion"] == "assert_tag" and cex["program_point"]["line"] == 11


def test_a_bad_option_key_names_the_valid_ones():
    with pytest.raises(ConfigError, match=r"'verifier.options.minimise_checks'.*minimize_checks"):
        verify(GEMM, {"options": {"minimise_checks": 3}})
    with pytest.raises(ConfigError, match=r"unknown verifier key 'timeout'.*timeout_ms"):
        verify(GEMM, {"timeout": 3})


def test_the_config_file_lists_every_option_the_code_reads():
    """conf/verifier/smt.yaml names each option the verifier reads (all but `synthesize`,
    which the pipeline reads and a run adds with `+verifier.options.synthesize=true`), and
    every key it names is valid."""
    import yaml

    conf = yaml.safe_load(CONF.read_text())
    assert set(conf["options"]) == set(OPTION_KEYS) - {"timeout_ms", "synthesize"}
    _ir, _pol, report = verify(GEMM, conf)
    assert report.status == "verified", report.summary
    for name in ("solver.py", "__init__.py"):  # every options.get(...) key is a valid one
        text = (HERE.parents[3] / "plugins" / "verifiers" / "smt" / name).read_text()
        keys = re.findall(r'opt(?:ion)?s\.get\("(\w+)"', text)
        assert keys and set(keys) <= set(OPTION_KEYS) | set(CONFIG_KEYS), keys
