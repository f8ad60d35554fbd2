"""`planner=search`: the non-learning references for `planner=icrl`.

Same action space as icrl (`argus_core.planning.actions`: KB techniques with their
parameters, and moves within the policy space), same starting policy first, same budget;
nothing is learned across runs. `options.mode`:

- `random`: a seeded shuffle of the actions applied to the starting policy;
- `grid`: every action applied to the starting policy, in a fixed order (techniques by
  id, then moves);
- `pattern`: a pattern-search autotuner in Helion's style: from the best policy so far,
  every move of one tile constant or compiler option to the next value up or down its
  list; when all of them are measured, the best becomes the centre and the moves start
  again from it; it stops when no move improves on the centre.

`options.space`: `derived` (the lists from the target's spec and the shape,
`argus_core.planning.space`) or `config` (the kernel config's and the backend's lists).
"""

from __future__ import annotations

import math
import random
from typing import Any

from argus_core.errors import ConfigError, choices_error
from argus_core.hookspecs import hookimpl
from argus_core.planning.actions import (
    NEIGHBOUR,
    Action,
    ActionSpace,
    make_candidate,
    planner_options,
)
from argus_core.types import Candidate, CandidateResult, Policy

MODES = ("random", "grid", "pattern")
OPTIONS: dict[str, Any] = {"mode": "random", "space": "derived"}


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


def steps(space: ActionSpace, policy: Policy) -> list[tuple[Action, Policy]]:
    """Every valid policy one step up or down one list from `policy` (pattern moves)."""
    out: list[tuple[Action, Policy]] = []
    seen = {policy.key()}
    groups = (("tiles", policy.tiles, space.tiles), ("compiler", policy.compiler, space.compiler))
    for kind, values, lists in groups:
        for name, options in lists.items():
            if name not in values and kind == "tiles":
                continue  # a program without this constant
            current = values.get(name, options[0])
            i = options.index(current) if current in options else -1
            for j in (i - 1, i + 1):
                if i < 0 or not 0 <= j < len(options):
                    continue
                pair = ((name, options[j]),)
                action = Action(NEIGHBOUR, **({kind: pair}))
                new = action.apply(policy)
                if new.key() not in seen and space.valid(new):
                    seen.add(new.key())
                    out.append((action, new))
    return out


class PatternSession:
    """Helion-style pattern search: measure the centre's one-step moves, recentre on the
    best, repeat; one candidate per call so the centre moves as soon as a round is done."""

    def __init__(self, family: Any, space: ActionSpace):
        self.family, self.space = family, space
        self.center: Policy = space.start()
        self.center_ms = math.inf
        self.best: tuple[float, Policy] | None = None
        self.queue: list[tuple[Action | None, Policy]] = [(None, self.center)]
        self.tried: set[str] = set()
        self.waiting = 0  # proposed, not yet observed
        self.count = 0
        self.rounds = 0
        self.ids: dict[str, str] = {}  # candidate id -> policy key

    def propose(self, n: int) -> list[Candidate]:
        out: list[Candidate] = []
        while len(out) < n:
            if not self.queue and not self.waiting:
                self._recentre()
            if not self.queue:
                break
            action, policy = self.queue.pop(0)
            if policy.key() in self.tried:
                continue
            self.tried.add(policy.key())
            self.count += 1
            self.waiting += 1
            cand = make_candidate(self.family, self.count, policy, action, None)
            self.ids[cand.id] = policy.key()
            out.append(cand)
        return out

    def _recentre(self) -> None:
        """Move the centre to the best measured policy; queue its untried moves (none when
        the centre did not move: the search has converged)."""
        if self.best is None:
            return
        ms, policy = self.best
        if policy.key() == self.center.key() and self.rounds > 0:
            return
        self.center, self.center_ms = policy, ms
        self.rounds += 1
        self.queue = [(a, p) for a, p in steps(self.space, policy) if p.key() not in self.tried]

    def observe(self, result: CandidateResult) -> None:
        if result.candidate.id not in self.ids:
            return
        self.waiting = max(0, self.waiting - 1)
        ms = result.timing.ms if result.ok and result.timing is not None else None
        if ms is not None and math.isfinite(ms) and (self.best is None or ms < self.best[0]):
            self.best = (ms, result.candidate.policy)

    def state(self) -> dict[str, Any]:
        return {
            "planner": "search",
            "mode": "pattern",
            "proposed": self.count,
            "rounds": self.rounds,
            "left": len(self.queue),
        }


class SearchPlanner:
    name = "search"

    def create(self, cfg: Any, ctx: dict[str, Any]) -> SearchSession | PatternSession:
        """A session over `ctx`'s action space; ConfigError for an unknown `options.mode`."""
        opts = planner_options(cfg, OPTIONS)
        mode = opts["mode"]
        if mode not in MODES:
            raise ConfigError("planner=search: " + choices_error("options.mode", mode, MODES))
        space = ActionSpace.from_ctx(ctx, space_kind=str(opts["space"]))
        if mode == "pattern":
            return PatternSession(ctx["family"], space)
        return SearchSession(ctx["family"], space, mode, int(ctx.get("seed", 0)))


@hookimpl
def argus_register_planners():
    return [SearchPlanner()]
