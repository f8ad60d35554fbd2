"""Synthesized invariants proved by the `smt` verifier (issue #19).

The synthesis itself is `argus_core.spec.synthesis` (IR to IR, no verifier internals);
this module binds it to `SmtVerifier`: `check(ir, policy, spec, target)` and `check_modes`
(one spec per mode of the kernel's scalars, a family's `reference_specs(entry)`).
"""

from __future__ import annotations

from typing import Any

from argus_core.ir import KernelIR
from argus_core.spec import synthesis
from argus_core.spec.model import Spec
from argus_core.spec.synthesis import (
    Mismatch,
    Synthesis,
    Synthesized,
    SynthReport,
    count_hand_written,
    kernel_modes,
    roles_of,
    strength_report,
    strip_hand_written,
    synthesize,
    with_scalars,
)
from argus_plugins.verifiers.smt import SmtVerifier


def check(
    ir: KernelIR,
    policy: Any,
    spec: Spec,
    target: Any,
    options: dict[str, Any] | None = None,
    names: dict[str, str] | None = None,
    assume: dict[str, int] | None = None,
) -> SynthReport:
    """`synthesis.check` with the `smt` verifier."""
    return synthesis.check(SmtVerifier(), ir, policy, spec, target, options, names, assume)


def check_modes(
    ir: KernelIR,
    policy: Any,
    modes: list[tuple[dict[str, int], Spec]],
    target: Any,
    options: dict[str, Any] | None = None,
    names: dict[str, str] | None = None,
) -> SynthReport:
    """`synthesis.check_modes` with the `smt` verifier."""
    return synthesis.check_modes(SmtVerifier(), ir, policy, modes, target, options, names)


__all__ = [
    "Mismatch",
    "SynthReport",
    "Synthesis",
    "Synthesized",
    "check",
    "check_modes",
    "count_hand_written",
    "kernel_modes",
    "roles_of",
    "strength_report",
    "strip_hand_written",
    "synthesize",
    "with_scalars",
]
