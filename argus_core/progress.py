"""A progress display for a search: a bar over the candidate budget and a line per candidate.

The bar is `tqdm`'s, redrawn in place; each finished candidate prints one line above it
(`tqdm.write`):

    [3/8] c003 BM128 BN128 BK64 G8 | w4 s2  ok  est 0.412 ms
    [4/8] c004 BM256 BN128 BK64 G8 | w8 s2  FAILED compile: out of registers
    [####################--------------------]  4/8  best est 0.412 ms  12s

A long failure reason wraps onto indented lines, never cut. Quiet mode (the stream is not
a TTY, or enabled=False) writes nothing at all: no bar and no per-candidate lines, so logs
and CI output stay clean; the end-of-run table and every failure's full reason
(`argus_core.summary`) are printed by the caller either way.
"""

from __future__ import annotations

import sys
import textwrap
from types import TracebackType
from typing import TextIO

from argus_core.summary import format_ms
from argus_core.types import CandidateResult

BAR_WIDTH = 40
REASON_WIDTH = 120  # a longer failure reason wraps onto indented lines, never cut
# tqdm's bar: '[####----]  3/8  best est 0.412 ms  12s' (`desc` holds the best time)
BAR_FORMAT = "[{bar:" + str(BAR_WIDTH) + "}]  {n}/{total}{desc}  {elapsed_s:.0f}s"


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
        self._bar = None  # the tqdm bar while one is drawn

    def start(self) -> Progress:
        """Begin timing and draw the empty bar."""
        if self.enabled and self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(
                total=self.total,
                file=self.stream,
                bar_format=BAR_FORMAT,
                ascii="-#",
                mininterval=0,
                dynamic_ncols=False,
                leave=True,
            )
        return self

    def advance(self, result: CandidateResult) -> None:
        """Count one finished candidate: print its line above the bar and redraw the bar."""
        self.done += 1
        if result.ok and result.timing is not None:
            if self._best is None or result.timing.ms < self._best[0]:
                self._best = (result.timing.ms, result.timing.estimated)
        if not self.enabled or self._bar is None:
            return
        self._bar.write(candidate_line(self.done, self.total, result), file=self.stream)
        self._bar.set_description_str(self._best_text(), refresh=False)
        self._bar.update(1)

    def close(self) -> None:
        """Leave the final bar on its own line; nothing more is drawn after this."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        self.enabled = False

    def bar(self) -> str:
        """The bar's text now: '[####----]  3/8  best est 0.412 ms  12s'."""
        from tqdm import tqdm

        elapsed = self._bar.format_dict["elapsed"] if self._bar is not None else 0.0
        return tqdm.format_meter(
            self.done,
            self.total,
            elapsed,
            bar_format=BAR_FORMAT,
            ascii="-#",
            prefix=self._best_text(),
        )

    def _best_text(self) -> str:
        if self._best is None:
            return ""
        ms, estimated = self._best
        return f"  best {'est ' if estimated else ''}{format_ms(ms)} ms"

    def __enter__(self) -> Progress:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
