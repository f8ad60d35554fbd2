"""Builds the pluggy manager: hook specs, built-in plugins by name, entry points.

Built-ins are listed by module name (as pytest lists its own); third-party packages are
found through the `argus` entry-point group unless ARGUS_DISABLE_PLUGIN_AUTOLOAD is set.
"""

from __future__ import annotations

import importlib
import os
from functools import lru_cache
from typing import Any

import pluggy

from argus_core import hookspecs
from argus_core.errors import UnknownPluginError

ENTRY_POINT_GROUP = "argus"

BUILTIN_PLUGINS: tuple[str, ...] = (
    "argus_plugins.kernels.gemm",
    "argus_plugins.kernels.attention",
    "argus_plugins.kernels.moe",
    "argus_plugins.kernels.kernelbench",
    "argus_core.tracking",
    "argus_plugins.dsl.tile",
    "argus_plugins.verifiers",
    "argus_plugins.backends.mi300x",
    "argus_plugins.backends.interpret",
    "argus_plugins.backends.hopper",
    "argus_plugins.backends.auto",
    "argus_plugins.planners.baseline",
    "argus_plugins.planners.search",
    "argus_plugins.planners.icrl",
    "argus_core.llm",
)

# collector hook name -> the kind of plugin it registers (used in error messages)
KINDS: dict[str, str] = {
    "dsl": "argus_register_dsls",
    "verifier": "argus_register_verifiers",
    "backend": "argus_register_backends",
    "planner": "argus_register_planners",
    "llm": "argus_register_llms",
    "kernel": "argus_register_kernels",
    "tracking": "argus_register_trackers",
}


def make_plugin_manager(autoload: bool | None = None) -> pluggy.PluginManager:
    """A fresh manager with every built-in registered and, unless disabled, entry points."""
    pm = pluggy.PluginManager("argus")
    pm.add_hookspecs(hookspecs)
    for modname in BUILTIN_PLUGINS:
        try:
            module = importlib.import_module(modname)
        except ModuleNotFoundError as exc:
            if exc.name and modname.startswith(exc.name):
                continue  # a built-in not present in this checkout yet
            raise
        pm.register(module, name=modname)
    if autoload is None:
        autoload = not os.environ.get("ARGUS_DISABLE_PLUGIN_AUTOLOAD")
    if autoload:
        pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
    return pm


@lru_cache(maxsize=1)
def default_plugin_manager() -> pluggy.PluginManager:
    return make_plugin_manager()


class Registry:
    """Name -> plugin object, per kind, collected from the manager's collector hooks."""

    def __init__(self, pm: pluggy.PluginManager):
        self.pm = pm
        self._by_kind: dict[str, dict[str, Any]] = {}

    def all(self, kind: str) -> dict[str, Any]:
        if kind not in KINDS:
            raise KeyError(f"unknown plugin kind {kind!r}; valid: {', '.join(KINDS)}")
        if kind not in self._by_kind:
            found: dict[str, Any] = {}
            for provided in getattr(self.pm.hook, KINDS[kind])():
                for plugin in provided or []:
                    found[plugin.name] = plugin
            self._by_kind[kind] = found
        return self._by_kind[kind]

    def get(self, kind: str, name: str) -> Any:
        plugins = self.all(kind)
        if name not in plugins:
            raise UnknownPluginError(kind, name, plugins)
        return plugins[name]

    def names(self, kind: str) -> list[str]:
        return sorted(self.all(kind))


def config_search_paths(pm: pluggy.PluginManager) -> list[str]:
    paths: list[str] = []
    for provided in pm.hook.argus_config_search_paths():
        paths.extend(provided or [])
    return paths
