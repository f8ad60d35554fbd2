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

    def text(self) -> str:
        return "\n".join(o.text() for o in self.outputs.values())

    def with_row_views(self, views: dict[str, str]) -> Spec:
        """The spec over the row views the front end launches tensors through: "2d" is a
        rank-n tensor seen as [rows, last dim] (the leading dims merged), "1d" as one dim.
        An output's merged coordinates become one (`o0`); a read through a view must index
        its merged dims by exactly the output's merged coordinates, else ValueError (the
        spec cannot be written over those views)."""
        views = {k: ("2d" if v == "rows:1" else v) for k, v in views.items()}  # the same view
        bad = sorted({v for v in views.values() if v not in ("1d", "2d")})
        if bad:
            raise ValueError(f"views {bad} are not supported; supported: '1d', '2d', 'rows:1'")
        outs: dict[str, OutputSpec] = {}
        for name, o in self.outputs.items():
            n = len(o.shape)
            m = min(max({"2d": n - 1, "1d": n}.get(views.get(name, ""), 1), 1), n)
            # a merged dim of size 1 (keepdim) has coordinate 0: merging it is a rename
            ones = {out_sym(i): 0 for i in range(m) if _is_one(o.shape[i])}
            merged = [out_sym(i) for i in range(m) if out_sym(i) not in ones]
            ren: dict[Sym, IntLike] = {out_sym(i): out_sym(i - m + 1) for i in range(m, n)}
            if len(merged) == 1:
                ren[merged[0]] = out_sym(0)
            reads = []
            for r in o.reads:
                r = Read(r.tensor, tuple(_sub(e, ones) for e in r.index), _sub(r.guard, ones))
                k = len(r.index)
                t = {"2d": k - 1, "1d": k}.get(views.get(r.tensor, ""), 0)
                if k == 0 and views.get(r.tensor) == "1d":  # a 0-d tensor as one element
                    reads.append(Read(r.tensor, (0,), r.guard))
                    continue
                lead = [e for e in r.index[:t] if not (isinstance(e, int) and e == 0)]
                if len(merged) > 1 and t:
                    if lead != merged:
                        raise ValueError(
                            f"{r.text()}: its {views[r.tensor]} view merges dims the output "
                            f"{name} does not merge the same way"
                        )
                    index = (out_sym(0), *r.index[t:])
                elif t > 1:
                    if len(lead) > 1:
                        raise ValueError(f"{r.text()}: its view merges {len(lead)} coordinates")
                    index = (lead[0] if lead else 0, *r.index[t:])
                else:
                    index = r.index
                rest = index[1:] if (t and len(merged) > 1) else index
                used = set().union(*[e.symbols() for e in rest if isinstance(e, Expr)])
                if len(merged) > 1 and used & set(merged):
                    raise ValueError(f"{r.text()} reads merged coordinates of {name} directly")
                index = tuple(_sub(e, ren) for e in index)
                reads.append(Read(r.tensor, index, _sub(r.guard, ren)))
            rows: IntLike = 1
            for d in o.shape[:m]:
                rows = rows * d
            shape = (rows, *o.shape[m:]) if n else ((1,) if name in views else ())
            outs[name] = OutputSpec(name, shape, reads, dict(o.bounds), o.values)
        return Spec(outs, self.dims, dict(self.names))


def _is_one(e: IntLike) -> bool:
    return isinstance(e, int) and e == 1


def _sub(e, m):
    return e.subs(m) if isinstance(e, Expr) else e
