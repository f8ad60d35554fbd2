"""The LLM protocol every planner codes against, and its errors.

A provider (the plugin registered by `argus_register_llms`, named as its `conf/llm/` option)
is a factory: `create(cfg)` gives one `LLMClient` per run, or None for `llm=none`. A client
answers chat requests with an `LLMReply` and keeps a ledger of every request and reply
(`transcript()`) and their totals (`usage()`), so a run can be logged and replayed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from argus_core.errors import ArgusError, ConfigError

# the keys of `LLMClient.usage()`, in the order they are reported
USAGE_KEYS: tuple[str, ...] = ("requests", "prompt_tokens", "completion_tokens", "cost_usd")


@dataclass
class LLMReply:
    """One answer of a model: its text, the model that wrote it, and what it cost."""

    text: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0


class LLMBudgetExceeded(ArgusError):
    """A request would start after the run's token or cost budget is spent."""

    def __init__(self, budget: str, limit: float, spent: float, requests: int):
        self.budget, self.limit, self.spent, self.requests = budget, limit, spent, requests
        super().__init__(
            f"LLM budget spent: {budget}={limit:g} but {spent:g} already used by "
            f"{requests} request(s); raise llm.{budget} to allow more"
        )


class LLMError(ArgusError):
    """A non-transient provider failure (or transient ones past the retries), with the reason."""


@runtime_checkable
class LLMClient(Protocol):
    """One model for one run. Every request and reply is kept, with its tokens and cost."""

    model: str

    def complete(self, messages: list[dict[str, str]], **kwargs: Any) -> LLMReply:
        """The model's reply to `messages` ([{"role": ..., "content": ...}, ...]).
        Raises LLMBudgetExceeded before a request once the budget is spent, and LLMError
        for a failure that retrying did not (or could not) fix."""

    def usage(self) -> dict[str, float]:
        """Totals so far: {"requests", "prompt_tokens", "completion_tokens", "cost_usd"}."""

    def transcript(self) -> list[dict[str, Any]]:
        """Every request and reply so far (messages, reply text, tokens, cost, seconds)."""


@runtime_checkable
class LLMProvider(Protocol):
    """The registered plugin: a factory of clients, named as its `conf/llm/<name>.yaml`."""

    name: str
    available: bool  # False for `none`: there is no model to ask

    def create(self, cfg: Any) -> LLMClient | None:
        """A client for one run from the `llm` config group (DictConfig or dict);
        None when the option means no LLM."""


def config_dict(cfg: Any) -> dict[str, Any]:
    """The `llm` group as a plain, resolved dict, whether given a DictConfig or a mapping."""
    from omegaconf import DictConfig, OmegaConf

    if cfg is None:
        return {}
    if isinstance(cfg, DictConfig):
        return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
    if isinstance(cfg, Mapping):
        return {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in cfg.items()}
    raise ConfigError(f"llm config must be a mapping or DictConfig, got {type(cfg).__name__}")


def check_options(provider: str, options: Mapping[str, Any], valid: Iterable[str]) -> None:
    """Raise ConfigError naming an `llm.options` key this provider does not know."""
    valid = sorted(valid)
    for key in options:
        if key not in valid:
            raise ConfigError(
                f"unknown key 'llm.options.{key}' for llm={provider}; valid keys: {', '.join(valid)}"
            )
