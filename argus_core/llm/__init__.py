"""LLM providers, a plugin kind: `none`, `openai`, `anthropic`, `local`, `replay`.

Each registered provider is a factory: `registry.get("llm", cfg.llm.name).create(cfg.llm)`
gives one `LLMClient` for the run, or None for `llm=none` (planners then work offline from
their own rules). Importing this package imports no litellm.
"""

from __future__ import annotations

from typing import Any

from argus_core.hookspecs import hookimpl
from argus_core.llm.base import (
    USAGE_KEYS,
    LLMBudgetExceeded,
    LLMClient,
    LLMError,
    LLMProvider,
    LLMReply,
)
from argus_core.llm.litellm_client import LiteLLMClient, LiteLLMProvider
from argus_core.llm.recording import (
    ARTIFACT_NAME,
    load_transcript,
    save_transcript,
    transcript_artifact,
    usage_metrics,
)
from argus_core.llm.replay import ReplayClient, ReplayProvider

__all__ = [
    "ARTIFACT_NAME",
    "USAGE_KEYS",
    "LLMBudgetExceeded",
    "LLMClient",
    "LLMError",
    "LLMProvider",
    "LLMReply",
    "LiteLLMClient",
    "LiteLLMProvider",
    "NoLLM",
    "ReplayClient",
    "ReplayProvider",
    "load_transcript",
    "providers",
    "save_transcript",
    "transcript_artifact",
    "usage_metrics",
]


class NoLLM:
    """`llm=none`: there is no model; `create` gives None and the planner works offline."""

    name = "none"
    available = False

    def create(self, cfg: Any) -> None:
        return None


def providers() -> list[Any]:
    """The built-in providers, one per `conf/llm/<name>.yaml`."""
    return [
        NoLLM(),
        LiteLLMProvider("openai", "openai", key_env="OPENAI_API_KEY"),
        LiteLLMProvider("anthropic", "anthropic", key_env="ANTHROPIC_API_KEY"),
        # any OpenAI-compatible server (vLLM, SGLang, llama.cpp, Ollama) at llm.api_base
        LiteLLMProvider("local", "openai", needs_api_base=True, default_api_key="EMPTY"),
        ReplayProvider(),
    ]


@hookimpl
def argus_register_llms() -> list[Any]:
    return providers()
