"""The provider registry, `llm=none`, lazy imports, and composition of every llm option."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from argus_core.config import compose, group_options, validate
from argus_core.errors import ConfigError
from argus_core.llm import LLMClient, LLMProvider, providers
from argus_core.plugin_manager import Registry, make_plugin_manager

NEW_OPTIONS = ("openai", "anthropic", "local", "replay")


def test_every_conf_option_is_a_registered_provider():
    registry = Registry(make_plugin_manager(autoload=False))
    assert set(group_options("llm")) == {"none", *NEW_OPTIONS}
    assert set(registry.names("llm")) == set(group_options("llm"))
    for name in registry.names("llm"):
        assert isinstance(registry.get("llm", name), LLMProvider)


def test_none_has_no_model():
    none = {p.name: p for p in providers()}["none"]
    assert none.available is False
    assert none.create(compose(["+kernel=gemm"]).llm) is None
    assert all(p.available for p in providers() if p.name != "none")  # litellm is installed


def test_none_and_client_creation_import_no_litellm():
    # a fresh process: the pipeline's path for llm=none, plus creating (not using) a client
    code = """
import json, sys
from argus_core.config import compose
from argus_core.plugin_manager import Registry, make_plugin_manager
registry = Registry(make_plugin_manager(autoload=False))
cfg = compose(["+kernel=gemm"])
assert registry.get("llm", cfg.llm.name).create(cfg.llm) is None
before = "litellm" in sys.modules
client = registry.get("llm", "openai").create({"model": "gpt-4o-mini"})
print(json.dumps([before, "litellm" in sys.modules, client.model]))
"""
    env = {**os.environ, "ARGUS_DISABLE_PLUGIN_AUTOLOAD": "1", "OPENAI_API_KEY": "sk-test"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [False, False, "gpt-4o-mini"]


@pytest.mark.parametrize("option", NEW_OPTIONS)
def test_every_new_option_composes_with_its_defaults(option: str):
    cfg = compose(["+kernel=gemm", f"llm={option}"])
    validate(cfg)
    assert cfg.llm.name == option
    expected = {
        "openai": ("gpt-4o-mini", None),
        "anthropic": ("claude-sonnet-4-5", None),
        "local": (None, "http://localhost:8000/v1"),
        "replay": (None, None),
    }[option]
    assert (cfg.llm.model, cfg.llm.api_base) == expected
    assert cfg.llm.budget_usd == 1.0


OVERRIDES = [
    ("openai", "llm.model=gpt-4.1-mini", "model", "gpt-4.1-mini"),
    ("openai", "llm.options.mock_response=hello", "options.mock_response", "hello"),
    ("openai", "llm.options.max_total_tokens=5000", "options.max_total_tokens", 5000),
    ("anthropic", "llm.options.max_retries=0", "options.max_retries", 0),
    ("anthropic", "llm.budget_usd=0.25", "budget_usd", 0.25),
    ("anthropic", "llm.options.api_key_env=MY_KEY", "options.api_key_env", "MY_KEY"),
    ("local", "llm.api_base=http://gpu7:30000/v1", "api_base", "http://gpu7:30000/v1"),
    ("local", "llm.options.timeout_s=600", "options.timeout_s", 600),
    ("local", "+llm.options.params.temperature=0.3", "options.params.temperature", 0.3),
    ("replay", "llm.options.transcript=/tmp/t.json", "options.transcript", "/tmp/t.json"),
    ("replay", "llm.options.strict=true", "options.strict", True),
]


@pytest.mark.parametrize(("option", "override", "key", "value"), OVERRIDES)
def test_every_new_key_can_be_set(option: str, override: str, key: str, value: object):
    from omegaconf import OmegaConf

    cfg = compose(["+kernel=gemm", f"llm={option}", override])
    assert OmegaConf.select(cfg.llm, key) == value


def test_composed_config_creates_a_working_client():
    cfg = compose(["+kernel=gemm", "llm=openai", "llm.options.mock_response='BM=256'"])
    client = {p.name: p for p in providers()}["openai"].create(cfg.llm)
    assert isinstance(client, LLMClient)
    assert client.complete([{"role": "user", "content": "tile?"}]).text == "BM=256"


def test_misspelled_llm_key_fails_at_composition():
    with pytest.raises(
        ConfigError, match=r"unknown key 'llm.modle'; valid keys of llm: name, model"
    ):
        compose(["+kernel=gemm", "llm=openai", "llm.modle=x"])
    with pytest.raises(ConfigError, match=r"unknown key 'llm.modle'"):
        validate(compose(["+kernel=gemm", "llm=openai", "+llm.modle=x"]))
    with pytest.raises(ConfigError, match=r"unknown llm 'gpt9'; valid choices: anthropic, local"):
        compose(["+kernel=gemm", "llm=gpt9"])
