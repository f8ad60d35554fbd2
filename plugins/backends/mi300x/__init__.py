"""The `mi300x` backend plugin: AMD Instinct MI300X (gfx942)."""

from __future__ import annotations

from typing import Any

from argus_core.hookspecs import hookimpl
from argus_plugins.backends.mi300x.backend import Mi300xBackend

__all__ = ["Mi300xBackend"]


@hookimpl
def argus_register_backends() -> list[Any]:
    return [Mi300xBackend()]


@hookimpl
def argus_kb_targets() -> dict[str, str | None]:
    """The knowledge base's techniques for this target apply to these backends."""
    return {"mi300x": "mi300x"}
