"""The `tracking` config group: how its fields are read and defaulted for MLflow.

A tracker receives its group (schema: `argus_core.config.TrackingConfig`) as a DictConfig
or a plain dict; `field` reads either, and a null value means "use the default".
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# MLflow's limits (mlflow.utils.validation), copied so this module never imports mlflow
MAX_KEY_LENGTH = 250
MAX_PARAM_VALUE_LENGTH = 6000
MAX_TAG_VALUE_LENGTH = 8000
MAX_RUN_NAME_LENGTH = 250

# keys may hold alphanumerics, underscores, dashes, periods, spaces, colons and slashes
_BAD_KEY_CHARS = re.compile(r"[^\w\-. :/]")


def field(cfg: Any, key: str, default: Any = None) -> Any:
    """`cfg[key]` from a DictConfig, a dict, a dataclass or None; `default` when absent or null."""
    if cfg is None:
        return default
    value = cfg.get(key, default) if isinstance(cfg, Mapping) else getattr(cfg, key, default)
    return default if value is None else value


def is_local_uri(uri: str) -> bool:
    """True for stores on this machine's disk (SQLite or a file store), whose artifacts
    Argus places itself; False for servers, which choose their own artifact location."""
    return uri.startswith(("sqlite:", "file:", "/", "."))


@dataclass(frozen=True)
class MlflowSettings:
    """The `tracking` group with every default filled in, paths made absolute."""

    uri: str
    experiment: str
    artifact_location: str | None
    run_name: str | None  # None: made from the run's kernel and planner when it starts

    @classmethod
    def from_config(cls, cfg: Any, cwd: str | None = None, create: bool = True) -> MlflowSettings:
        """Read the group; the default SQLite store's directory is created here unless
        `create` is False (a reader such as `argus report` must not make one)."""
        base = Path(cwd or os.getcwd()).resolve() / ".argus"
        uri = field(cfg, "uri")
        if uri is None:
            if create:
                base.mkdir(parents=True, exist_ok=True)
            uri = f"sqlite:///{base / 'mlflow.db'}"
        artifacts = field(cfg, "artifact_location")
        if artifacts is None and is_local_uri(uri):
            artifacts = str(base / "artifacts")
        return cls(
            uri=str(uri),
            experiment=str(field(cfg, "experiment", "argus")),
            artifact_location=None if artifacts is None else str(artifacts),
            run_name=field(cfg, "run_name"),
        )


def clean_key(key: str) -> str:
    """A key MLflow accepts: disallowed characters become '_', cut to MLflow's length."""
    return _BAD_KEY_CHARS.sub("_", key)[:MAX_KEY_LENGTH]


def clip(value: Any, limit: int) -> str:
    """`str(value)` cut to `limit` characters, marked with '...' when cut."""
    text = str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def flatten_config(config: Any, prefix: str = "") -> dict[str, str]:
    """A nested config as {'dotted.key': 'value'}; lists become JSON text, null 'null'.

    Accepts DictConfig (resolved first) or plain mappings.
    """
    try:  # omegaconf is a core dependency, but a plain dict needs none of it
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(config, (DictConfig, ListConfig)):
            config = OmegaConf.to_container(config, resolve=True)
    except ImportError:
        pass
    flat: dict[str, str] = {}
    if isinstance(config, Mapping):
        for key, value in config.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, Mapping) and value:
                flat.update(flatten_config(value, name))
            else:
                flat[name] = _text(value)
    elif prefix:
        flat[prefix] = _text(config)
    return flat


def _text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, default=str)
    return str(value)
