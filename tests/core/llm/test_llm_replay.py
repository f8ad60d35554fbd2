"""`llm=replay`: recorded replies in order, strict matching, exhaustion, and round trips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from argus_core.errors import ConfigError
from argus_core.llm import (
    ARTIFACT_NAME,
    LLMBudgetExceeded,
    LLMError,
    ReplayClient,
    load_transcript,
    providers,
    save_transcript,
    transcript_artifact,
    usage_metrics,
)

DEMO = Path(__file__).parents[2] / "fixtures" / "transcripts" / "gemm_planner_demo.json"


def create(name: str, cfg: dict):
    return {p.name: p for p in providers()}[name].create(cfg)


def replay(path: Path = DEMO, **options) -> ReplayClient:
    return create("replay", {"options": {"transcript": str(path), **options}})


def test_replays_recorded_replies_in_order():
    recorded = load_transcript(DEMO)
    client = replay()
    assert client.model == "gpt-4o-mini" and client.remaining() == 3
    for rec in recorded:
        reply = client.complete([{"role": "user", "content": "anything: not strict"}])
        assert reply.text == rec["reply"]
        assert (reply.prompt_tokens, reply.cost_usd) == (rec["prompt_tokens"], rec["cost_usd"])
    assert json.loads(recorded[1]["reply"])["technique"] == "mfma-nonkdim"
    assert client.usage()["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in recorded))


def test_exhausted_recording_is_an_error():
    client = replay()
    for _ in range(3):
        client.complete([])
    with pytest.raises(LLMError, match=r"holds 3 recorded replies and all were used; request 4"):
        client.complete([])


def test_strict_names_the_first_differing_message():
    recorded = load_transcript(DEMO)
    client = replay(strict=True)
    assert client.complete(recorded[0]["messages"]).text == recorded[0]["reply"]
    changed = [dict(m) for m in recorded[1]["messages"]]
    changed[2]["content"] = "a different proposal"
    with pytest.raises(LLMError, match=r"request 2 differs .* at message 2: recorded .*tile-shape"):
        client.complete(changed)
    shorter = recorded[1]["messages"][:3]
    with pytest.raises(LLMError, match=r"at message 3: recorded .*Reward \+0\.18.*got no message"):
        client.complete(shorter)


def test_record_then_replay_round_trip(tmp_path: Path):
    live = create("openai", {"model": "gpt-4o-mini", "options": {"mock_response": "BK=64"}})
    asks = [[{"role": "user", "content": f"step {i}"}] for i in range(3)]
    for ask in asks:
        live.complete(ask, temperature=0.1)
    path = save_transcript(tmp_path / "run" / "llm.json", live)
    again = replay(path, strict=True)
    replies = [again.complete(ask, temperature=0.1) for ask in asks]
    assert [r.text for r in replies] == ["BK=64"] * 3
    # the replay's ledger is the recording's, so its artifact can be replayed in turn
    assert again.transcript() == live.transcript()
    assert again.usage() == live.usage()
    assert json.loads(transcript_artifact(again)) == json.loads(path.read_text())
    assert ARTIFACT_NAME == "llm_transcript.json"


def test_recorded_failure_fails_again(tmp_path: Path):
    live = create(
        "openai",
        {"model": "gpt-4o-mini", "options": {"mock_response": "ok", "max_retries": 0}},
    )
    live.complete([{"role": "user", "content": "one"}])
    with pytest.raises(LLMError):
        live.complete([{"role": "user", "content": "two"}], mock_response="litellm.RateLimitError")
    client = replay(save_transcript(tmp_path / "t.json", live))
    assert client.complete([]).text == "ok"
    with pytest.raises(LLMError, match=r"RateLimitError \(HTTP 429\)"):
        client.complete([])


def test_replay_keeps_the_budget():
    client = create("replay", {"budget_usd": 2e-5, "options": {"transcript": str(DEMO)}})
    client.complete([])
    client.complete([])  # 2.7e-05 spent after this one
    with pytest.raises(LLMBudgetExceeded, match=r"budget_usd=2e-05"):
        client.complete([])


def test_bare_list_of_entries_is_accepted(tmp_path: Path):
    path = tmp_path / "bare.json"
    path.write_text(json.dumps([{"messages": [], "reply": "hello"}]))
    reply = replay(path).complete([])
    assert (reply.text, reply.model, reply.cost_usd) == ("hello", "replay", 0.0)


def test_bad_transcripts_are_config_errors(tmp_path: Path):
    with pytest.raises(ConfigError, match=r"llm=replay needs a recorded transcript"):
        create("replay", {"options": {}})
    with pytest.raises(ConfigError, match=r"'.*missing.json' does not exist"):
        replay(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"requests": [{"messages": []}]}))
    with pytest.raises(ConfigError, match=r"entry 0 lacks reply"):
        replay(bad)
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match=r"is not readable JSON"):
        replay(bad)
    with pytest.raises(ConfigError, match=r"unknown key 'llm.options.strcit'.*strict"):
        replay(strcit=True)


def test_artifact_slice_and_metrics_for_one_candidate():
    client = replay()
    client.complete([])
    seen = len(client.transcript())  # what the previous candidate already logged
    client.complete([])
    client.complete([])
    doc = json.loads(transcript_artifact(client, since=seen))
    assert [e["index"] for e in doc["requests"]] == [1, 2]
    assert doc["usage"]["requests"] == 3 and doc["cost_unknown_requests"] == 0
    metrics = usage_metrics(client)
    assert metrics["llm_requests"] == 3.0
    assert (
        metrics["llm_cost_usd"] == pytest.approx(doc["usage"]["cost_usd"])
        and metrics["llm_cost_usd"] > 0
    )
