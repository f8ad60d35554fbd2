"""The ledger every client keeps: budget checks, the transcript, its totals, and its file.

A transcript is a list of entries, one per request that reached a model (or a recording):

    {"index", "model", "messages", "params", "reply", "error", "prompt_tokens",
     "completion_tokens", "cost_usd", "cost_known", "seconds", "attempts"}

`reply` is the text (None when the request failed; `error` then says why). The file that
`save_transcript` writes (and the MLflow artifact `llm_transcript.json`) wraps the list with
the model and totals; `llm=replay` reads either form back.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from argus_core.errors import ConfigError
from argus_core.llm.base import USAGE_KEYS, LLMBudgetExceeded, LLMClient, LLMError, LLMReply

TRANSCRIPT_FORMAT = "argus.llm-transcript/1"
ARTIFACT_NAME = "llm_transcript.json"


class RecordingClient:
    """The shared half of every client: the budget, the ledger, `usage` and `transcript`.

    Subclasses implement `_request(messages, params) -> entry` (the keys above, without
    `index`); `complete` checks the budget first, records the entry, and turns a failed
    entry into LLMError.
    """

    def __init__(self, model: str, budget_usd: float | None, max_total_tokens: int | None):
        self.model = model
        self.budget_usd = budget_usd
        self.max_total_tokens = max_total_tokens
        self._entries: list[dict[str, Any]] = []
        self._lock = threading.Lock()  # a planner may ask from an evaluator pool's threads

    def complete(self, messages: list[dict[str, str]], **kwargs: Any) -> LLMReply:
        """The reply to `messages`; see `LLMClient.complete`."""
        self._check_budget()
        entry = self._request(list(messages), dict(kwargs))
        with self._lock:
            entry = {"index": len(self._entries), **entry}
            self._entries.append(entry)
        if entry.get("error"):
            raise LLMError(f"{self.model}: {entry['error']}")
        return LLMReply(
            text=entry["reply"],
            model=entry["model"],
            prompt_tokens=int(entry["prompt_tokens"]),
            completion_tokens=int(entry["completion_tokens"]),
            cost_usd=float(entry["cost_usd"]),
            seconds=float(entry["seconds"]),
        )

    def _request(self, messages: list[dict[str, str]], params: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def usage(self) -> dict[str, float]:
        """Totals so far: requests, prompt and completion tokens, cost in USD."""
        with self._lock:
            entries = list(self._entries)
        totals = dict.fromkeys(USAGE_KEYS, 0.0)
        totals["requests"] = float(len(entries))
        for e in entries:
            totals["prompt_tokens"] += e["prompt_tokens"]
            totals["completion_tokens"] += e["completion_tokens"]
            totals["cost_usd"] += e["cost_usd"]
        return totals

    def transcript(self) -> list[dict[str, Any]]:
        """Every request and reply so far, oldest first (copies: editing them changes nothing)."""
        with self._lock:
            return json.loads(json.dumps(self._entries))

    def _check_budget(self) -> None:
        # checked before a request starts: the request that crosses a limit still completes
        used = self.usage()
        tokens = used["prompt_tokens"] + used["completion_tokens"]
        requests = int(used["requests"])
        if self.budget_usd is not None and used["cost_usd"] >= self.budget_usd:
            raise LLMBudgetExceeded("budget_usd", self.budget_usd, used["cost_usd"], requests)
        if self.max_total_tokens is not None and tokens >= self.max_total_tokens:
            raise LLMBudgetExceeded(
                "options.max_total_tokens", self.max_total_tokens, tokens, requests
            )


def entry(
    model: str,
    messages: list[dict[str, str]],
    params: dict[str, Any],
    *,
    reply: str | None = None,
    error: str | None = None,
    prompt_tokens: int = 0,
    completion_tokens: int = 0,
    cost_usd: float = 0.0,
    cost_known: bool = True,
    seconds: float = 0.0,
    attempts: int = 1,
) -> dict[str, Any]:
    """One transcript entry (without its index), JSON-ready: params that JSON cannot hold
    are kept as their repr so the record never fails."""
    return {
        "model": model,
        "messages": [dict(m) for m in messages],
        "params": json.loads(json.dumps(params, default=repr)),
        "reply": reply,
        "error": error,
        "prompt_tokens": int(prompt_tokens),
        "completion_tokens": int(completion_tokens),
        "cost_usd": float(cost_usd),
        "cost_known": bool(cost_known),
        "seconds": float(seconds),
        "attempts": int(attempts),
    }


# --------------------------------------------------------------------------- files


def transcript_artifact(client: LLMClient, since: int = 0) -> str:
    """The client's transcript as JSON text, for the MLflow artifact `llm_transcript.json`
    and for `llm=replay` (`llm.options.transcript=PATH`). `since` keeps only the requests
    from that index on (what one candidate cost); `usage` is always the run's totals."""
    requests = [e for e in client.transcript() if e.get("index", 0) >= since]
    doc = {
        "format": TRANSCRIPT_FORMAT,
        "model": client.model,
        "usage": client.usage(),
        "cost_unknown_requests": sum(1 for e in requests if not e.get("cost_known", True)),
        "requests": requests,
    }
    return json.dumps(doc, indent=2) + "\n"


def usage_metrics(client: LLMClient) -> dict[str, float]:
    """The run's totals as MLflow metric names: llm_requests, llm_prompt_tokens,
    llm_completion_tokens, llm_cost_usd."""
    return {f"llm_{k}": float(v) for k, v in client.usage().items()}


def save_transcript(path: str | Path, client: LLMClient) -> Path:
    """Write `transcript_artifact(client)` to `path` (parents created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(transcript_artifact(client), encoding="utf-8")
    return path


REQUIRED_KEYS: tuple[str, ...] = ("messages", "reply")


def load_transcript(path: str | Path) -> list[dict[str, Any]]:
    """The entries of a transcript file (the artifact's form or a bare list of entries).
    Raises ConfigError naming the file and what is wrong with it."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"llm transcript {str(path)!r} does not exist") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"llm transcript {str(path)!r} is not readable JSON: {exc}") from exc
    entries = doc.get("requests") if isinstance(doc, dict) else doc
    if not isinstance(entries, list):
        raise ConfigError(
            f"llm transcript {str(path)!r} must be a list of entries or an object with "
            f"'requests' (the form save_transcript writes)"
        )
    for i, e in enumerate(entries):
        missing = [k for k in REQUIRED_KEYS if not isinstance(e, dict) or k not in e]
        if missing:
            raise ConfigError(
                f"llm transcript {str(path)!r}: entry {i} lacks {', '.join(missing)} "
                f"(each entry needs {', '.join(REQUIRED_KEYS)})"
            )
    return entries
