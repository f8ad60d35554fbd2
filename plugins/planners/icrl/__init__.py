"""`planner=icrl`: in-context reinforcement learning over KB techniques (offline path).

State: the best candidate so far (its policy and result). Each step chooses a technique by
UCB1 over its action value, applies one of its concrete actions (`actions.ActionSpace`)
to the best policy, and learns from the result. The values are kept per (family, backend,
technique) in a JSON file (`options.values_path`) and loaded at the start, so a later run
starts from what earlier runs learned. With `options.llm` and an LLM (`llm=...`), every
`llm_every`-th step asks the LLM for a DSL kernel instead (`llm.LLMPolicy`), and a violated
LLM candidate is repaired from its counterexamples first. See docs/planners.md.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from argus_core.errors import ConfigError
from argus_core.evaluate.profile import feedback, summary_line
from argus_core.hookspecs import hookimpl
from argus_core.planning.actions import (
    NEIGHBOUR,
    Action,
    ActionSpace,
    make_candidate,
    planner_options,
    specificity,
)
from argus_core.planning.space import SWITCHES, pipelined_smem
from argus_core.types import Candidate, CandidateResult, Policy
from argus_plugins.planners.icrl.llm import NEW, REPAIR, LLMPolicy
from argus_plugins.planners.icrl.values import DEFAULT_PATH, ValueTable

OPTIONS: dict[str, Any] = {
    "exploration": 1.0,
    "values_path": None,
    "learn": True,
    "llm": False,
    "repair_budget": 2,
    "llm_every": 2,
    "space": "derived",
    "model": True,
}
STRATEGY = "ucb1"
MODEL_ARM = "cost_model"  # the pseudo-technique: the space's next policy by estimated time
CORRECTION_RIDGE = 0.5  # how far a few measurements move the model's per-value shifts
KB_TRUST = 0.93  # a KB technique's action goes first within 7% (the model's median error)
# a measured tile within the model's error of the best is not beaten yet: its options stay
# in the exploitation side (one measurement judged it at one setting of its options)
NEAR = 1.0 / KB_TRUST - 1.0
SPECIFIC = 2  # a technique this many of whose shape conditions hold is screened first
SCREEN_SHARE = 0.5  # the share of the budget that screens the model's best tiles first
DEFAULT_BUDGET = 8


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


RESOURCE_FAILURES = ("out of resource", "outofresources", "shared memory")


def out_of_resources(failure: str | None) -> bool:
    """A failure that says the policy needed more shared memory (or another per-block
    resource) than the target has: its tiles and stages, not a lowering option, failed."""
    text = (failure or "").lower()
    return any(k in text for k in RESOURCE_FAILURES)


def smem_need(family: Any, policy: Policy) -> int | None:
    """Shared memory a policy's pipeline holds (`argus_core.planning.space.pipelined_smem`),
    None without the tiles to say."""
    return pipelined_smem(family, dict(policy.tiles), dict(policy.compiler))


def _one_tile(tech: Any) -> bool:
    """Whether a KB technique's action names one whole tile (a single value for each of
    BM, BN and BK): a measured policy, not a direction to search."""
    tiles = tech.action.tiles
    return tech.action.kind == "policy" and all(
        len(tiles.get(k, ())) == 1 for k in ("BM", "BN", "BK")
    )


def _tile_of(policy: Policy) -> tuple:
    """What a policy's tile is: its tile constants and warps (not stages or switches)."""
    return (tuple(sorted(policy.tiles.items())), policy.compiler.get("num_warps"))


def _switched_on(policy: Policy) -> set[str]:
    """The on/off lowering options (tma, persistent, warp_specialize) `policy` turns on."""
    return {k for k in SWITCHES if policy.compiler.get(k)}


