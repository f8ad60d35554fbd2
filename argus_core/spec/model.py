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
        """The spec over the views the front end launches tensors through (`harness._view`):
        each view merges groups of consecutive dims into one (`view_groups`: "2d" the
        leading dims into rows, "1d" all, "rows:K" the leading and the last K, "mid:D" the
        dims before D and those after it). An output's merged coordinates become one; a
        read must index a merged group by exactly the output's merged coordinates (in
        order), by one coordinate (the rest 0: dims of 1), or by distinct summed variables
        of one kind (merged into one, of the product extent), else ValueError (the spec
        cannot be written over those views)."""
        views = {k: v for k, v in views.items() if v}
        bad = sorted({v for v in views.values() if not _is_merge_view(v)})
        if bad:
            raise ValueError(
                f"views {bad} are not supported; supported: '1d', '2d', 'rows:K', 'mid:D'"
            )
        dims = dict(self.dims)
        for t, v in views.items():
            if t in dims:
                ds = dims[t]
                gs = view_groups(v, len(ds))
                if gs is None:
                    raise ValueError(f"view {v!r} of the {len(ds)}-d {t}")
                dims[t] = tuple(_prod([ds[d] for d in g]) for g in gs)
        outs: dict[str, OutputSpec] = {}
        for name, o in self.outputs.items():
            outs[name] = _output_over_views(name, o, views)
        return Spec(outs, dims, dict(self.names))


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


def _is_merge_view(view: str) -> bool:
    name, _, arg = view.partition(":")
    return view in ("2d", "1d") or (name in ("rows", "mid") and arg.isdigit())


def _prod(xs: list[IntLike]) -> IntLike:
    out: IntLike = 1
    for x in xs:
        out = x if (isinstance(out, int) and out == 1) else out * x
    return out


def _output_over_views(name: str, o: OutputSpec, views: dict[str, str]) -> OutputSpec:
    n = len(o.shape)
    if n == 0:  # a 0-d output seen as one element
        mb: dict[tuple[Sym, ...], Bound] = {}
        reads = [_read_over_view(r, views, {}, {}, o.bounds, mb) for r in o.reads]
        bounds = _merged_bounds(o, reads, mb)
        return OutputSpec(name, (1,) if name in views else (), reads, bounds, o.values)
    gs = view_groups(views[name], n) if name in views else [[d] for d in range(n)]
    if gs is None:
        raise ValueError(f"view {views[name]!r} of the {n}-d output {name}")
    ren: dict[Sym, IntLike] = {}  # an output coordinate alone in its group -> the new one
    groups: dict[tuple[Sym, ...], Sym] = {}  # merged coordinates -> the new one
    shape: list[IntLike] = []
    for j, g in enumerate(gs):
        big = [d for d in g if not _is_one(o.shape[d])]
        for d in g:
            if d not in big:
                ren[out_sym(d)] = 0  # a dim of 1 (keepdim): coordinate 0
        if len(big) == 1:
            ren[out_sym(big[0])] = out_sym(j)
        elif len(big) > 1:
            groups[tuple(out_sym(d) for d in big)] = out_sym(j)
        shape.append(_prod([o.shape[d] for d in g]))
    merged_bounds: dict[tuple[Sym, ...], Bound] = {}
    reads = [_read_over_view(r, views, ren, groups, o.bounds, merged_bounds) for r in o.reads]
    bounds = _merged_bounds(o, reads, merged_bounds)
    return OutputSpec(name, tuple(shape), reads, bounds, o.values)


def _merged_bounds(
    o: OutputSpec, reads: list[Read], merged: dict[tuple[Sym, ...], Bound] | None = None
) -> dict[Sym, Bound]:
    bounds = dict(o.bounds)
    for b in (merged or {}).values():
        bounds[b.sym] = b
    used: set[Sym] = set()
    for r in reads:
        used |= r.bound_syms(bounds)
    for old in {s for k in (merged or {}) for s in k}:
        if old in used:
            raise ValueError(
                f"{o.name}: summed index {old.name} is merged by one view and kept apart by "
                "another read"
            )
    return {s: b for s, b in bounds.items() if s in used}


def _read_over_view(
    r: Read,
    views: dict[str, str],
    ren: dict[Sym, IntLike],
    groups: dict[tuple[Sym, ...], Sym],
    bounds: dict[Sym, Bound],
    merged_bounds: dict[tuple[Sym, ...], Bound],
) -> Read:
    merged_out = {s for k in groups for s in k}

    def plain(e: IntLike) -> IntLike:
        if isinstance(e, Expr) and e.symbols() & merged_out:
            raise ValueError(f"{r.text()} reads merged output coordinates directly")
        return _sub(e, ren)

    if r.tensor not in views:
        return Read(r.tensor, tuple(plain(e) for e in r.index), guard_of_sub(r.guard, plain))
    k = len(r.index)
    if k == 0:  # a 0-d tensor seen as one element
        n_coords = len(view_groups(views[r.tensor], 0) or [[]])
        return Read(r.tensor, (0,) * n_coords, guard_of_sub(r.guard, plain))
    gs = view_groups(views[r.tensor], k)
    if gs is None:
        raise ValueError(f"{r.text()}: view {views[r.tensor]!r} of a {k}-d tensor")
    index: list[IntLike] = []
    # an output coordinate of a dim of 1 is 0 (`ren`): a read by it indexes 0 there
    zero = {s: 0 for s, v in ren.items() if isinstance(v, int) and v == 0}
    for g in gs:
        at = [_sub(r.index[d], zero) for d in g]
        es = [e for e in at if not (isinstance(e, int) and e == 0)]
        if not es:
            index.append(0)
        elif len(es) == 1:
            index.append(plain(es[0]))
        elif tuple(es) in groups:
            index.append(groups[tuple(es)])
        elif all(isinstance(e, Sym) and e in bounds for e in es) and len(set(es)) == len(es):
            key = tuple(es)  # type: ignore[arg-type]
            kinds = {bounds[e].kind for e in key}
            if len(kinds) != 1:
                raise ValueError(f"{r.text()}: its view merges contracted and reduced indices")
            if key not in merged_bounds:
                sym = Sym("_".join(e.name for e in key), "spec")
                ext = _prod([bounds[e].extent for e in key])
                merged_bounds[key] = Bound(sym, kinds.pop(), ext, bounds[key[0]].op)
            if r.guard is not None and r.guard.symbols() & set(key):
                raise ValueError(f"{r.text()}: its view merges indices its guard speaks of")
            index.append(merged_bounds[key].sym)
        else:
            raise ValueError(
                f"{r.text()}: its {views[r.tensor]} view merges coordinates "
                f"{', '.join(to_source(e) for e in es)}, neither the output's merged ones nor "
                "summed indices"
            )
    return Read(r.tensor, tuple(index), guard_of_sub(r.guard, plain))


def guard_of_sub(g: Expr | None, f: Any) -> Expr | None:
    return None if g is None else f(g)


def _is_one(e: IntLike) -> bool:
    return isinstance(e, int) and e == 1


def _sub(e, m):
    return e.subs(m) if isinstance(e, Expr) else e
