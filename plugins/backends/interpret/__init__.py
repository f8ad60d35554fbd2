"""The `interpret` backend plugin: Triton's CPU interpreter."""

from __future__ import annotations

from typing import Any

from argus_core.hookspecs import hookimpl
from argus_plugins.backends.interpret.backend import InterpretBackend

__all__ = ["InterpretBackend"]


@hookimpl
def argus_register_backends() -> list[Any]:
    return [InterpretBackend()]


@hookimpl
def argus_kb_targets() -> dict[str, str | None]:
    """The knowledge base's techniques for this target apply to these backends."""
    return {"interpret": None}
