"""The specification in a compact, readable form for the LLM's prompt and repair requests.

One line per output and reference mode: which input elements output element (o0, o1, ...)
reads, the bound variables it sums over (contracted, as a matmul's k) or reduces over (a
row's max or sum), and the masks that guard a read; shape symbols are spelled
`t.shape[d]` (the spec's `a_1` is `a.shape[1]`).
"""

from __future__ import annotations

from typing import Any

from argus_core.ir.expr import Expr, IntLike, Sym, to_source
from argus_core.spec.model import OutputSpec, Spec


def _readable(spec: Spec) -> dict[Sym, IntLike]:
    out: dict[Sym, IntLike] = {}
    for t, dims in spec.dims.items():
        for d, s in enumerate(dims):
            if isinstance(s, Sym) and s.name == f"{t}_{d}":
                out[s] = Sym(f"{t}.shape[{d}]")
    return out


def _src(e: IntLike | None, m: dict[Sym, IntLike]) -> str:
    if e is None:
        return ""
    return to_source(e.subs(m) if isinstance(e, Expr) else e)


def output_line(o: OutputSpec, m: dict[Sym, IntLike]) -> str:
    """`o[o0, o1] reads a[o0, k0]; b[k0, o1]; summed over k0 < a.shape[1]`."""
    reads = []
    for r in o.reads:
        g = f" where {_src(r.guard, m)}" if r.guard is not None else ""
        reads.append(f"{r.tensor}[{', '.join(_src(i, m) for i in r.index)}]{g}")
    out = f"{o.name}[{', '.join(f'o{d}' for d in range(len(o.shape)))}]"
    line = f"{out} reads {'; '.join(reads) if reads else 'nothing'}"
    for kind, word in (("contract", "summed over"), ("reduce", "reduced over")):
        bs = sorted((b for b in o.bounds.values() if b.kind == kind), key=lambda b: b.sym.name)
        used = set().union(*[r.bound_syms(o.bounds) for r in o.reads]) if o.reads else set()
        bs = [b for b in bs if b.sym in used]
        if bs:
            line += f"; {word} " + ", ".join(f"{b.sym.name} < {_src(b.extent, m)}" for b in bs)
    return line


def spec_lines(spec: Spec, mode: dict[str, int] | None = None) -> list[str]:
    """One line per output of `spec` (prefixed by the mode's scalars where there are any)."""
    m = _readable(spec)
    pre = f"[{', '.join(f'{k}={v}' for k, v in mode.items())}] " if mode else ""
    return [pre + output_line(o, m) for o in spec.outputs.values()]


def family_spec_lines(family: Any, entries: list[str] | None = None) -> list[str]:
    """The spec lines of every entry of `family` that has a reference spec
    (`reference_specs`), each entry's lines headed by its name; [] when none has one. A
    spec that cannot be derived is left out (the prompt says nothing rather than guess)."""
    lines: list[str] = []
    names = entries if entries is not None else list(getattr(family, "entries", ()) or ())
    for entry in names or [getattr(family, "entry", "")]:
        try:
            modes = family.reference_specs(entry)
        except Exception:  # no spec rule for this reference: nothing to show
            continue
        body = [x for values, spec in modes for x in spec_lines(spec, values)]
        if body:
            lines.append(f"{entry}:")
            lines += [f"  {x}" for x in body]
    return lines


__all__ = ["family_spec_lines", "output_line", "spec_lines"]
