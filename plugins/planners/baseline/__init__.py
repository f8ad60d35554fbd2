"""`planner=baseline`: enumerates a small grid of policies (tile sizes x compiler options).

The grid is the product of the kernel's `tiles` lists and the backend's `policy_grid`. The
first candidate is the first value of every list (the family's default policy); the rest
are a seeded sample of the grid without repeats, so a budget smaller than the grid still
spreads over it.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

from argus_core.hookspecs import hookimpl
from argus_core.planning.actions import grid_lists
from argus_core.types import Candidate, CandidateResult, Policy


def policy_grid(tiles: dict[str, list[Any]], compiler: dict[str, list[Any]]) -> list[Policy]:
    """Every policy of the grid, the all-first-values one first."""
    t_keys, c_keys = list(tiles), list(compiler)
    out = []
    for tv in itertools.product(*(tiles[k] for k in t_keys)):
        for cv in itertools.product(*(compiler[k] for k in c_keys)):
            out.append(Policy(dict(zip(t_keys, tv)), dict(zip(c_keys, cv))))
    return out


class BaselineSession:
    def __init__(self, family: Any, grid: list[Policy], seed: int):
        self.family = family
        first, rest = grid[:1], grid[1:]
        random.Random(seed).shuffle(rest)
        self.queue = first + rest
        self.count = 0

    def propose(self, n: int) -> list[Candidate]:
        out = []
        while self.queue and len(out) < n:
            policy = self.queue.pop(0)
            self.count += 1
            out.append(
                Candidate(
                    id=f"c{self.count:03d}",
                    kernel=self.family.name,
                    source=self.family.source(),
                    entry=self.family.entry,
                    policy=policy,
                    techniques=["baseline-grid"],
                )
            )
        return out

    def observe(self, result: CandidateResult) -> None:
        """The baseline does not learn."""

    def state(self) -> dict[str, Any]:
        """{"planner", "proposed", "left"}: how far through its sample of the grid it is."""
        return {"planner": "baseline", "proposed": self.count, "left": len(self.queue)}


class BaselinePlanner:
    name = "baseline"

    def create(self, cfg: Any, ctx: dict[str, Any]) -> BaselineSession:
        tiles = grid_lists(ctx["kernel_cfg"], "tiles")
        compiler = grid_lists(ctx["backend_cfg"], "policy_grid")
        return BaselineSession(ctx["family"], policy_grid(tiles, compiler), int(ctx.get("seed", 0)))


@hookimpl
def argus_register_planners():
    return [BaselinePlanner()]
