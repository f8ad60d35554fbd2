"""`planner=icrl`: in-context reinforcement learning over KB techniques (offline path).

State: the best candidate so far (its policy and result). Each step chooses a technique by
UCB1 over its action value, applies one of its concrete actions (`actions.ActionSpace`)
to the best policy, and learns from the result. The values are kept per (family, backend,
technique) in a JSON file (`options.values_path`) and loaded at the start, so a later run
starts from what earlier runs learned. The LLM path (the LLM writes DSL code, repairs from
counterexamples) is not here yet: `options.llm` must be false. See docs/planners.md.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

from argus_core.errors import ConfigError
from argus_core.hookspecs import hookimpl
from argus_core.types import Candidate, CandidateResult, Policy
from argus_plugins.planners.icrl.actions import (
    NEIGHBOUR,
    Action,
    ActionSpace,
    make_candidate,
    planner_options,
    specificity,
)
from argus_plugins.planners.icrl.values import DEFAULT_PATH, ValueTable

OPTIONS: dict[str, Any] = {"exploration": 1.0, "values_path": None, "llm": False}
STRATEGY = "ucb1"


def bandit_reward(result: CandidateResult, parent_ms: float | None) -> float:
    """What the bandit learns from `result`: the pipeline's penalty for a failure; for a
    success, the speedup over the policy the action modified (`parent_ms / ms`), which is
    the pipeline's reward divided by the parent's, so an action is credited with its own
    gain and not with the gains of the actions before it. Without a parent time (the
    starting policy failed) the pipeline's reward itself."""
    if not result.ok:
        if result.reward is not None:
            return float(result.reward)
        return -1.0 if (result.failure or "").startswith(("verify", "correctness")) else -0.5
    ms = result.timing.ms if result.timing is not None else None
    if not ms or not math.isfinite(ms):
        return 0.0
    if parent_ms is None or not math.isfinite(parent_ms):
        return float(result.reward) if result.reward is not None else 1.0
    return parent_ms / ms


class IcrlSession:
    """One invocation's bandit: proposes one candidate per call, learns in `observe`."""

    def __init__(self, family: Any, space: ActionSpace, table: ValueTable, seed: int):
        self.family, self.space, self.table = family, space, table
        self.rng = random.Random(seed)
        self.best_policy: Policy = space.start()
        self.best: CandidateResult | None = None
        self.proposed: set[str] = set()  # policy keys, never proposed twice
        self.pending: dict[str, tuple[str | None, float | None]] = {}  # id -> (arm, parent ms)
        self.count = 0
        self.step = 0
        self.last: dict[str, Any] | None = None
        # techniques without a value yet are tried most specific first, grid moves last
        self.prior = {t.id: float(specificity(t, space.shape)) for t in space.techniques.values()}
        self.prior[NEIGHBOUR] = -1.0

    def propose(self, n: int) -> list[Candidate]:
        """The starting policy first; then one action of the technique with the best UCB1
        score, applied to the best policy so far. One candidate per call, so each choice
        sees every result before it; [] when no untried valid action is left."""
        if n <= 0:
            return []
        if self.count == 0:
            return [self._candidate(self.best_policy, None)]
        options: dict[str, list[tuple[Action, Policy]]] = {}
        for arm in self.space.arms():
            acts = self.space.actions(self.best_policy, arm)
            acts = [(a, p) for a, p in acts if p.key() not in self.proposed]
            if acts:
                options[arm] = acts
        if not options:
            return []
        arm = self.table.choose(list(options), self.rng, self.prior)
        action, policy = self.rng.choice(options[arm])
        return [self._candidate(policy, action)]

    def _candidate(self, policy: Policy, action: Action | None) -> Candidate:
        self.count += 1
        parent = self.best.candidate.id if self.best is not None else None
        cand = make_candidate(self.family, self.count, policy, action, parent)
        self.proposed.add(policy.key())
        parent_ms = self.best.timing.ms if self.best is not None and self.best.timing else None
        self.pending[cand.id] = (action.technique if action else None, parent_ms)
        return cand

    def observe(self, result: CandidateResult) -> None:
        """Update the technique's value with `bandit_reward`, persist it, and move the
        state to this candidate if it is the fastest correct one so far."""
        cid = result.candidate.id
        if cid not in self.pending:
            return  # not one of this session's candidates
        arm, parent_ms = self.pending.pop(cid)
        self.step += 1
        reward = bandit_reward(result, parent_ms)
        if arm is not None:
            self.table.update(arm, reward)
            self.table.save()
        self.last = {
            "candidate": cid,
            "technique": arm,
            "reward": result.reward,
            "bandit_reward": reward,
            "failure": result.failure,
        }
        ms = result.timing.ms if result.ok and result.timing is not None else None
        if ms is not None and math.isfinite(ms):
            if self.best is None or ms < self.best.timing.ms:  # type: ignore[union-attr]
                self.best, self.best_policy = result, result.candidate.policy

    def state(self) -> dict[str, Any]:
        """Plain data for logging "value estimates over time" after each observe:
        {"planner", "strategy", "exploration", "key", "values_path", "step", "total",
         "values": {technique: {"value", "count", "ucb"}}, "last", "best"} (docs/planners.md)."""
        best = None
        if self.best is not None and self.best.timing is not None:
            best = {
                "candidate": self.best.candidate.id,
                "policy": self.best.candidate.policy.to_dict(),
                "ms": self.best.timing.ms,
                "reward": self.best.reward,
            }
        return {
            "planner": "icrl",
            "strategy": STRATEGY,
            "exploration": self.table.exploration,
            "key": self.table.key,
            "values_path": str(self.table.path) if self.table.path else None,
            "step": self.step,
            "total": self.table.total(),
            "values": self.table.to_dict(self.space.arms()),
            "last": dict(self.last) if self.last else None,
            "best": best,
        }


class IcrlPlanner:
    name = "icrl"

    def create(self, cfg: Any, ctx: dict[str, Any]) -> IcrlSession:
        """A session over `ctx`'s action space with the values stored for its (family,
        backend), loaded from `options.values_path` (default `.argus/icrl_values.json`)."""
        opts = planner_options(cfg, OPTIONS)
        if opts["llm"]:
            raise ConfigError(
                "planner=icrl: options.llm=true is not available yet (the LLM path of icrl "
                "is still to come); valid: false"
            )
        space = ActionSpace.from_ctx(ctx)
        path = Path(opts["values_path"] or Path.cwd() / DEFAULT_PATH)
        table = ValueTable(f"{space.family}/{space.backend.name}", opts["exploration"], path)
        table.load()
        return IcrlSession(ctx["family"], space, table, int(ctx.get("seed", 0)))


@hookimpl
def argus_register_planners():
    return [IcrlPlanner()]
