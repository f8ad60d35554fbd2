"""NVIDIA Hopper backends: `backend=h100` and `backend=h200` (sm_90)."""

from __future__ import annotations

from typing import Any

from argus_core.hookspecs import hookimpl
from argus_plugins.backends.hopper.backend import HopperBackend, backends

__all__ = ["HopperBackend"]


@hookimpl
def argus_register_backends() -> list[Any]:
    return backends()


@hookimpl
def argus_kb_targets() -> dict[str, str | None]:
    """The knowledge base's techniques for this target apply to these backends."""
    return {"h100": "hopper", "h200": "hopper"}
