"""Lowering rules keyed by IR node type (after Helion: one codegen per op and backend).

A `RuleTable` maps an IR node class (`argus_core.ir` ops, and `KernelIR` for the kernel as
a whole) to the function that writes its code. Lookup follows the class's MRO, so a rule
for `Store` also lowers `AtomicAdd` unless the table has one of its own. A target starts
from a generic table and `extended(...)` adds or overrides rules; the table it started from
is never changed. A node without a rule is an error naming it and the nodes the table has.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from argus_core.errors import DSLError
from argus_core.ir import Op

if TYPE_CHECKING:
    from argus_core.ir import KernelIR
    from argus_core.types import LoweredKernel, Policy

# (emitter, node, indent) -> None: the rule writes the node's code through the emitter
Rule = Callable[[Any, Any, int], None]


class RuleTable:
    """An immutable map from IR node class to its lowering rule."""

    def __init__(self, name: str, rules: Mapping[type, Rule]):
        self.name = name
        self._rules: dict[type, Rule] = dict(rules)

    def rule_for(self, node: Any) -> Rule:
        """The rule of `node`'s class, or of its nearest base class that has one."""
        for cls in type(node).__mro__:
            rule = self._rules.get(cls)
            if rule is not None:
                return rule
        what = f"op {node.kind!r}" if isinstance(node, Op) else type(node).__name__
        raise DSLError(
            f"the {self.name} lowering has no rule for {what}; it has rules for: "
            + ", ".join(sorted(c.__name__ for c in self._rules)),
            str(node.point) if isinstance(node, Op) else None,
        )

    def extended(self, name: str, rules: Mapping[type, Rule]) -> RuleTable:
        """A new table: this one's rules with `rules` added or replacing theirs."""
        return RuleTable(name, {**self._rules, **rules})

    def __contains__(self, cls: type) -> bool:
        return cls in self._rules


class Lowering(Protocol):
    """What a backend lowers with: a rule table and the driver that runs it over a kernel."""

    def lower(self, ir: KernelIR, policy: Policy, options: Mapping[str, Any]) -> LoweredKernel:
        """Source for `ir` under `policy`; `options` holds run facts ({"dtype": ...})."""

    def extended(self, name: str, rules: Mapping[type, Rule]) -> Lowering:
        """The same lowering with `rules` added or replacing its own (a runner's quirks,
        such as the interpreter's fp32 dot operands, over a target's rules)."""


__all__ = ["Lowering", "Rule", "RuleTable"]
