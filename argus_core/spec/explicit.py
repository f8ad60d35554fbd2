"""The reference's specification bound to an explicit-level kernel (issue #19).

An explicit-level kernel (`argus_core.ir.explicit`) moves 2-D blocks of 2-D tensors: TMA
descriptors and row-major pointers over each tensor's rows merged into one axis
(attention's q [B, H, S, D] is read as [B * H * S, D]). Its family binds the reference's
`Spec` to it: the spec over those 2-D views (`views.spec_over_views`), each dim symbol of
the reference as an expression over the kernel's own symbols (attention's `q_1` is the
kernel's `H`; a dim the kernel never names, the batch, becomes a free shape symbol), and
the facts of its launch the kernel relies on (the grid, the divisibility it documents).
`attach` puts it on the kernel as ghost data (erased by the lowering, like a tag); the
SMT verifier's `explicit_spec` module proves, for every element each stored tile holds,
that every input element its MMAs read is one the spec says it depends on.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from argus_core.ir.expr import Expr, IntLike
from argus_core.spec.model import Spec

GHOST_KEY = "spec"  # the kernel's meta entry holding its `ExplicitSpec`


@dataclass(frozen=True)
class ExplicitSpec:
    """`spec` over the kernel's 2-D tensor views (`views`: tensor -> "2d" or "1d");
    `dims`: each of the reference's dim symbols (by name) as a kernel expression;
    `assume`: launch facts over kernel symbols (predicates); `source`: where it came from."""

    spec: Spec
    dims: dict[str, IntLike]
    views: dict[str, str]
    assume: tuple[Expr, ...] = ()
    source: str = ""


def attach(kernel: Any, spec: ExplicitSpec | None) -> Any:
    """`kernel` with `spec` as ghost data (a copy; None: the kernel itself)."""
    if spec is None:
        return kernel
    return replace(kernel, meta={**kernel.meta, GHOST_KEY: spec})


def attached(kernel: Any) -> ExplicitSpec | None:
    """The ghost spec `attach` put on `kernel`, if any."""
    return (getattr(kernel, "meta", None) or {}).get(GHOST_KEY)


def over_views(spec: Spec, views: dict[str, str]) -> Spec:
    """`spec` over the 2-D (or 1-D) views the kernel's descriptors and pointers take."""
    from argus_core.spec.views import spec_over_views

    return spec_over_views(spec, views)
