"""The specification's values: reads of input elements, bound variables, per output."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from argus_core.ir.expr import Expr, IntLike, Sym, to_source


def out_sym(d: int) -> Sym:
    """The output coordinate along dim `d` (`o0`, `o1`, ...), shared by every spec."""
    return Sym(f"o{d}", "spec")


def value_sym() -> Sym:
    """The value of an output element (`v`), which an index-valued output's `values`
    predicate speaks of."""
    return Sym("v", "spec")


@dataclass(frozen=True)
class Bound:
    """A bound variable of a read: `kind` "contract" (summed against another operand, a
    matmul's k) or "reduce" (a row sum/max/softmax's column), ranging over [0, extent)."""

    sym: Sym
    kind: str
    extent: IntLike
    op: str = ""  # the graph node that introduced it


@dataclass(frozen=True)
class Read:
    """Input `tensor` read at `index` (one expression per dim, over the output coordinates
    and bound variables), only where `guard` holds (None: always; a causal mask's
    `k1 <= o2 + (k_2 - q_2)`)."""

    tensor: str
    index: tuple[IntLike, ...]
    guard: Expr | None = None

    def text(self) -> str:
        g = f" if {to_source(self.guard)}" if self.guard is not None else ""
        return f"{self.tensor}[{', '.join(to_source(i) for i in self.index)}]{g}"

    def key(self) -> str:
        return self.text()

    def bound_syms(self, bounds: dict[Sym, Bound]) -> set[Sym]:
        out: set[Sym] = set()
        for e in (*self.index, self.guard):
            if isinstance(e, Expr):
                out |= {s for s in e.symbols() if s in bounds}
        return out


@dataclass
class OutputSpec:
    """Output `name` of `shape` (expressions over the inputs' dim symbols): element
    (o0, o1, ...) depends on exactly the elements `reads` name, for every value of the
    bound variables."""

    name: str
    shape: tuple[IntLike, ...]
    reads: list[Read]
    bounds: dict[Sym, Bound] = field(default_factory=dict)
    # an index-valued output (positions, not data: MoE's sorted_ids): the values its
    # elements may hold, a predicate over `value_sym()` (`v == SLOTS | (0 <= v < SLOTS)`);
    # None: any value (a data output's value is arithmetic, left to the correctness check)
    values: Expr | None = None

    def reads_of(self, tensor: str) -> list[Read]:
        return [r for r in self.reads if r.tensor == tensor]

    def text(self) -> str:
        out = ", ".join(f"o{d}" for d in range(len(self.shape)))
        parts = []
        for r in self.reads:
            bs = sorted(r.bound_syms(self.bounds), key=lambda s: s.name)
            where = "".join(
                f" for {b.name} < {to_source(self.bounds[b].extent)} ({self.bounds[b].kind})"
                for b in bs
            )
            parts.append(r.text() + where)
        vals = f" with values {to_source(self.values)}" if self.values is not None else ""
        return f"{self.name}[{out}] <- " + ("; ".join(parts) or "no input element") + vals


@dataclass
class Spec:
    """Per output, its `OutputSpec`; `dims` names every input's dim symbols."""

    outputs: dict[str, OutputSpec]
    dims: dict[str, tuple[IntLike, ...]]
    # the kernel tensor(s) each spec tensor goes by, where a family knows them (the front
    # end binds graph inputs and parameters to kernel tensors); synthesis's default names
    names: dict[str, Any] = field(default_factory=dict)
    # the module's parameters read (a conv's `conv.weight`): their dims as the reads use
    # them (symbols `<name>_<d>`, 1 for a dim of 1) and those symbols' sizes (a parameter's
    # shape is the module's: the kernel is specialized to it), which synthesis substitutes
    params: dict[str, tuple[IntLike, ...]] = field(default_factory=dict)
    sizes: dict[Sym, int] = field(default_factory=dict)
    # the tensors the spec is written over a view of (`views.spec_over_views`): each one's dims
    # before the view (inputs, parameters, outputs), and the view
    base: dict[str, tuple[IntLike, ...]] = field(default_factory=dict)
    views: dict[str, str] = field(default_factory=dict)

    def text(self) -> str:
        return "\n".join(o.text() for o in self.outputs.values())


def view_groups(view: str, rank: int) -> list[list[int]] | None:
    """The consecutive dims of a rank-`rank` tensor each coordinate of `view` merges (an
    empty group: a coordinate of extent 1); None for a view that is not such a merge."""
    name, _, arg = view.partition(":")
    if view in ("2d", "rows:1"):
        return [list(range(rank - 1)), [rank - 1]] if rank else [[], []]
    if view == "1d":
        return [list(range(rank))]
    if name == "rows" and arg.isdigit() and 0 < int(arg) <= rank:
        k = int(arg)
        return [list(range(rank - k)), list(range(rank - k, rank))]
    if name == "rows" and arg.isdigit() and rank == 0:
        return [[], []]
    if name == "mid" and arg.isdigit() and 0 < int(arg) < rank - 1:
        d = int(arg)
        return [list(range(d)), [d], list(range(d + 1, rank))]
    return None
