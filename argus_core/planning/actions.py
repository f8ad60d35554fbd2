"""The action space the planners share (`planner=icrl`, `planner=search`; docs/planners.md).

An action changes a few names of a policy. Three sources:

- a **KB technique** (`kb/<id>.md`, kind `policy`, status `ready`) that applies to the
  family, to the backend's target and to the problem shape: every combination of its
  `action.tiles` / `action.compiler` values is one action (`num_stages: [3, 4]` gives two);
- a **grid neighbour** (`NEIGHBOUR`): one tile constant or compiler option moved to another
  value of its list in the configs (`kernel.tiles`, the backend's `policy_grid`);
- a **KB level** (kind `level`, status `ready`) where the backend has an explicit level
  (`backend.explicit_target`): the policy switches to the family's explicit-level kernel
  (`level: explicit`, every combination of the entry's `tiles` and `options` lists, all
  other names dropped); it is offered when the family builds that kernel for the target;
- a **KB rewrite** (kind `rewrite`, status `ready`) that has a rule in `REWRITE_RULES` and
  whose rewritten program the family's kernel module defines: it switches the candidate to
  that program and sets its constant (`split_k`: the GEMM module's `gemm_splitk` +
  `gemm_cast`, SPLIT from the entry's `splits`), dropping the constants the rewritten
  program does not take (GROUP). No LLM is involved: the rewritten kernels are DSL code
  the verifier proves like any other.

An action is offered from a policy only when the policy it yields differs from that
policy, satisfies the technique's checkable preconditions and `when` over the shape and
the new policy's values, is consistent with the program it selects, and passes
`backend.validate_policy`.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from argus_core import kb
from argus_core.errors import ArgusError, ConfigError, choices_error
from argus_core.ir.explicit import LEVEL_OPTION, selects_explicit
from argus_core.planning.space import PolicySpace, derive
from argus_core.types import Candidate, Policy

NEIGHBOUR = "grid_neighbour"  # the pseudo-technique of grid-neighbour actions
SPACE_KINDS = ("derived", "config")  # planner.options.space


@dataclass(frozen=True)
class RewriteRule:
    """How a KB `rewrite` is carried out without an LLM: the family's kernel module holds the
    rewritten program (`entries`); a policy selects it by carrying `adds`, and the program
    does not take the constants in `removes`."""

    name: str
    families: tuple[str, ...]
    adds: str  # the rewritten program's own constant (its values: the entry's `param`)
    param: str  # the KB entry's parameter listing the values of `adds`
    removes: tuple[str, ...]
    entries: tuple[str, ...]


REWRITE_RULES: dict[str, RewriteRule] = {
    "split_k": RewriteRule(
        "split_k", ("gemm",), "SPLIT", "splits", ("GROUP",), ("gemm_splitk", "gemm_cast")
    ),
}


def consistent(policy: Policy) -> bool:
    """False when a policy mixes a rewritten program's constant with one it does not take
    (SPLIT with GROUP): no program of the family has both."""
    return not any(
        r.adds in policy.tiles and any(x in policy.tiles for x in r.removes)
        for r in REWRITE_RULES.values()
    )


@dataclass(frozen=True)
class Action:
    """Set `tiles` and `compiler` names to these values and drop the tiles and compiler
    options in `drop`; `technique` says why."""

    technique: str
    tiles: tuple[tuple[str, int], ...] = ()
    compiler: tuple[tuple[str, Any], ...] = ()
    drop: tuple[str, ...] = ()

    def apply(self, policy: Policy) -> Policy:
        """`policy` with this action's values set and `drop` removed (others unchanged)."""
        tiles = {k: v for k, v in policy.tiles.items() if k not in self.drop}
        compiler = {k: v for k, v in policy.compiler.items() if k not in self.drop}
        return Policy({**tiles, **dict(self.tiles)}, {**compiler, **dict(self.compiler)})

    def note(self) -> str:
        """'technique: BM=16 num_stages=3', what a candidate's `note` says."""
        sets = " ".join(f"{k}={v}" for k, v in (*self.tiles, *self.compiler))
        return f"{self.technique}: {sets}"


