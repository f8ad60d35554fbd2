"""`planner=search`: the non-learning reference for `planner=icrl`.

Same action space as icrl (`argus_core.planning.actions`: KB techniques with their
parameters, and grid neighbours), same starting policy first, same budget; but every action
is applied to the starting policy and nothing is learned. `options.mode`: `random` (a
seeded shuffle of the actions) or `grid` (every action in a fixed order: techniques by id,
then grid neighbours).
"""

from __future__ import annotations

import random
from typing import Any

from argus_core.errors import ConfigError, choices_error
from argus_core.hookspecs import hookimpl
from argus_core.planning.actions import ActionSpace, make_candidate, planner_options
from argus_core.types import Candidate, CandidateResult

MODES = ("random", "grid")
OPTIONS: dict[str, Any] = {"mode": "random"}


class SearchSession:
    def __init__(self, family: Any, space: ActionSpace, mode: str, seed: int):
        self.family, self.mode = family, mode
        start = space.start()
        moves = space.actions(start)
        if mode == "random":
            random.Random(seed).shuffle(moves)
        self.queue = [(None, start), *moves]
        self.count = 0
        self.parent: str | None = None

    def propose(self, n: int) -> list[Candidate]:
        """The next n of: the starting policy, then the actions from it (no repeats)."""
        out = []
        while self.queue and len(out) < n:
            action, policy = self.queue.pop(0)
            self.count += 1
            cand = make_candidate(self.family, self.count, policy, action, self.parent)
            self.parent = self.parent or cand.id  # every action modifies the first candidate
            out.append(cand)
        return out

    def observe(self, result: CandidateResult) -> None:
        """The reference does not learn."""

    def state(self) -> dict[str, Any]:
        """{"planner", "mode", "proposed", "left"}: how far through its queue it is."""
        return {
            "planner": "search",
            "mode": self.mode,
            "proposed": self.count,
            "left": len(self.queue),
        }


class SearchPlanner:
    name = "search"

    def create(self, cfg: Any, ctx: dict[str, Any]) -> SearchSession:
        """A session over `ctx`'s action space; ConfigError for an unknown `options.mode`."""
        mode = planner_options(cfg, OPTIONS)["mode"]
        if mode not in MODES:
            raise ConfigError("planner=search: " + choices_error("options.mode", mode, MODES))
        return SearchSession(
            ctx["family"], ActionSpace.from_ctx(ctx), mode, int(ctx.get("seed", 0))
        )


@hookimpl
def argus_register_planners():
    return [SearchPlanner()]
