"""Golden files for generated source (`*.expected` beside the test that reads them).

A test compares what it generated with its golden file; `ARGUS_UPDATE_GOLDEN=1` rewrites
the files instead, so a change in lowering shows up as a readable diff in review.
"""

from __future__ import annotations

import os
from pathlib import Path


def check_golden(path: Path, text: str) -> None:
    """Assert `text` equals the golden file at `path` (written first when
    ARGUS_UPDATE_GOLDEN is set)."""
    if os.environ.get("ARGUS_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing golden file {path}; run with ARGUS_UPDATE_GOLDEN=1"
    assert text == path.read_text(), (
        f"lowering changed; diff against {path} (ARGUS_UPDATE_GOLDEN=1 refreshes)"
    )
