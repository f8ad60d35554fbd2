"""The abstract interpreter: runs the IR through a table of transfer functions, one per IR
op type (`transfer.TRANSFER`), over the abstract domain (`domain.py`).

Each transfer function updates the abstract value (`AVal`) of its op's result and poses
the assertions the op implies through the `Checker`. After it, a kernel that indexes
memory by data also records the op's integer value (`data_values.DataState.track`). An op
type without a transfer function is an error naming the op, never skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from argus_core.ir import IntLike, Op, ProgramPoint
from argus_plugins.verifiers.smt.checker import Checker
from argus_plugins.verifiers.smt.data_values import DataState
from argus_plugins.verifiers.smt.domain import Frame
from argus_plugins.verifiers.smt.solver import Context

# A transfer function: the interpreter (its state, checker and context) and the op.
Rule = Callable[["Interpreter", Any], None]


class Interpreter:
    """The interpretation of one kernel under one policy. `state` maps a value id to its
    abstract value and `loops` lists the loops around the current op (both the `frame`'s,
    which the data state reads too); `data` is None for a kernel without data ops."""

    def __init__(
        self,
        ctx: Context,
        chk: Checker,
        rules: Mapping[type[Op], Rule],
        frame: Frame,
        data: DataState | None,
    ):
        self.ctx = ctx
        self.chk = chk
        self.rules = rules
        self.state = frame.values
        self.loops = frame.loops
        self.data = data

    def run(self, ops: Sequence[Op]) -> None:
        for op in ops:
            self.op(op)

    def op(self, op: Op) -> None:
        rule = self.rules.get(type(op))
        if rule is None:
            known = ", ".join(sorted(t.__name__ for t in self.rules))
            raise ValueError(
                f"{op.point}: the smt verifier has no transfer function for op {op.kind!r} "
                f"({type(op).__name__}); it has rules for: {known}"
            )
        rule(self, op)
        if self.data is not None:
            self.data.track(op)

    def shape_of(self, shape: Sequence[IntLike], point: ProgramPoint) -> tuple[int, ...]:
        """A tile shape, concrete under the policy (or a ValueError naming the op)."""
        out = tuple(self.ctx.norm(s) for s in shape)
        for s in out:
            if not isinstance(s, int):
                raise ValueError(
                    f"{point}: tile shape {shape} is not concrete under the policy ({s})"
                )
        return out  # type: ignore[return-value]

    def malformed(self, op: Op, msg: str) -> None:
        """A ghost op the verifier cannot check as written: an `unknown` finding."""
        self.chk.unknown(op.kind, op.point, msg)


__all__ = ["Interpreter", "Rule"]
