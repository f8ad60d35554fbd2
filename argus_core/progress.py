"""A progress display for a search: a bar over the candidate budget and a line per candidate.

On a terminal the bar is redrawn in place (carriage return) and each finished candidate
prints one line above it:

    [3/8] c003 BM128 BN128 BK64 G8 | w4 s2  ok  est 0.412 ms
    [4/8] c004 BM256 BN128 BK64 G8 | w8 s2  FAILED compile: out of registers
    [####################----------------------]  4/8  best est 0.412 ms  12s

Quiet mode (the stream is not a TTY, or enabled=False) writes nothing at all: no bar and
no per-candidate lines, so logs and CI output stay clean; the end-of-run table
(`argus_core.summary`) is printed by the caller either way.
"""

from __future__ import annotations

import sys
import textwrap
import time
from types import TracebackType
from typing import TextIO

from argus_core.summary import format_ms
from argus_core.types import CandidateResult

BAR_WIDTH = 40
REASON_WIDTH = 120  # a longer failure reason wraps onto indented lines, never cut


def candidate_line(done: int, total: int, result: CandidateResult) -> str:
    """One line for a finished candidate: '[3/8] c003 <policy>  ok  est 0.412 ms' or
    '[3/8] c003 <policy>  FAILED compile: <reason>'."""
    head = f"[{done}/{total}] {result.candidate.id} {result.candidate.policy.key()}"
    if result.failure is not None:
        return textwrap.fill(
            f"{head}  FAILED {result.failure}",
            width=REASON_WIDTH,
            subsequent_indent="    ",
            break_long_words=True,
            replace_whitespace=False,
        )
    if result.timing is None:
        return f"{head}  ok"
    label = "est " if result.timing.estimated else ""
    return f"{head}  ok  {label}{format_ms(result.timing.ms)} ms"


class Progress:
    """Shows progress over `total` candidates on `stream`.

    `enabled=None` means "only when `stream.isatty()`". Call `start()`, then `advance(result)`
    per finished candidate, then `close()`; or use it as a context manager.
    """

    def __init__(self, total: int, stream: TextIO | None = None, enabled: bool | None = None):
        self.total = max(int(total), 0)
        # the default is looked up per instance so a redirected sys.stderr is honoured
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self.done = 0
        self._best: tuple[float, bool] | None = None  # (ms, estimated) of the fastest ok result
        self._started = 0.0
        self._bar_len = 0  # length of the bar now on screen; 0 when none is drawn

    def start(self) -> Progress:
        """Begin timing and draw the empty bar."""
        self._started = time.monotonic()
        self._draw_bar()
        return self

    def advance(self, result: CandidateResult) -> None:
        """Count one finished candidate: print its line above the bar and redraw the bar."""
        self.done += 1
        if result.ok and result.timing is not None:
            if self._best is None or result.timing.ms < self._best[0]:
                self._best = (result.timing.ms, result.timing.estimated)
        if not self.enabled:
            return
        self._clear_bar()
        self.stream.write(candidate_line(self.done, self.total, result) + "\n")
        self._draw_bar()

    def close(self) -> None:
        """Leave the final bar on its own line; nothing more is drawn after this."""
        if self.enabled and self._bar_len:
            self.stream.write("\n")
            self.stream.flush()
        self._bar_len = 0
        self.enabled = False

    def bar(self) -> str:
        """The bar's text: '[####----]  3/8  best est 0.412 ms  12s'."""
        frac = min(self.done / self.total, 1.0) if self.total else 1.0
        filled = round(frac * BAR_WIDTH)
        text = f"[{'#' * filled}{'-' * (BAR_WIDTH - filled)}]  {self.done}/{self.total}"
        if self._best is not None:
            ms, estimated = self._best
            text += f"  best {'est ' if estimated else ''}{format_ms(ms)} ms"
        started = self._started or time.monotonic()
        return text + f"  {time.monotonic() - started:.0f}s"

    def _draw_bar(self) -> None:
        if not self.enabled:
            return
        text = self.bar()
        # pad over a longer previous bar so no stale characters remain
        self.stream.write("\r" + text.ljust(self._bar_len))
        self.stream.flush()
        self._bar_len = len(text)

    def _clear_bar(self) -> None:
        if self._bar_len:
            self.stream.write("\r" + " " * self._bar_len + "\r")
            self._bar_len = 0

    def __enter__(self) -> Progress:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