class IcrlSession:
    """One invocation's bandit: proposes one candidate per call, learns in `observe`."""

    def __init__(
        self,
        family: Any,
        space: ActionSpace,
        table: ValueTable,
        seed: int,
        llm: LLMPolicy | None = None,
        llm_every: int = 2,
        estimate: Callable[[Policy], float] | None = None,
        dtype: str = "bf16",
        budget: int = DEFAULT_BUDGET,
    ):
        self.family, self.space, self.table = family, space, table
        # the cost model's time of a policy (options.model): it picks the starting policy
        # (the space's best estimate) and, within the technique UCB1 chose, the action
        self.estimate = estimate
        self.measured: list[tuple[Policy, float]] = []  # (policy, measured ms / estimated ms)
        # {tile: its fastest measured ms} (`_tile_of`)
        self.tile_ms: dict[Any, float] = {}
        # with a cost model: the first `screen` tiles (the start's included) are the model's
        # best tiles, one candidate each, before any step spends on options
        self.screen = max(1, int(budget * SCREEN_SHARE))
        self._shift_cache: tuple[int, dict[Any, float]] | None = None
        # per on/off lowering option switched on: [candidates ok, candidates failed]
        self.switch_outcomes: dict[str, list[int]] = {}
        # the least shared memory (`smem_need`) of a policy that ran out of resources
        self.smem_failed: int | None = None
        self.dtype = dtype
        self.profile: dict[str, Any] | None = None  # the last timed candidate's feedback
        self.llm, self.llm_every = llm, llm_every
        self.history: list[str] = []  # one line per observed step, for the LLM's prompt
        self.to_repair: list[CandidateResult] = []  # violated LLM candidates, oldest first
        self.rng = random.Random(seed)
        self.best_policy: Policy = self._start()
        self.best: CandidateResult | None = None
        self.proposed: set[str] = set()  # policy keys, never proposed twice
        self.proposed_policies: list[Policy] = []
        self.last_explore, self.last_improved = True, False  # the structured step's sides
        self.pending: dict[str, tuple[str | None, float | None]] = {}  # id -> (arm, parent ms)
        self.count = 0
        self.step = 0
        self.last: dict[str, Any] | None = None
        # techniques without a value yet are tried most specific first, grid moves last
        self.prior = {t.id: float(specificity(t, space.shape)) for t in space.techniques.values()}
        self.prior[NEIGHBOUR] = -1.0
        self.pulled: set[str] = set()  # the arms this run has proposed a candidate of

    def _start(self) -> Policy:
        """The first value of every list; with a cost model and a derived space, the
        space's policy of least estimated time instead."""
        start = self.space.start()
        if self.estimate is None or self.space.policy_space is None:
            return start
        points = [p for p in self.space.policy_space.points() if self.space.valid(p)]
        return min(points, key=self._ms, default=start)

    def _ms(self, policy: Policy) -> float:
        ms = self.estimate(policy) if self.estimate is not None else math.inf
        return ms if math.isfinite(ms) else math.inf

    def _corrected(self, policy: Policy) -> float:
        """The cost model's time corrected by what this run measured: log(measured /
        estimated) of the timed policies, fitted as a mean plus one shift per value a
        policy sets (ridge regression toward no shift, `CORRECTION_RIDGE`), applied to
        `policy`'s values. A value that measured slower than the model said makes every
        policy that sets it slower too (persistent on a weight stream, stages past the
        K loop's need), where the plain nearest-neighbour ratio moved only the neighbours."""
        ms = self._ms(policy)
        if not self.measured or not math.isfinite(ms):
            return ms
        shift = self._shifts()
        names = {**policy.tiles, **policy.compiler}
        total = shift.get(None, 0.0) + sum(shift.get((k, v), 0.0) for k, v in names.items())
        return ms * math.exp(total)

    def _shifts(self) -> dict[Any, float]:
        """{None: mean log ratio, (name, value): shift} fitted on `self.measured` (cached
        per number of measurements)."""
        if self._shift_cache is not None and self._shift_cache[0] == len(self.measured):
            return self._shift_cache[1]
        rows = [({**p.tiles, **p.compiler}, math.log(r)) for p, r in self.measured if r > 0]
        mean = sum(r for _, r in rows) / len(rows) if rows else 0.0
        keys = sorted({(k, v) for names, _ in rows for k, v in names.items()}, key=repr)
        # values every measured policy shares carry no information beyond the mean
        keys = [kv for kv in keys if not all(kv in names.items() for names, _ in rows)]
        shift: dict[Any, float] = {None: mean}
        if keys:
            import numpy as np

            x = np.array([[float(kv in names.items()) for kv in keys] for names, _ in rows])
            y = np.array([r - mean for _, r in rows])
            xc = x - x.mean(axis=0)
            w = np.linalg.solve(xc.T @ xc + CORRECTION_RIDGE * np.eye(len(keys)), xc.T @ y)
            shift[None] = mean - float(x.mean(axis=0) @ w)
            shift.update({kv: float(v) for kv, v in zip(keys, w)})
        self._shift_cache = (len(self.measured), shift)
        return shift

    def _score(self, arm: str, policy: Policy) -> float:
        """The corrected estimate, discounted by `KB_TRUST` for a KB technique's action:
        where the model cannot tell two policies apart (within its error), the KB's advice
        goes first (on the H200 GEMMs it names 128x256x64, 8 warps, the best tile of all
        four large shapes, which the model refitted without the shape ranks 2nd to 14th)."""
        ms = self._corrected(policy)
        kb = arm in self.space.techniques
        return ms * KB_TRUST if kb else ms

    def _structured(self, pool: list[tuple[str, Action, Policy]]) -> list:
        """The step's pool: a **new tile** (tile constants and warps no earlier candidate
        had: the model's best policy of each such tile with every lowering switch off
        joins the pool: a tile is judged by Triton's plain lowering, since a switch the
        model turns on can cost the tile more than the next tile differs (H200 skinny
        128x14336x4096: its best tile screened with TMA and a persistent grid measured 7%
        over its plain policy, the best of the space, and was never revisited); the
        switches are the options side's) or the **best
        tiles' options** (stages and the lowering switches, which interact too strongly
        for the model to settle: every unproposed policy of the best measured tile, and of
        every measured tile within `NEAR` of it, joins). Until `screen` tiles have been
        tried (half the budget), a new tile; then, after a step that found a new best, its
        options; otherwise the other side than the last step's. The options side measures
        the best tile's plain reference first (`_plain_reference`), then each near tile's
        untried combinations of switches (`_untried_switch_sets`), then anything of theirs.
        [] when the side has nothing to offer (the caller then takes the whole pool)."""
        if self.space.policy_space is None or self.best is None:
            return []
        tried = {_tile_of(q) for q in self.proposed_policies}
        best_tile = _tile_of(self.best_policy)
        points = [
            q
            for q in self.space.policy_space.points()
            if q.key() not in self.proposed and self.space.valid(q) and not self._too_big(q)
        ]
        dead = {k for k, (ok, bad) in self.switch_outcomes.items() if bad and not ok}
        points = [q for q in points if not dead & _switched_on(q)] or points
        # the first `screen` tiles are new tiles; then a step that found a new best is
        # followed by its tile's options; otherwise the side alternates (a new tile, then
        # the best tiles' options, ...)
        explore = len(tried) < self.screen or (not self.last_improved and not self.last_explore)
        self.last_explore = explore
        if explore:
            side = [t for t in pool if _tile_of(t[2]) not in tried]
            # knowledge written for this very regime (>= SPECIFIC of its shape conditions
            # hold, and it names one tile: the policy measured best on such problems, not
            # a range of advice) is screened once, before the model's tiles: where the
            # model extrapolates to a regime no other case shows, its estimate of that
            # policy can be off by more than KB_TRUST covers (H200 MoE decode T64 refitted
            # without T64: the KB's BM 64 policy 25% above the model's first pick,
            # measured 7% below it)
            regime = [
                t
                for t in side
                if t[0] in self.space.techniques
                and t[0] not in self.pulled
                and self.prior.get(t[0], 0.0) >= SPECIFIC
                and _one_tile(self.space.techniques[t[0]])
            ]
            if regime:
                return regime
            # a new tile is screened plain (docstring), switched only if it has no plain policy
            plain = {_tile_of(q) for q in points if not _switched_on(q)}
            per_tile: dict[Any, Policy] = {}
            for q in points:
                tile = _tile_of(q)
                if tile in tried or (tile in plain and _switched_on(q)):
                    continue
                if tile not in per_tile or self._corrected(q) < self._corrected(per_tile[tile]):
                    per_tile[tile] = q
            extra = list(per_tile.values())
        else:
            best_ms = self.tile_ms.get(best_tile, math.inf)
            near = {t for t, ms in self.tile_ms.items() if ms <= best_ms * (1.0 + NEAR)}
            near.add(best_tile)
            side = [t for t in pool if _tile_of(t[2]) in near]
            extra = [q for q in points if _tile_of(q) in near]
            plain = self._plain_reference(best_tile, points)
            combos = self._untried_switch_sets(near, points)
            if plain:
                side, extra = [], plain
            elif combos:
                side, extra = [], combos
        keys = {t[2].key() for t in side}
        for q in extra:
            if q.key() not in keys:
                side.append((MODEL_ARM, self._model_action(q), q))
        return side

    def _plain_reference(self, best_tile: Any, points: list[Policy]) -> list[Policy]:
        """The best tile's unproposed policies with every on/off lowering option off, while no
        policy of that tile without them has been proposed; else []. The model ranks a
        tile's switch combinations poorly (refitted without the case, the best tile's best
        policy is its first pick within that tile in 8 of the 18 recorded H200 spaces, its
        2nd to 8th in the others), and every policy measured on a tile with the model's
        switches on leaves the switches' effect there unmeasured: the correction cannot tell
        a good tile from good switches (`_shifts`). Triton's plain lowering is the reference
        each switch's effect is relative to, so the first options step of a best tile
        measures it (the stages the corrected estimate prefers); after that the correction
        has the contrast."""
        if any(_tile_of(q) == best_tile and not _switched_on(q) for q in self.proposed_policies):
            return []
        return [q for q in points if _tile_of(q) == best_tile and not _switched_on(q)]

    def _untried_switch_sets(self, near: set, points: list[Policy]) -> list[Policy]:
        """The unproposed policies of the `near` tiles whose combination of on/off lowering
        options no proposed policy of the same tile had; [] once every combination of every
        near tile has been proposed. The switches interact (on GEMM 4096x4096x14336's
        128x256x64 tile, recorded on the H200: TMA alone costs 5% over the plain lowering,
        TMA with a persistent grid gains 6%: the persistent kernel's TMA store overlaps the
        next tile's loop), and the correction (`_shifts`) learns one shift per value, the
        sum of which cannot express a combination's own effect: a combination is evidence
        only once measured on the tile. Stages (one more buffer of the same loop) come
        after, and a combination the model ranks last comes last (the corrected estimate
        orders them)."""
        tried = {(_tile_of(q), frozenset(_switched_on(q))) for q in self.proposed_policies}
        return [
            q
            for q in points
            if _tile_of(q) in near and (_tile_of(q), frozenset(_switched_on(q))) not in tried
        ]

    def _model_action(self, p: Policy) -> Action:
        """An action of the MODEL_ARM setting every value of `p` from the best policy."""
        drop = tuple(
            n
            for n in (*self.best_policy.tiles, *self.best_policy.compiler)
            if n not in p.tiles and n not in p.compiler
        )
        return Action(MODEL_ARM, tuple(p.tiles.items()), tuple(p.compiler.items()), drop)

    def _too_big(self, policy: Policy) -> bool:
        """Needs at least the shared memory of a policy that ran out of it (this run)."""
        if self.smem_failed is None:
            return False
        need = smem_need(self.family, policy)
        return need is not None and need >= self.smem_failed

    def _model_options(self, k: int = 3) -> list[tuple[Action, Policy]]:
        """The `k` unproposed policies of the derived space of least estimated time, as
        actions setting every value (the MODEL_ARM's options)."""
        if self.space.policy_space is None:
            return []
        points = [
            p
            for p in self.space.policy_space.points()
            if p.key() not in self.proposed and self.space.valid(p)
        ]
        points.sort(key=self._ms)
        out = []
        for p in points[:k]:
            drop = tuple(
                n
                for n in (*self.best_policy.tiles, *self.best_policy.compiler)
                if n not in p.tiles and n not in p.compiler
            )
            action = Action(MODEL_ARM, tuple(p.tiles.items()), tuple(p.compiler.items()), drop)
            out.append((action, p))
        return out

    def propose(self, n: int) -> list[Candidate]:
        """The starting policy first; then one action of the technique with the best UCB1
        score, applied to the best policy so far. One candidate per call, so each choice
        sees every result before it; [] when no untried valid action is left."""
        if n <= 0:
            return []
        if self.count == 0:
            return [self._candidate(self.best_policy, None)]
        if self.llm is not None and self.llm.active:
            cand = self._llm_candidate()
            if cand is not None:
                return [cand]
        options: dict[str, list[tuple[Action, Policy]]] = {}
        for arm in self.space.arms():
            acts = self.space.actions(self.best_policy, arm)
            acts = [(a, p) for a, p in acts if p.key() not in self.proposed]
            if acts:
                options[arm] = acts
        if self.estimate is not None:
            model = self._model_options()
            if model:
                options[MODEL_ARM] = model
        if not options:
            return []
        if self.estimate is not None:
            # with a cost model: the action of least corrected estimate over every arm,
            # ties to the arm UCB1 ranks first; never a lowering option that has only
            # failed on this kernel so far (Triton cannot specialize warps of every loop)
            dead = {k for k, (ok, bad) in self.switch_outcomes.items() if bad and not ok}
            kept = {
                a: [
                    (act, p)
                    for act, p in acts
                    if not dead & _switched_on(p) and not self._too_big(p)
                ]
                for a, acts in options.items()
            }
            options = {a: acts for a, acts in kept.items() if acts} or options
            order = {a: i for i, a in enumerate(self._ucb_order(list(options)))}
            pool = [(a, act, p) for a, acts in options.items() for act, p in acts]
            pool = self._structured(pool) or pool
            arm, action, policy = min(
                pool,
                key=lambda t: (self._score(t[0], t[2]), order.get(t[0], len(order))),
            )
            return [self._candidate(policy, action)]
        arm = self.table.choose(list(options), self.rng, self.prior)
        action, policy = self.rng.choice(options[arm])
        return [self._candidate(policy, action)]

    def arms(self) -> list[str]:
        """The arms this session may pull: the space's, and MODEL_ARM with a cost model."""
        return [*self.space.arms(), *([MODEL_ARM] if self.estimate is not None else [])]

    def _ucb_order(self, arms: list[str]) -> list[str]:
        """`arms` from UCB1's first choice to its last."""
        left, out = list(arms), []
        while left:
            arm = self.table.choose(left, self.rng, self.prior)
            out.append(arm)
            left.remove(arm)
        return out

    def _llm_candidate(self) -> Candidate | None:
        """A repair of the oldest violated LLM candidate if one waits; else, on every
        `llm_every`-th step, a new LLM-written kernel; else None (the bandit's turn, also
        when the LLM's budget is spent)."""
        cid = f"c{self.count + 1:03d}"
        if self.to_repair:
            cand = self.llm.repair(cid, self.to_repair.pop(0), self.best, self.history)
        elif (self.count - 1) % self.llm_every == 0:
            cand = self.llm.propose(cid, self.best_policy, self.best, self.history)
        else:
            return None
        if cand is None:
            return None
        self.count += 1
        parent_ms = self.best.timing.ms if self.best is not None and self.best.timing else None
        self.pending[cand.id] = (cand.techniques[0], parent_ms)
        return cand

    def _candidate(self, policy: Policy, action: Action | None) -> Candidate:
        self.count += 1
        parent = self.best.candidate.id if self.best is not None else None
        note = None
        if action is None and self.estimate is not None and self.space.policy_space is not None:
            note = "starting policy: the least estimated time of the derived space"
        cand = make_candidate(self.family, self.count, policy, action, parent, note)
        if self.best is not None and self.best.candidate.origin == "llm":
            # the best kernel is the LLM's: tune its policy, parsed in the sandbox too
            cand.source, cand.origin = self.best.candidate.source, "llm"
        self.proposed.add(policy.key())
        self.proposed_policies.append(policy)
        parent_ms = self.best.timing.ms if self.best is not None and self.best.timing else None
        self.pending[cand.id] = (action.technique if action else None, parent_ms)
        if action is not None:
            self.pulled.add(action.technique)
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
        if arm is not None and arm not in (NEW, REPAIR):  # techniques, moves, the model
            self.table.update(arm, reward)
            self.table.save()
        fb = self._feedback(result)
        self.history.append(
            f"{cid} {arm or 'start'}: reward {result.reward if result.reward is not None else 0:+.2f}"
            f" ({result.failure or 'ok'})"[:300]
            + (f"; {summary_line(fb)}" if fb else "")
        )
        if self.llm is not None and arm in (NEW, REPAIR) and self.llm.wants_repair(result):
            self.to_repair.append(result)
        self.last = {
            "candidate": cid,
            "technique": arm,
            "reward": result.reward,
            "bandit_reward": reward,
            "failure": result.failure,
            **({"profile": fb} if fb else {}),
        }
        ms = result.timing.ms if result.ok and result.timing is not None else None
        on = [k for k in SWITCHES if k in _switched_on(result.candidate.policy)]
        if not result.ok and out_of_resources(result.failure):
            # the policy's tiles and stages did not fit, whatever its switches: never again
            # a policy of this kernel that needs at least as much shared memory
            need = smem_need(self.family, result.candidate.policy)
            if need is not None:
                self.smem_failed = min(self.smem_failed or need, need)
            on = []
        for name in on if result.ok else on[-1:]:
            # a failure is blamed on the last switch it turns on: the one that depends on
            # the others (warp_specialize needs tma)
            self.switch_outcomes.setdefault(name, [0, 0])[0 if result.ok else 1] += 1
        if ms is not None and math.isfinite(ms):
            tile = _tile_of(result.candidate.policy)
            self.tile_ms[tile] = min(ms, self.tile_ms.get(tile, math.inf))
        if ms is not None and math.isfinite(ms) and self.estimate is not None:
            est = self._ms(result.candidate.policy)
            if math.isfinite(est) and est > 0:
                self.measured.append((result.candidate.policy, ms / est))
        self.last_improved = False
        if ms is not None and math.isfinite(ms):
            if self.best is None or ms < self.best.timing.ms:  # type: ignore[union-attr]
                self.best, self.best_policy = result, result.candidate.policy
                self.last_improved = True

    def _feedback(self, result: CandidateResult) -> dict[str, Any] | None:
        """Profiler feedback of a timed result (`argus_core.evaluate.profile.feedback`):
        roofline point, bound, occupancy, spills; labelled MEASURED or ESTIMATE."""
        timing = result.timing
        if not result.ok or timing is None or not (timing.ms and math.isfinite(timing.ms)):
            return None
        spec = self.space.backend.spec
        try:
            fb = feedback(
                self.family,
                dict(self.space.shape),
                self.dtype,
                spec,
                timing,
                result.candidate.policy,
                result.compile,
            )
        except (ValueError, ArithmeticError):
            return None
        self.profile = fb
        return fb

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
            "values": self.table.to_dict(self.arms()),
            "last": dict(self.last) if self.last else None,
            "best": best,
            **({"llm": self.llm.state()} if self.llm is not None else {}),
        }


