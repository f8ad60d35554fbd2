"""Verifier plugins. `none` skips verification (the report says so, never "verified");
`smt` proves the kernel's tag assertions with z3 (plugins/verifiers/smt)."""

from __future__ import annotations

from typing import Any

from argus_core.hookspecs import hookimpl
from argus_core.target import TargetSpec
from argus_core.types import VerifyReport


class NoVerifier:
    """`verifier=none`: the candidate goes on unverified, and its report says `skipped`."""

    name = "none"

    def verify(
        self, ir: Any, policy: Any, options: dict[str, Any], target: TargetSpec
    ) -> VerifyReport:
        return VerifyReport(status="skipped", summary="not verified (verifier=none)")


@hookimpl
def argus_register_verifiers():
    from argus_plugins.verifiers.smt import SmtVerifier  # z3 loads only when verifiers register

    return [NoVerifier(), SmtVerifier()]
