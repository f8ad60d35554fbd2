"""Errors that name the bad value and the valid choices."""

from __future__ import annotations

from collections.abc import Iterable


class ArgusError(Exception):
    """Base class: every error Argus raises on purpose. `stage` names the pipeline stage a
    candidate fails at when this error escapes a stage (subclasses set their own)."""

    stage: str = "pipeline"


class ConfigError(ArgusError):
    """A configuration value is wrong."""


class UnknownPluginError(ConfigError):
    """A config option names a plugin that nobody registered."""

    def __init__(self, kind: str, name: str, known: Iterable[str]):
        self.kind, self.name, self.known = kind, name, sorted(known)
        super().__init__(
            f"unknown {kind} {name!r}; valid choices: {', '.join(self.known) or '(none registered)'}"
        )


class PolicyError(ConfigError):
    """A policy names an option the target lacks, or a value outside its valid range."""


class DSLError(ArgusError):
    """A malformed DSL program. `where` is 'file:line' of the offending DSL statement."""

    def __init__(self, message: str, where: str | None = None):
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


def choices_error(kind: str, value: object, valid: Iterable[object]) -> str:
    """One-line message for a value outside a closed set."""
    return f"invalid {kind} {value!r}; valid choices: {', '.join(map(str, valid))}"
