"""A planner's `ctx` as the pipeline builds it, from the real configs and plugins."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from argus_core.kb import KnowledgeBase
from argus_core.kb import load as load_kb
from argus_core.pipeline import Stages
from argus_core.plugin_manager import Registry, default_plugin_manager

PlannerCtx = Callable[..., dict[str, Any]]


@pytest.fixture(scope="session")
def knowledge_base() -> KnowledgeBase:
    return load_kb()


@pytest.fixture
def planner_ctx(argus_config) -> PlannerCtx:
    """`planner_ctx(*overrides)`: the ctx `planner.create` gets for `argus OVERRIDES`."""

    def make(*overrides: str) -> dict[str, Any]:
        cfg = argus_config(*overrides)
        stages = Stages.from_config(cfg, Registry(default_plugin_manager()))
        return {
            "family": stages.family,
            "dsl": stages.dsl,
            "backend": stages.backend,
            "kernel_cfg": cfg.kernel,
            "backend_cfg": stages.backend_cfg,
            "seed": int(cfg.seed),
            "budget": int(cfg.budget),
        }

    return make
