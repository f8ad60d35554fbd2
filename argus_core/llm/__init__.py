"""LLM providers. `none` means no LLM: planners work offline from their own rules."""

from __future__ import annotations

from argus_core.hookspecs import hookimpl


class NoLLM:
    """`llm=none`: there is no model; asking it anything is an error the planner avoids."""

    name = "none"
    available = False

    def complete(self, messages: list[dict], **kwargs) -> str:
        raise RuntimeError("llm=none has no model; choose an llm option to use one")


@hookimpl
def argus_register_llms():
    return [NoLLM()]
