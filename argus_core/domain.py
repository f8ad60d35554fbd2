"""A declared shape domain (`kernel.domain`): the shapes a kernel is proved for.

By default the verifier proves a kernel for every extent of every shape symbol in
[1, max_extent] where the kernel's own `al.requires` hold. A run may narrow that, and so
prove what holds only there (a kernel without masks, correct only when K is a multiple of
its tile):

    argus +kernel=gemm 'kernel.domain={M: {max: 8192}, K: {multiple_of: 64}}'

Each entry names a shape symbol of the kernel (as its DSL signature names its dims) and any
of `min`, `max` (inclusive) and `multiple_of`. `with_domain` adds them to the kernel's IR as
preconditions (ghost `Requires` ops at program point `kernel.domain`): the verifier assumes
them in every query, like the kernel's own; the lowering erases them. `argus export` writes
the same domain into the package, whose op refuses calls outside it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from argus_core.errors import ConfigError
from argus_core.ir.expr import Sym
from argus_core.ir.nodes import ProgramPoint
from argus_core.ir.tags import Requires

KEYS = ("min", "max", "multiple_of")
POINT = "kernel.domain"


def parse_domain(domain: Any, max_extent: int | None = None) -> dict[str, dict[str, int]]:
    """`kernel.domain` as {symbol: {min|max|multiple_of: int}}; a ConfigError names a bad
    key or value and the valid ones."""
    if domain is None:
        return {}
    if not isinstance(domain, Mapping):
        raise ConfigError(
            f"kernel.domain={domain!r} must map shape symbols to bounds, e.g. "
            "{M: {max: 8192}, K: {multiple_of: 64}}"
        )
    out: dict[str, dict[str, int]] = {}
    for sym, bounds in domain.items():
        if not isinstance(bounds, Mapping) or not bounds:
            raise ConfigError(
                f"kernel.domain.{sym}={bounds!r} must give any of {', '.join(KEYS)}, "
                f"e.g. {{max: 8192}}"
            )
        entry: dict[str, int] = {}
        for key, value in bounds.items():
            if key not in KEYS:
                raise ConfigError(
                    f"kernel.domain.{sym}.{key} is not a bound; valid: {', '.join(KEYS)}"
                )
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"kernel.domain.{sym}.{key}={value!r} must be a positive integer")
            entry[str(key)] = int(value)
        if entry.get("min", 1) > entry.get("max", entry.get("min", 1)):
            raise ConfigError(
                f"kernel.domain.{sym}: min={entry['min']} is above max={entry['max']}"
            )
        if max_extent is not None and entry.get("max", 0) > max_extent:
            raise ConfigError(
                f"kernel.domain.{sym}.max={entry['max']} is above the verifier's max_extent "
                f"{max_extent} (verifier.options.max_extent)"
            )
        out[str(sym)] = entry
    return out


def predicates(domain: Mapping[str, Mapping[str, int]]) -> list[tuple[str, Any]]:
    """(symbol, predicate) for every bound of `domain`."""
    preds = []
    for name, bounds in domain.items():
        s = Sym(name, "shape")
        if "min" in bounds and bounds["min"] > 1:
            preds.append((name, s >= bounds["min"]))
        if "max" in bounds:
            preds.append((name, s <= bounds["max"]))
        if bounds.get("multiple_of", 1) > 1:
            preds.append((name, (s % bounds["multiple_of"]).eq(0)))
    return preds


def check_names(domain: Mapping[str, Any], irs: list[Any]) -> None:
    """Every symbol of `domain` is a shape symbol of one of `irs`, else a ConfigError naming
    the valid ones."""
    known = sorted({s.name for ir in irs for s in ir.shape_syms})
    unknown = [n for n in domain if n not in known]
    if unknown:
        raise ConfigError(
            f"kernel.domain names {unknown}, not shape symbols of the kernel; valid: "
            f"{', '.join(known)}"
        )


def with_domain(ir: Any, domain: Mapping[str, Mapping[str, int]]) -> Any:
    """`ir` with `domain`'s bounds on its own shape symbols added as preconditions (ghost
    `Requires` first in its ops); `ir` itself when none apply."""
    names = {s.name for s in ir.shape_syms}
    point = ProgramPoint(POINT, 0, "requires")
    ops = [Requires(point, pred) for name, pred in predicates(domain) if name in names]
    if not ops:
        return ir
    return dataclasses.replace(ir, ops=ops + list(ir.ops))


__all__ = ["parse_domain", "check_names", "with_domain", "predicates", "KEYS", "POINT"]
