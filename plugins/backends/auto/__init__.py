"""`backend=auto`: the GPU this machine has (an H200, H100 or MI300X, in the order of
`options.prefer`), else the CPU default (`options.fallback`: MI300X cross-compilation with
the interpreter for correctness), each with its own policy grid from `options.grids`."""

from __future__ import annotations

from typing import Any

from argus_core.errors import ConfigError
from argus_core.hookspecs import hookimpl


class AutoBackend:
    name = "auto"

    def resolve(self, registry: Any, cfg: Any) -> tuple[Any, dict[str, list[Any]]]:
        """(the backend to use, its policy grid)."""
        options = dict(cfg.get("options") or {})
        prefer = list(options.get("prefer") or [])
        fallback = options.get("fallback") or "mi300x"
        grids = {k: dict(v) for k, v in dict(options.get("grids") or {}).items()}
        for name in prefer:
            backend = registry.get("backend", name)
            if backend.device_available():
                return backend, grids.get(name, {})
        if fallback == self.name:
            raise ConfigError("backend=auto: options.fallback must name a real backend, not 'auto'")
        return registry.get("backend", fallback), grids.get(fallback, {})


@hookimpl
def argus_register_backends():
    return [AutoBackend()]
