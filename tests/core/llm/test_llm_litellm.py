"""The litellm client through the real `litellm.completion`, offline.

Replies come from litellm's `mock_response` (including its mock exceptions) or from a
scripted OpenAI-compatible server on localhost, so retries meet real provider errors.
"""

from __future__ import annotations

import os
import socket

import pytest
from llm_server import scripted_server

from argus_core.errors import ConfigError
from argus_core.llm import (
    LiteLLMClient,
    LLMBudgetExceeded,
    LLMError,
    LLMReply,
    providers,
)
from argus_core.llm.litellm_client import import_litellm, is_transient

ASK = [
    {"role": "system", "content": "You write Argus DSL kernels."},
    {"role": "user", "content": "Propose BM, BN, BK for a 4096^3 bf16 GEMM."},
]
FAST_RETRY = {"max_retries": 2, "retry_base_s": 0.01, "retry_max_s": 0.05}


def provider(name: str):
    return {p.name: p for p in providers()}[name]


def openai_client(**options) -> LiteLLMClient:
    cfg = {"name": "openai", "model": "gpt-4o-mini", "budget_usd": 1.0, "options": options}
    return provider("openai").create(cfg)


def test_mock_reply_tokens_and_cost_priced_from_litellm_map():
    client = openai_client(mock_response="BM=128 BN=128 BK=64")
    reply = client.complete(ASK, temperature=0.2)
    assert isinstance(reply, LLMReply)
    assert reply.text == "BM=128 BN=128 BK=64"
    assert reply.model == "gpt-4o-mini"
    assert reply.prompt_tokens > 0 and reply.completion_tokens > 0
    # the price is litellm's own per-token figure for this model, times the tokens
    price = import_litellm().model_cost["gpt-4o-mini"]
    expected = (
        reply.prompt_tokens * price["input_cost_per_token"]
        + reply.completion_tokens * price["output_cost_per_token"]
    )
    assert reply.cost_usd == pytest.approx(expected) and reply.cost_usd > 0
    client.complete(ASK)
    usage = client.usage()
    assert set(usage) == {"requests", "prompt_tokens", "completion_tokens", "cost_usd"}
    assert usage["requests"] == 2
    assert usage["prompt_tokens"] == 2 * reply.prompt_tokens
    assert usage["cost_usd"] == pytest.approx(2 * reply.cost_usd)


def test_transcript_stores_every_request_and_reply():
    client = openai_client(mock_response="ok")
    client.complete(ASK, temperature=0.2)
    client.complete([{"role": "user", "content": "again"}])
    first, second = client.transcript()
    assert (first["index"], second["index"]) == (0, 1)
    assert first["messages"] == ASK and first["params"] == {"temperature": 0.2}
    assert first["reply"] == "ok" and first["error"] is None and first["cost_known"] is True
    assert second["messages"] == [{"role": "user", "content": "again"}]
    assert first["seconds"] >= 0 and first["attempts"] == 1
    # a copy: the caller cannot rewrite the record
    client.transcript()[0]["reply"] = "edited"
    assert client.transcript()[0]["reply"] == "ok"


def test_unpriced_model_costs_zero_and_is_flagged():
    cfg = {"model": "openai/argus-test-model", "api_base": "http://127.0.0.1:9/v1"}
    client = provider("local").create({**cfg, "options": {"mock_response": "hi"}})
    reply = client.complete(ASK)
    assert reply.cost_usd == 0.0 and reply.completion_tokens > 0
    assert client.transcript()[0]["cost_known"] is False
    assert client.usage()["cost_usd"] == 0.0


def test_cost_budget_refuses_the_next_request():
    cfg = {"model": "gpt-4o-mini", "budget_usd": 1e-5, "options": {"mock_response": "x"}}
    client = provider("openai").create(cfg)
    spent = client.complete(ASK).cost_usd
    assert spent >= 1e-5  # the request that crossed the budget completed
    with pytest.raises(LLMBudgetExceeded, match=r"budget_usd=1e-05 but .* used by 1 request"):
        client.complete(ASK)
    assert client.usage()["requests"] == 1  # the refused request never started


def test_token_budget_refuses_the_next_request():
    client = openai_client(mock_response="x", max_total_tokens=40)
    client.complete(ASK)  # 30 tokens: under 40
    client.complete(ASK)  # 60: crosses it, still answered
    with pytest.raises(LLMBudgetExceeded) as info:
        client.complete(ASK)
    assert info.value.budget == "options.max_total_tokens"
    assert info.value.limit == 40 and info.value.spent == 60 and info.value.requests == 2


