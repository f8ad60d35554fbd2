"""Shared fixtures: an offline, isolated environment, and the `argus` CLI in a subprocess.

The environment is set when this file is imported, before any test module imports MLflow,
litellm or Triton (they read it at import time). TRITON_INTERPRET is never set here: a
process that sets it must not also call `triton.compile`, so tests set it only in the child
processes that need it.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from omegaconf import DictConfig

OFFLINE_ENV: dict[str, str] = {
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
}

for _key, _value in OFFLINE_ENV.items():
    os.environ.setdefault(_key, _value)
if "TRITON_CACHE_DIR" not in os.environ:
    # one fresh cache per session: compiles are real, and never land in ~/.triton
    _cache = tempfile.mkdtemp(prefix="argus-triton-cache-")
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)
    os.environ["TRITON_CACHE_DIR"] = _cache

RunArgus = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture(autouse=True)
def _own_result_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own result cache (argus_core.cache, `cache.dir` defaults to
    $ARGUS_CACHE_DIR), in this process and in the `argus` processes it starts: no test
    reuses another's verify, compile or check results, and none lands in the checkout."""
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path / "argus-result-cache"))


@pytest.fixture
def run_argus(tmp_path: Path) -> RunArgus:
    """`run_argus(*args, cwd=tmp_path, env=None, timeout=300)` runs `python -m argus_core.cli
    ARGS` in a child process and returns the CompletedProcess (text stdout and stderr).

    The child gets this session's environment plus `env` (a value of None removes that
    variable); its working directory, where `.argus/` is written, defaults to tmp_path.
    """

    def run(
        *args: str,
        cwd: Path | str | None = None,
        env: Mapping[str, str | None] | None = None,
        timeout: float = 300,
    ) -> subprocess.CompletedProcess[str]:
        # HYDRA_FULL_ERROR=0: Hydra's short error reports, as a user would see them
        child_env = {**os.environ, **OFFLINE_ENV, "HYDRA_FULL_ERROR": "0"}
        child_env.pop("TRITON_INTERPRET", None)  # the CLI may compile; children opt in
        for key, value in (env or {}).items():
            if value is None:
                child_env.pop(key, None)
            else:
                child_env[key] = value
        return subprocess.run(
            [sys.executable, "-m", "argus_core.cli", *args],
            cwd=str(cwd or tmp_path),
            env=child_env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    return run


@pytest.fixture
def argus_config() -> Callable[..., DictConfig]:
    """`argus_config(*overrides)` composes and validates the config as `argus OVERRIDES`
    would (plugin names are not checked), in this process; raises ConfigError if bad."""
    from argus_core.config import compose, validate

    def make(*overrides: str) -> DictConfig:
        cfg = compose(list(overrides))
        validate(cfg)
        return cfg

    return make
