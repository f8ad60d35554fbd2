"""Every bad value is rejected before any candidate runs, by a message that names the value
and what would be valid (issue #13). Each case goes the way `argus OVERRIDES` goes: compose,
validate, then the pipeline's start (`pipeline.run`), which binds the family, checks its
declared dims and dtypes, parses a user's DSL file, and creates the planner and the LLM
client. A case that got as far as a candidate would print the run's table: asserted absent."""

from __future__ import annotations

from pathlib import Path

import pytest

from argus_core.config import compose, validate
from argus_core.errors import ConfigError
from argus_core.plugin_manager import Registry, default_plugin_manager

BAD_DSL = Path(__file__).parent / "data" / "bad_syntax_kernel.txt"  # not .py: ruff would parse it

# (overrides, texts the message must contain): the bad value and the valid choices/range
CASES: list[tuple[list[str], list[str]]] = [
    (["kernel.dtype=fp7"], ["'fp7'", "valid choices: bf16, fp16, fp32"]),
    (["kernel.dtype=fp64"], ["'fp64'", "valid choices: bf16, fp16, fp32"]),
    (["+kernel=attention", "kernel.dtype=fp32"], ["attention 'fp32'", "choices: bf16, fp16"]),
    (["+kernel=moe", "kernel.dtype=int8"], ["moe 'int8'", "valid choices: bf16, fp16"]),
    (["kernel.shape.M=0"], ["kernel.shape.M 0", "integer >= 1"]),
    (["kernel.shape.K=-5"], ["kernel.shape.K -5", "integer >= 1"]),
    (["+kernel=attention", "kernel.shape.D=0"], ["kernel.shape.D 0", "integer >= 1"]),
    (["+kernel=attention", "kernel.shape.CAUSAL=-1"], ["kernel.shape.CAUSAL -1", ">= 0"]),
    (["+kernel=moe", "kernel.shape.TOPK=0"], ["kernel.shape.TOPK 0", "integer >= 1"]),
    (["+kernel.shape.Q=3"], ["unknown dims ['Q']", "dims M, N, K"]),
    (["kernel.shape.Q=3"], ["'kernel.shape.Q'", "valid keys of kernel.shape: M, N, K"]),
    # hung for ever before: compose -> explain -> node_keys -> compose
    (["kernel.shape={M:64,N:64,K:64,Q:3}"], ["'kernel.shape.Q'", "M, N, K"]),
    (["~kernel.shape.K"], ["missing dims ['K']", "dims M, N, K"]),
    (["kernel.check_shapes=[{M:0,N:8,K:8}]"], ["kernel.check_shapes[0].M 0", ">= 1"]),
    (["kernel.tiles.BM=[]"], ["kernel.tiles.BM []", "non-empty list of integers >= 1"]),
    (["kernel.tiles.BM=[0,64]"], ["kernel.tiles.BM [0, 64]", "integers >= 1"]),
    (["kernel.tiles.BK=[-32]"], ["kernel.tiles.BK [-32]", "integers >= 1"]),
    (["kernel.shape.M=big"], ["'big' for kernel.shape.M", "expected int"]),
    (["kernel.dtpye=bf16"], ["'kernel.dtpye'", "name, dtype, shape"]),
    (["backend=nope"], ["unknown backend 'nope'", "interpret", "mi300x"]),
    (["planner=nope"], ["unknown planner 'nope'", "baseline", "icrl", "search"]),
    (["verifier=nope"], ["unknown verifier 'nope'", "none", "smt"]),
    (["+kernel=nope"], ["unknown kernel 'nope'", "attention", "gemm", "moe"]),
    (["progress=loud"], ["progress 'loud'", "auto, on, off"]),
    (["evaluate.correctness=gpu"], ["'gpu'", "auto, interpret, device, off"]),
    (["budget=0"], ["budget 0", "integer >= 1"]),
    (["cache=ram"], ["unknown cache 'ram'", "valid choices: disk, off"]),
    (["cache.name=ram"], ["cache.name 'ram'", "valid choices: disk, off"]),
    (["cache.measured=maybe"], ["'maybe' for cache.measured", "expected bool"]),
    (["evaluate.timeout_s=-1"], ["evaluate.timeout_s -1", "> 0"]),
    (["planner=search", "planner.options.mode=psychic"], ["'psychic'", "valid choices"]),
    (["llm=openai"], ["$OPENAI_API_KEY is not set", "llm.options.api_key_env", "llm=none"]),
    (["llm=anthropic"], ["$ANTHROPIC_API_KEY is not set", "llm=none"]),
    (["llm=local"], ["llm=local needs a model", "llm.model=NAME"]),
    (["kernel.source=/nonexistent/k.py"], ["'/nonexistent/k.py'", "no such file"]),
    ([f"kernel.source={BAD_DSL}"], [f"{BAD_DSL.name}", "does not parse", ":3:"]),
]


def _start(overrides: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The message `argus OVERRIDES` stops with (exit 2), from wherever it is raised."""
    from argus_core.pipeline import EXIT_BAD_INPUT, run

    if not any(o.lstrip("+").startswith("kernel=") for o in overrides):
        overrides = ["+kernel=gemm", *overrides]
    overrides = ["tracking=none", "backend=interpret", "budget=1", *overrides]
    try:
        cfg = compose(overrides)
        validate(cfg, plugin_names=Registry(default_plugin_manager()).names)
    except ConfigError as exc:
        return str(exc)
    status = run(cfg)
    out = capsys.readouterr()
    assert status == EXIT_BAD_INPUT, out.out[-2000:] + out.err[-2000:]
    assert "candidate" not in out.out  # stopped before the first one
    return out.err


@pytest.mark.parametrize(("overrides", "expected"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_a_bad_value_stops_the_run_at_start_naming_it(
    overrides, expected, capsys, monkeypatch, tmp_path
):
    monkeypatch.chdir(tmp_path)
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    message = _start(overrides, capsys)
    for text in expected:
        assert text in message, message


def test_the_table_has_at_least_twenty_cases():
    assert len(CASES) >= 20


def test_good_values_of_the_same_kind_pass_the_family_check():
    from argus_core.config import check_kernel

    registry = Registry(default_plugin_manager())
    for kernel, extra in (("gemm", []), ("attention", ["kernel.shape.CAUSAL=0"]), ("moe", [])):
        cfg = compose([f"+kernel={kernel}", *extra])
        family = registry.get("kernel", kernel)
        check_kernel(family, cfg.kernel)  # the shipped defaults are valid
        assert family.dtypes and cfg.kernel.dtype in family.dtypes
        assert [d for d, _ in family.shape_dims] == list(cfg.kernel.shape)