@pytest.mark.parametrize("mock", ["litellm.RateLimitError", "litellm.InternalServerError"])
def test_transient_mock_errors_are_retried_then_reported(mock: str):
    client = openai_client(mock_response=mock, **FAST_RETRY)
    with pytest.raises(LLMError, match=r"gave up after 3 attempt\(s\) on transient errors"):
        client.complete(ASK)
    (record,) = client.transcript()
    assert record["attempts"] == 3 and record["reply"] is None
    assert record["error"].startswith(mock.split(".")[1])
    assert record["seconds"] >= 0.01 + 0.02  # the two backoffs were slept


def test_non_transient_mock_errors_are_not_retried():
    client = openai_client(mock_response="litellm.ContextWindowExceededError", **FAST_RETRY)
    with pytest.raises(LLMError, match=r"HTTP 400.*not retried"):
        client.complete(ASK)
    assert client.transcript()[0]["attempts"] == 1
    litellm = import_litellm()
    auth = litellm.AuthenticationError("bad key", llm_provider="openai", model="gpt-4o-mini")
    assert not is_transient(auth)
    with pytest.raises(LLMError, match=r"AuthenticationError \(HTTP 401\)"):
        client.complete(ASK, mock_response=auth)
    assert client.transcript()[1]["attempts"] == 1


def local_client(api_base: str, **options) -> LiteLLMClient:
    cfg = {"model": "argus-test-model", "api_base": api_base, "options": options}
    return provider("local").create(cfg)


def test_server_errors_retried_until_the_reply():
    script = [(503, "overloaded"), (429, "slow down"), (200, "BM=64")]
    with scripted_server(script) as server:
        client = local_client(server.api_base, **FAST_RETRY)
        reply = client.complete(ASK)
    assert reply.text == "BM=64"
    assert (reply.prompt_tokens, reply.completion_tokens) == (7, 3)
    assert len(server.requests) == 3  # our retries only: the SDK's own are off
    assert server.requests[-1]["messages"] == ASK
    assert server.requests[-1]["model"] == "argus-test-model"
    assert client.transcript()[0]["attempts"] == 3


@pytest.mark.parametrize("model", ["Qwen/Qwen2.5-Coder", "openai/Qwen/Qwen2.5-Coder"])
def test_local_server_gets_the_served_model_name(model: str):
    with scripted_server([(200, "ok")]) as server:
        client = provider("local").create({"model": model, "api_base": server.api_base})
        assert client.complete(ASK).model == "Qwen/Qwen2.5-Coder"
    assert server.requests[0]["model"] == "Qwen/Qwen2.5-Coder"


def test_auth_error_from_server_is_not_retried():
    with scripted_server([(401, "invalid api key"), (200, "never sent")]) as server:
        client = local_client(server.api_base, **FAST_RETRY)
        with pytest.raises(LLMError, match=r"HTTP 401.*not retried"):
            client.complete(ASK)
    assert len(server.requests) == 1


def test_refused_connection_is_transient():
    with socket.socket() as sock:  # a port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = local_client(f"http://127.0.0.1:{port}/v1", **FAST_RETRY, timeout_s=5)
    with pytest.raises(LLMError, match=r"gave up after 3 attempt"):
        client.complete(ASK)


def test_config_errors_name_the_fix():
    with pytest.raises(ConfigError, match=r"unknown key 'llm.options.mock_reply'.*mock_response"):
        openai_client(mock_reply="x")
    with pytest.raises(ConfigError, match=r"llm=local needs a model: add llm.model="):
        provider("local").create({"api_base": "http://x/v1"})
    with pytest.raises(ConfigError, match=r"llm=local needs the server's URL: add llm.api_base"):
        provider("local").create({"model": "m"})


def test_api_key_comes_from_the_named_variable(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ARGUS_TEST_LLM_KEY", "sk-test-123")
    with scripted_server([(200, "ok")]) as server:
        client = local_client(server.api_base, api_key_env="ARGUS_TEST_LLM_KEY")
        client.complete(ASK)
    assert "sk-test-123" not in repr(client)
    assert "sk-test-123" not in str(client.transcript())


@pytest.mark.live_llm
def test_live_openai_reply_is_priced():
    if not os.environ.get("OPENAI_API_KEY"):
        pytest.skip("OPENAI_API_KEY is not set")
    client = openai_client(max_total_tokens=2000)
    reply = client.complete([{"role": "user", "content": "Answer with one word: ping"}])
    assert reply.text and reply.cost_usd > 0 and reply.prompt_tokens > 0
