"""`tracking=none`: a listener that records nothing and imports nothing."""

from __future__ import annotations

from typing import Any


class NoneTracker:
    """Implements no event hooks; registering it changes nothing."""

    def __init__(self, cfg: Any = None, run_dir: str = ""):
        self.run_dir = run_dir

    def summary_lines(self) -> list[str]:
        """Nothing to say: the run's own output directory holds everything it wrote."""
        return []

    def failure(self) -> str | None:
        """Recording nothing never fails."""
        return None
