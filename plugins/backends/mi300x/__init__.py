"""The `mi300x` backend plugin: AMD Instinct MI300X (gfx942)."""

from __future__ import annotations

from typing import Any

from argus_core.hookspecs import hookimpl
from argus_plugins.backends.mi300x.backend import Mi300xBackend

__all__ = ["Mi300xBackend"]


@hookimpl
def argus_register_backends() -> list[Any]:
    return [Mi300xBackend()]
