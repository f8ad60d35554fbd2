"""Any provider by model name, through litellm: `llm=openai`, `llm=anthropic`, `llm=local`.

litellm is imported on the first request, never when this module is imported (it costs
seconds), with its bundled cost map so nothing is fetched. Transient failures (rate limit,
timeout, 5xx, connection errors) are retried with exponential backoff; others (auth, bad
request, unknown model) fail at once. API keys come from the environment, never from the
config (the config is logged to MLflow as params).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import time
from typing import Any

from argus_core.errors import ConfigError
from argus_core.llm.base import check_options, config_dict
from argus_core.llm.recording import RecordingClient, entry

log = logging.getLogger("argus.llm")

# `llm.options` keys of the litellm providers, with their defaults
DEFAULT_OPTIONS: dict[str, Any] = {
    "mock_response": None,  # passed to litellm's mock_response: no network, a canned reply
    "max_total_tokens": None,  # per-run token budget (prompt + completion), beside budget_usd
    "max_retries": 3,  # retries of a transient failure (so up to 4 attempts)
    "retry_base_s": 1.0,  # backoff before retry n: retry_base_s * 2**(n-1), capped
    "retry_max_s": 30.0,
    "timeout_s": 120.0,  # per attempt
    "api_key_env": None,  # the environment variable holding the key (else litellm's default)
    "params": {},  # more litellm.completion arguments (temperature, top_p, seed, ...)
}

# HTTP statuses worth another attempt: timeout, conflict, too early, rate limit, and 5xx
TRANSIENT_STATUSES: frozenset[int] = frozenset({408, 409, 425, 429})

_warned_unknown_cost: set[str] = set()


def import_litellm() -> Any:
    """litellm, imported with its bundled cost map (no fetch) and its console noise off."""
    # before the first import reads it; a user's own choice wins
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True  # else it prints a provider list beside every error
    litellm.telemetry = False
    logging.getLogger("LiteLLM").setLevel(logging.WARNING)
    return litellm


def is_transient(exc: BaseException) -> bool:
    """True for a failure another attempt may fix: rate limit, timeout, 5xx, connection."""
    litellm = import_litellm()
    transient_types = (
        litellm.RateLimitError,
        litellm.Timeout,
        litellm.APIConnectionError,
        litellm.InternalServerError,
        litellm.ServiceUnavailableError,
        litellm.BadGatewayError,
    )
    if isinstance(exc, transient_types):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status in TRANSIENT_STATUSES or status >= 500)


def describe(exc: BaseException) -> str:
    """'RateLimitError (HTTP 429): first line of the message'."""
    status = getattr(exc, "status_code", None)
    code = f" (HTTP {status})" if isinstance(status, int) else ""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}{code}: {lines[0] if lines else ''}"


class LiteLLMClient(RecordingClient):
    """A model reached through `litellm.completion`; one per run."""

    def __init__(
        self,
        model: str,
        provider: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        max_tokens: int | None = None,
        budget_usd: float | None = None,
        options: dict[str, Any] | None = None,
    ):
        opts = {**DEFAULT_OPTIONS, **(options or {})}
        super().__init__(model, budget_usd, opts["max_total_tokens"])
        self.provider = provider
        self.api_base = api_base
        self._api_key = api_key  # kept off the transcript and out of repr
        self.max_tokens = max_tokens
        self.options = opts

    def __repr__(self) -> str:
        return f"LiteLLMClient(model={self.model!r}, provider={self.provider!r})"

    def _call_args(self, messages: list[dict[str, str]], params: dict[str, Any]) -> dict[str, Any]:
        opts = self.options
        args: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            # the option names the provider, so a bare model name ('gpt-4o-mini') is enough
            "custom_llm_provider": self.provider,
            "timeout": opts["timeout_s"],
            "max_retries": 0,  # the SDK's own retries off: ours are counted and recorded
        }
        optional = {
            "api_base": self.api_base,
            "api_key": self._api_key,
            "max_tokens": self.max_tokens,
            "mock_response": opts["mock_response"],
        }
        args.update({k: v for k, v in optional.items() if v is not None})
        return {**args, **(opts["params"] or {}), **params}

    def _request(self, messages: list[dict[str, str]], params: dict[str, Any]) -> dict[str, Any]:
        litellm = import_litellm()
        args = self._call_args(messages, params)
        retries = int(self.options["max_retries"])
        start = time.perf_counter()
        for attempt in range(1, retries + 2):
            try:
                response = litellm.completion(**args)
                break
            except Exception as exc:
                transient = is_transient(exc)
                if transient and attempt <= retries:
                    delay = self._backoff(attempt)
                    log.warning(
                        "%s: %s; retry %d of %d in %.2fs",
                        self.model,
                        describe(exc),
                        attempt,
                        retries,
                        delay,
                    )
                    time.sleep(delay)
                    continue
                why = (
                    f"gave up after {attempt} attempt(s) on transient errors"
                    if transient
                    else "not retried (not a transient error)"
                )
                return entry(
                    self.model,
                    messages,
                    params,
                    error=f"{describe(exc)} [{why}]",
                    seconds=time.perf_counter() - start,
                    attempts=attempt,
                )
        usage = getattr(response, "usage", None)
        cost, known = self._cost(litellm, response)
        return entry(
            getattr(response, "model", None) or self.model,
            messages,
            params,
            reply=response.choices[0].message.content or "",
            prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
            cost_usd=cost,
            cost_known=known,
            seconds=time.perf_counter() - start,
            attempts=attempt,
        )

    def _backoff(self, attempt: int) -> float:
        base, cap = float(self.options["retry_base_s"]), float(self.options["retry_max_s"])
        return min(cap, base * 2 ** (attempt - 1))

    def _cost(self, litellm: Any, response: Any) -> tuple[float, bool]:
        """(USD, known): litellm's price for the response; (0.0, False) for a model it
        cannot price (a local server's), warned once per model."""
        try:
            return float(litellm.completion_cost(completion_response=response)), True
        except Exception as exc:
            if self.model not in _warned_unknown_cost:
                _warned_unknown_cost.add(self.model)
                log.warning(
                    "no price known for model %r (%s); its cost is recorded as 0 and flagged "
                    "cost_known=false, so budget_usd cannot limit it: set "
                    "llm.options.max_total_tokens",
                    self.model,
                    describe(exc),
                )
            return 0.0, False


class LiteLLMProvider:
    """`llm=<name>`: a factory of `LiteLLMClient`s that send to litellm provider `provider`.

    `needs_api_base` is for a self-hosted server; `default_api_key` is what such a server
    gets when no key is set (the OpenAI SDK refuses to send without one).
    """

    def __init__(
        self,
        name: str,
        provider: str,
        *,
        needs_api_base: bool = False,
        default_api_key: str | None = None,
        key_env: str | None = None,
    ):
        self.name = name
        self.provider = provider
        self.key_env = key_env  # the variable litellm reads the provider's key from
        self.needs_api_base = needs_api_base
        self.default_api_key = default_api_key

    @property
    def available(self) -> bool:
        """True when litellm is installed (checked without importing it)."""
        return importlib.util.find_spec("litellm") is not None

    def create(self, cfg: Any) -> LiteLLMClient:
        """A client for one run from the `llm` group; ConfigError names a missing model or
        api_base, an unknown option, or a missing litellm."""
        d = config_dict(cfg)
        options = dict(d.get("options") or {})
        check_options(self.name, options, DEFAULT_OPTIONS)
        model, api_base = d.get("model"), d.get("api_base")
        if not model:
            raise ConfigError(f"llm={self.name} needs a model: add llm.model=NAME")
        if self.needs_api_base and not api_base:
            raise ConfigError(
                f"llm={self.name} needs the server's URL: add llm.api_base=http://HOST:PORT/v1"
            )
        if not self.available:
            raise ConfigError(
                f"llm={self.name} needs litellm: pip install 'argus-kernels[llm]' (or llm=none)"
            )
        key_env = options.get("api_key_env")
        api_key = os.environ.get(key_env) if key_env else None
        needed = key_env or self.key_env
        if needed and not os.environ.get(needed) and options.get("mock_response") is None:
            # a run without its key would fail its first request, after the run started
            raise ConfigError(
                f"llm={self.name} needs an API key: ${needed} is not set; set it, name "
                f"another variable with llm.options.api_key_env=VAR, or use llm=none"
            )
        return LiteLLMClient(
            model,
            self.provider,
            api_base=api_base,
            api_key=api_key or self.default_api_key,
            max_tokens=d.get("max_tokens"),
            budget_usd=d.get("budget_usd"),
            options=options,
        )