class IcrlPlanner:
    name = "icrl"

    def create(self, cfg: Any, ctx: dict[str, Any]) -> IcrlSession:
        """A session over `ctx`'s action space with the values stored for its (family,
        backend), loaded from `options.values_path` (default `.argus/icrl_values.json`)."""
        opts = planner_options(cfg, OPTIONS)
        for key, least in (("repair_budget", 0), ("llm_every", 1)):
            value = opts[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ConfigError(f"planner.options.{key}={value!r}: must be an integer >= {least}")
        llm = None
        if opts["llm"]:
            if ctx.get("llm") is None:
                raise ConfigError(
                    "planner.options.llm=true needs an LLM, but llm=none; choose one of "
                    "llm=openai, llm=anthropic, llm=local, llm=replay (or options.llm=false)"
                )
            llm = LLMPolicy.from_ctx(ctx, int(opts["repair_budget"]))
        space = ActionSpace.from_ctx(ctx, space_kind=str(opts["space"]))
        if not isinstance(opts["model"], bool):
            raise ConfigError(f"planner.options.model={opts['model']!r}: must be true or false")
        estimate = None
        if opts["model"]:
            family, backend = ctx["family"], ctx["backend"]
            dtype = str(ctx["kernel_cfg"].get("dtype") or "bf16")

            def estimate(policy: Policy) -> float:
                return backend.estimate(family, dict(space.shape), dtype, policy, None).ms

        # learn=false: the values start empty and are never saved, so a run is reproducible
        # by its seed alone, whatever the directory holds
        if not isinstance(opts["learn"], bool):
            raise ConfigError(f"planner.options.learn={opts['learn']!r}: must be true or false")
        path = Path(opts["values_path"] or Path.cwd() / DEFAULT_PATH) if opts["learn"] else None
        table = ValueTable(f"{space.family}/{space.backend.name}", opts["exploration"], path)
        table.load()
        return IcrlSession(
            ctx["family"],
            space,
            table,
            int(ctx.get("seed", 0)),
            llm,
            int(opts["llm_every"]),
            estimate,
            str(ctx["kernel_cfg"].get("dtype") or "bf16"),
            int(ctx.get("budget") or DEFAULT_BUDGET),
        )


@hookimpl
def argus_register_planners():
    return [IcrlPlanner()]
