"""Front-end lowerings kept apart from `match.py`: each takes the captured graph's ops and
returns an `Emission`, or None when the graph is not the shape it lowers (then `match.match`
tries its own templates). Raising `match.NoTemplate` explains why a graph of this shape
cannot be lowered."""

from __future__ import annotations

from typing import Any


def match_more(
    gm: Any, ops: list[Any], inputs: list[Any], result: Any, task: str, names: list[str]
) -> Any:
    """The Emission for `ops` from this module's lowerings, or None."""
    return None
