"""`backend=auto`: the GPU this machine has (an H200, H100 or MI300X, in the order of
`options.prefer`), else the CPU default (`options.fallback`: MI300X cross-compilation with
the interpreter for correctness), each with its own policy grid from `options.grids`.

`auto` only chooses: the pipeline calls every backend's `resolve` and runs the one it
returns, so `auto` itself never lowers, compiles or estimates and declares no target.
"""

from __future__ import annotations

from typing import Any

from argus_core.errors import ConfigError
from argus_core.hookspecs import hookimpl


class AutoBackend:
    name = "auto"

    def resolve(self, registry: Any, cfg: Any) -> tuple[Any, Any]:
        """(the backend to use, resolved in its turn, and its policy grid)."""
        options = dict(cfg.get("options") or {})
        prefer = list(options.get("prefer") or [])
        fallback = options.get("fallback") or "mi300x"
        grids = {k: dict(v) for k, v in dict(options.get("grids") or {}).items()}
        for name in prefer:
            backend = registry.get("backend", name)
            if backend.device_available():
                return _resolved(registry, name, grids)
        if fallback == self.name:
            raise ConfigError("backend=auto: options.fallback must name a real backend, not 'auto'")
        return _resolved(registry, fallback, grids)


def _resolved(registry: Any, name: str, grids: dict[str, dict[str, Any]]) -> tuple[Any, Any]:
    """Backend `name` as its own resolve gives it (the interpreter binds its target), with
    auto's grid for it."""
    backend, _ = registry.get("backend", name).resolve(
        registry, {"name": name, "policy_grid": grids.get(name, {})}
    )
    return backend, grids.get(name, {})


@hookimpl
def argus_register_backends():
    return [AutoBackend()]