def planner_options(cfg: Any, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """`cfg.options` over `defaults`; ConfigError naming an unknown key and the valid ones."""
    given = dict((cfg.get("options") if cfg is not None else None) or {})
    for key in given:
        if key not in defaults:
            raise ConfigError(
                f"planner {cfg.get('name')!r}: " + choices_error("option", key, list(defaults))
            )
    return {**defaults, **given}


def grid_lists(cfg: Any, key: str) -> dict[str, list[Any]]:
    """`cfg[key]` (a mapping of lists, DictConfig or dict) as plain lists; {} if absent."""
    node = cfg.get(key) if cfg is not None else None
    return {str(k): list(v) for k, v in dict(node or {}).items()}


def start_policy(tiles: Mapping[str, list[Any]], compiler: Mapping[str, list[Any]]) -> Policy:
    """The first value of every grid list: the starting policy, as `planner=baseline`'s
    first candidate, so rewards of every planner share one reference."""
    return Policy(
        {k: v[0] for k, v in tiles.items() if v}, {k: v[0] for k, v in compiler.items() if v}
    )


def applicable_techniques(
    base: kb.KnowledgeBase, family: str, backend: str, shape: Mapping[str, int]
) -> list[kb.Technique]:
    """Ready policy techniques for `family` on `backend` whose checkable preconditions do
    not fail for `shape`. A family or backend the KB does not know gets only the entries
    written for `any` family or target."""
    fam = family if family in base.families else None
    tgt = backend if backend in base.backend_targets else None
    found = base.query(family=fam, target=tgt, status="ready", shape=dict(shape))
    found = [
        t
        for t in found
        if t.action.kind in ("policy", "level")
        or (
            t.action.rewrite in REWRITE_RULES and family in REWRITE_RULES[t.action.rewrite].families
        )
    ]
    if fam is None:
        found = [t for t in found if kb.ANY in t.families]
    if tgt is None:
        found = [t for t in found if kb.ANY in t.targets]
    return found


def _int_values(shape: Mapping[str, int], policy: Policy) -> dict[str, int]:
    """The names a KB condition may read: shape symbols, tiles, int compiler options."""
    merged = {**shape, **policy.tiles, **policy.compiler}
    return {k: v for k, v in merged.items() if isinstance(v, int) and not isinstance(v, bool)}


def _holds(tech: kb.Technique, values: Mapping[str, int]) -> bool:
    """The technique's preconditions and `when` do not fail for `values`."""
    if not tech.applies(values):
        return False
    if tech.action.when:
        tree = kb.parse_condition(tech.action.when)
        return tree is None or kb.eval_condition(tree, values) is not False
    return True


def specificity(tech: kb.Technique, shape: Mapping[str, int]) -> int:
    """How many distinct checkable conditions of `tech` read the shape and hold for it:
    knowledge written for this very problem (skinny M, MoE prefill) before generic advice.
    The planners use it only to order techniques that have no value estimate yet."""
    conds = set(tech.checkable_preconditions()) | (
        {tech.action.when} if tech.action.when else set()
    )
    count = 0
    for text in conds:
        tree = kb.parse_condition(text)
        if tree is not None and kb.condition_names(tree) & set(shape):
            count += kb.eval_condition(tree, shape) is True
    return count


class ActionSpace:
    """The actions of one invocation: its family, backend, shape, grids and KB techniques."""

    def __init__(
        self,
        family: str,
        backend: Any,
        shape: Mapping[str, int],
        tiles: Mapping[str, list[Any]],
        compiler: Mapping[str, list[Any]],
        techniques: Iterable[kb.Technique],
    ):
        self.family, self.backend = family, backend
        self.shape = {k: int(v) for k, v in shape.items()}
        self.tiles = {k: list(v) for k, v in tiles.items()}
        self.compiler = {k: list(v) for k, v in compiler.items()}
        # a technique setting a tile this kernel lacks would fail the pipeline's check
        # (a level's tiles are its explicit kernel's constants, checked by the family)
        self.techniques = {
            t.id: t
            for t in techniques
            if t.action.kind == "level" or set(t.action.tiles) <= set(self.tiles)
        }
        self.entries: frozenset[str] = frozenset()  # kernels the family's module defines
        # the family object, which builds a `level: explicit` policy's kernel (from_ctx)
        self.family_impl: Any = None
        self.policy_space: PolicySpace | None = None  # the derived space's constraints

    @classmethod
    def from_ctx(
        cls,
        ctx: Mapping[str, Any],
        base: kb.KnowledgeBase | None = None,
        space_kind: str = "derived",
    ) -> ActionSpace:
        """The space of a planner's `ctx` (family, backend, kernel_cfg, backend_cfg).
        `space_kind` "derived": the tile and option lists from the target's spec and the
        shape (`argus_core.planning.space`); "config": the kernel config's `tiles` and the
        backend's `policy_grid` as written."""
        if space_kind not in SPACE_KINDS:
            raise ConfigError(choices_error("planner.options.space", space_kind, SPACE_KINDS))
        family, backend = ctx["family"], ctx["backend"]
        kernel_cfg = ctx["kernel_cfg"]
        shape = {str(k): int(v) for k, v in dict(kernel_cfg.get("shape") or {}).items()}
        base = base if base is not None else kb.load()
        tiles = grid_lists(kernel_cfg, "tiles")
        compiler = grid_lists(ctx["backend_cfg"], "policy_grid")
        derived = None
        if space_kind == "derived":
            derived = derive(family, backend, shape, tiles, compiler)
            tiles, compiler = derived.tiles, derived.compiler
        space = cls(
            family.name,
            backend,
            shape,
            tiles,
            compiler,
            applicable_techniques(base, family.name, backend.name, shape),
        )
        if derived is not None:
            derived.allow = ctx.get("policy_filter")  # a replay's recorded points only
        space.policy_space = derived
        space.entries = defined_kernels(family)
        space.family_impl = family
        if backend.explicit_target is None:  # no explicit level on this backend
            space.techniques = {
                tid: t for tid, t in space.techniques.items() if t.action.kind != "level"
            }
        # a rewrite is offered only where the family's module holds the rewritten program
        space.techniques = {
            tid: t
            for tid, t in space.techniques.items()
            if t.action.kind != "rewrite"
            or (
                set(REWRITE_RULES[t.action.rewrite].entries) <= space.entries
                # and a policy carrying the rewrite's constant makes the family run them
                and set(REWRITE_RULES[t.action.rewrite].entries)
                <= set(family.entries_for({REWRITE_RULES[t.action.rewrite].adds: 2}))
            )
        }
        return space

    def start(self) -> Policy:
        return start_policy(self.tiles, self.compiler)

    def arms(self) -> list[str]:
        """Every technique id an action may carry, the KB's sorted, then NEIGHBOUR."""
        return [*sorted(self.techniques), NEIGHBOUR]

    def valid(self, policy: Policy) -> bool:
        """True when `policy` selects one program consistently and the backend accepts it
        (`validate_policy` does not raise)."""
        if not consistent(policy):
            return False
        if self.policy_space is not None and self.policy_space.allow is not None:
            if not self.policy_space.allow(policy):
                return False
        try:
            if selects_explicit(policy):  # the family builds its explicit kernel for it
                if self.family_impl is None:
                    return False
                target = self.backend.check_explicit_level()
                kernel = self.family_impl.explicit_kernel(policy, target.name, dict(self.shape))
                if kernel.shared_bytes() > self.backend.spec.lds_bytes_per_cu:
                    return False  # no block of it could launch
            elif self.policy_space is not None and not self.policy_space.ok(policy):
                return False  # the derived space's constraints (shared memory, registers)
            else:
                self.backend.validate_policy(policy)
        except ArgusError:
            return False
        return True

    def actions(self, policy: Policy, arm: str | None = None) -> list[tuple[Action, Policy]]:
        """(action, the policy it yields) for every action of `arm` (None: all arms) that
        changes `policy` into a valid one, in a stable order, without repeated policies."""
        arms = [arm] if arm is not None else self.arms()
        out: list[tuple[Action, Policy]] = []
        seen = {policy.key()}
        for a in arms:
            gen = self._neighbours(policy) if a == NEIGHBOUR else self._technique(a, policy)
            for action in gen:
                new = action.apply(policy)
                if new.key() not in seen and self.valid(new):
                    seen.add(new.key())
                    out.append((action, new))
        return out

    def _technique(self, tid: str, policy: Policy) -> Iterable[Action]:
        tech = self.techniques[tid]
        if tech.action.kind == "rewrite":
            yield from self._rewrite(tid, tech, policy)
            return
        if tech.action.kind == "level":
            yield from self._level(tid, tech, policy)
            return
        names = [*tech.action.tiles, *tech.action.compiler]
        lists = [*tech.action.tiles.values(), *tech.action.compiler.values()]
        n_tiles = len(tech.action.tiles)
        for combo in itertools.product(*lists):
            action = Action(
                tid,
                tuple(zip(names[:n_tiles], combo[:n_tiles])),
                tuple(zip(names[n_tiles:], combo[n_tiles:])),
            )
            if _holds(tech, _int_values(self.shape, action.apply(policy))):
                yield action

    def _rewrite(self, tid: str, tech: kb.Technique, policy: Policy) -> Iterable[Action]:
        rule = REWRITE_RULES[tech.action.rewrite]
        values = tech.action.params.get(rule.param, [])
        for v in values if isinstance(values, list) else [values]:
            action = Action(tid, tiles=((rule.adds, int(v)),), drop=rule.removes)
            if _holds(tech, _int_values(self.shape, action.apply(policy))):
                yield action

    def _level(self, tid: str, tech: kb.Technique, policy: Policy) -> Iterable[Action]:
        """Every combination of the entry's tiles and options, with `level` set and every
        name of `policy` the combination does not set dropped (another kernel's names)."""
        names = [*tech.action.tiles, *tech.action.compiler]
        lists = [*tech.action.tiles.values(), *tech.action.compiler.values()]
        n_tiles = len(tech.action.tiles)
        for combo in itertools.product(*lists):
            tiles = tuple(zip(names[:n_tiles], combo[:n_tiles]))
            opts = ((LEVEL_OPTION, tech.action.level), *zip(names[n_tiles:], combo[n_tiles:]))
            keep = {LEVEL_OPTION, *names}
            drop = tuple(n for n in (*policy.tiles, *policy.compiler) if n not in keep)
            action = Action(tid, tiles, opts, drop)
            if _holds(tech, _int_values(self.shape, action.apply(policy))):
                yield action

    def _neighbours(self, policy: Policy) -> Iterable[Action]:
        for name, values in self.tiles.items():
            if name not in policy.tiles:  # a rewritten program without this constant
                continue
            for v in values:
                if policy.tiles.get(name) != v:
                    yield Action(NEIGHBOUR, tiles=((name, v),))
        for name, values in self.compiler.items():
            for v in values:
                if policy.compiler.get(name) != v:
                    yield Action(NEIGHBOUR, compiler=((name, v),))


def defined_kernels(family: Any) -> frozenset[str]:
    """Names of the @al.kernel functions in the family's DSL module (read, not run)."""
    try:
        tree = ast.parse(family.source())
    except (OSError, SyntaxError, AttributeError):
        return frozenset()
    return frozenset(
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and any(ast.unparse(d).endswith("kernel") for d in node.decorator_list)
    )


def make_candidate(
    family: Any,
    index: int,
    policy: Policy,
    action: Action | None,
    parent: str | None = None,
    note: str | None = None,
) -> Candidate:
    """Candidate `c<index>` of `family`'s own kernel under `policy`; `techniques` names
    the action's technique (none for the starting policy) and `note` its parameters."""
    return Candidate(
        id=f"c{index:03d}",
        kernel=family.name,
        source=family.source(),
        entry=family.entry,
        policy=policy,
        techniques=[action.technique] if action else [],
        parent=parent,
        note=action.note()
        if action
        else (note or "starting policy: the first value of every grid list"),
    )
