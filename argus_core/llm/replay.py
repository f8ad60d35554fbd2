"""`llm=replay`: answers from a recorded transcript, in order, for tests and demos.

The file is what `save_transcript` writes from any client (or the MLflow artifact
`llm_transcript.json`), so a live run can be recorded and replayed. Recorded tokens, cost
and seconds are reported again, so a replay's usage and transcript equal the recording's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from argus_core.errors import ConfigError
from argus_core.llm.base import LLMError, check_options, config_dict
from argus_core.llm.recording import RecordingClient, entry, load_transcript

DEFAULT_OPTIONS: dict[str, Any] = {
    "transcript": None,  # the recorded file (required)
    "strict": False,  # True: each request must equal the recorded one, message by message
    "max_total_tokens": None,  # the same token budget as a live provider's
}
SHOWN_CHARS = 120  # of a message's content in a mismatch error


class ReplayClient(RecordingClient):
    """Returns the recorded replies one by one; `strict` checks each request first."""

    def __init__(
        self,
        entries: list[dict[str, Any]],
        *,
        source: str = "<transcript>",
        model: str | None = None,
        strict: bool = False,
        budget_usd: float | None = None,
        max_total_tokens: int | None = None,
    ):
        recorded = model or next((e.get("model") for e in entries if e.get("model")), None)
        super().__init__(recorded or "replay", budget_usd, max_total_tokens)
        self.source = source
        self.strict = strict
        self._recorded = entries
        self._next = 0

    def remaining(self) -> int:
        """How many recorded replies are left."""
        return len(self._recorded) - self._next

    def _request(self, messages: list[dict[str, str]], params: dict[str, Any]) -> dict[str, Any]:
        if self._next >= len(self._recorded):
            raise LLMError(
                f"llm=replay: {self.source} holds {len(self._recorded)} recorded replies and all "
                f"were used; request {self._next + 1} has none"
            )
        rec = self._recorded[self._next]
        if self.strict:
            check_same(rec.get("messages") or [], messages, self._next + 1, self.source)
        self._next += 1
        return entry(
            rec.get("model") or self.model,
            messages,
            params,
            reply=rec.get("reply"),
            error=rec.get("error"),  # a recorded failure fails again, as it did live
            prompt_tokens=rec.get("prompt_tokens", 0),
            completion_tokens=rec.get("completion_tokens", 0),
            cost_usd=rec.get("cost_usd", 0.0),
            cost_known=rec.get("cost_known", True),
            seconds=rec.get("seconds", 0.0),
            attempts=rec.get("attempts", 1),
        )


def check_same(
    recorded: list[dict[str, str]], got: list[dict[str, str]], request: int, source: str
) -> None:
    """Raise LLMError naming the first message of request `request` that differs."""
    for i in range(max(len(recorded), len(got))):
        want = recorded[i] if i < len(recorded) else None
        have = got[i] if i < len(got) else None
        if want != have:
            raise LLMError(
                f"llm=replay (strict): request {request} differs from the recording in "
                f"{source} at message {i}: recorded {shorten(want)}, got {shorten(have)}"
            )


def shorten(message: dict[str, str] | None) -> str:
    if message is None:
        return "no message"
    text = json.dumps(message, ensure_ascii=False)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."


class ReplayProvider:
    """`llm=replay`: a factory of `ReplayClient`s over `llm.options.transcript`."""

    name = "replay"
    available = True

    def create(self, cfg: Any) -> ReplayClient:
        """A client replaying `llm.options.transcript`; ConfigError names a missing or
        malformed file or an unknown option."""
        d = config_dict(cfg)
        options = {**DEFAULT_OPTIONS, **(d.get("options") or {})}
        check_options(self.name, options, DEFAULT_OPTIONS)
        path = options["transcript"]
        if not path:
            raise ConfigError(
                "llm=replay needs a recorded transcript: add llm.options.transcript=PATH "
                "(a file written by argus_core.llm.save_transcript, or an llm_transcript.json)"
            )
        return ReplayClient(
            load_transcript(path),
            source=str(Path(path)),
            model=d.get("model"),
            strict=bool(options["strict"]),
            budget_usd=d.get("budget_usd"),
            max_total_tokens=options["max_total_tokens"],
        )
