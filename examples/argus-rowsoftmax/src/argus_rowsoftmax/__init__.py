"""An example Argus plugin: the `row_softmax` kernel family, the `mi300x_lowocc` backend,
their config options, a knowledge-base entry and the KB target of the backend.

Argus imports this module through the entry point `rowsoftmax = "argus_rowsoftmax"` of
the group `argus` and registers the hook implementations below with its plugin manager.
"""

from __future__ import annotations

from typing import Any

from argus_core.hookspecs import hookimpl
from argus_rowsoftmax.backend import Mi300xLowOccBackend
from argus_rowsoftmax.family import RowSoftmaxFamily

__all__ = ["Mi300xLowOccBackend", "RowSoftmaxFamily"]


@hookimpl
def argus_register_kernels() -> list[Any]:
    return [RowSoftmaxFamily()]


@hookimpl
def argus_register_backends() -> list[Any]:
    return [Mi300xLowOccBackend()]


@hookimpl
def argus_kb_targets() -> dict[str, str | None]:
    # the knowledge base's mi300x techniques apply to the low-occupancy MI300X backend too
    return {"mi300x_lowocc": "mi300x"}


@hookimpl
def argus_config_search_paths() -> list[str]:
    # conf/kernel/row_softmax.yaml and conf/backend/mi300x_lowocc.yaml join Argus's groups
    return ["pkg://argus_rowsoftmax.conf"]


@hookimpl
def argus_kb_paths() -> list[str]:
    return ["pkg://argus_rowsoftmax/kb"]
