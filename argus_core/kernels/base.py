"""What every built-in kernel family shares: its DSL kernel is `kernel.py` beside it."""

from __future__ import annotations

import inspect
from pathlib import Path


class DSLKernelFamily:
    """A family whose kernel is the DSL module `kernel.py` next to the family's own module,
    or the file given as `source_path` (`kernel.source=PATH` in a run)."""

    name = "family"

    def __init__(self, source_path: str | Path | None = None):
        here = Path(inspect.getfile(type(self)))
        self.source_path = Path(source_path) if source_path else here.with_name("kernel.py")

    def source(self) -> str:
        """The DSL text of the kernel module."""
        if not self.source_path.is_file():
            raise FileNotFoundError(f"{self.name} DSL source not found at {self.source_path}")
        return self.source_path.read_text()
