"""A spec written over the views a kernel is launched on (`harness._view`), as index maps.

A view of a rank-n tensor is a reshape followed by a permutation: the reshape's
coordinates (*pieces*) each merge a run of consecutive dims into one ("merge", dims: an
empty run is a coordinate of extent 1) or are one half of a dim split in two
("split", d, G, part: dim d of extent D seen as (G, D / G), part 0 the outer coordinate,
part 1 the inner one, d = outer * (D / G) + inner); the view's coordinate j is piece
`perm[j]`. `view_layout` gives the layout of every view name the
front end launches through: the merges "2d", "1d", "rows:K", "mid:D" (`view_groups`) and
the channel-grouped views "gns:G" ([N, C, *S] as [G, C/G, N, S]), "ngsc:G" ([N, G, S, C/G]),
"w_conv:G" ([OC, C/G, *k] as [taps, G, C/G, OC/G]), "w_convT:G" ([C, OC/G, *k] as
[taps, G, C/G, OC/G]), "go:G" ([C] as [G, C/G]), "n1s" ([N, 1, S]) and "w_dw" ([C, 1, *k]
as [taps, C]).

`spec_over_views(spec, views)` rewrites a spec over those coordinates:

- a split dim whose extent is a shape symbol D gets a new symbol F = `D_overG` for its
  inner extent; every `D // G` of the spec becomes F and every other D becomes G * F (the
  view requires G to divide D; a dim of concrete extent is divided out; one group,
  G = 1, keeps D: its outer coordinate is 0 and any entry is the inner one);
- an output's merged coordinates become one (as before); an output's split coordinate o
  becomes the pair (q_outer, q_inner) of the view: `o // F` reads q_outer, `o % F`
  q_inner, any other o `q_outer * F + q_inner`;
- a read through a view indexes a merged run as before (as the merge-only rewrite did), and a split
  dim by an entry e that decomposes as e = A * F + B with B below F (a summed variable of
  extent F, `x % F`, 0, a number), or is the output's coordinate split the same way: the
  view's two entries are (A, B) over the new coordinates; else ValueError (the spec cannot
  be written over that view).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from argus_core.ir.expr import (
    BinOp,
    BoolOp,
    Call,
    Cmp,
    Const,
    Expr,
    IntLike,
    Select,
    Sym,
    as_expr,
    binop,
    call,
    to_source,
)
from argus_core.spec.model import Bound, OutputSpec, Read, Spec, out_sym, view_groups

Piece = tuple[Any, ...]  # ("merge", (dims...)) | ("split", dim, G, part)


@dataclass(frozen=True)
class Layout:
    """A view's reshape pieces and the permutation of them (view coordinate j is piece
    `perm[j]`)."""

    pieces: tuple[Piece, ...]
    perm: tuple[int, ...]

    def source(self, coord: tuple[int, ...], shape: tuple[int, ...]) -> tuple[int, ...]:
        """The element of a tensor of concrete `shape` at view coordinate `coord` (the
        index map the view is; merged runs unravel row-major)."""
        at = [0] * len(self.pieces)
        for j, k in enumerate(self.perm):
            at[k] = coord[j]
        out = [0] * len(shape)
        for p, c in zip(self.pieces, at):
            if p[0] == "merge":
                for d in reversed(p[1]):
                    c, out[d] = divmod(c, shape[d])
            elif p[3] == 0:
                out[p[1]] += c * (shape[p[1]] // p[2])
            else:
                out[p[1]] += c
        return tuple(out)


def view_layout(view: str, rank: int) -> Layout | None:
    """The layout of view `view` of a rank-`rank` tensor; None where it has none."""
    gs = view_groups(view, rank)
    if gs is not None:
        return Layout(tuple(("merge", tuple(g)) for g in gs), tuple(range(len(gs))))
    name, _, arg = view.partition(":")
    g = int(arg) if arg.isdigit() and int(arg) > 0 else 0

    def rest(lo: int) -> Piece:
        return ("merge", tuple(range(lo, rank)))

    if name in ("gns", "ngsc") and g and rank >= 2:  # [N, G, C/G, S]
        pieces = (("merge", (0,)), ("split", 1, g, 0), ("split", 1, g, 1), rest(2))
        return Layout(pieces, (1, 2, 0, 3) if name == "gns" else (0, 1, 3, 2))
    if name in ("w_conv", "w_convT") and g and rank >= 2:  # [G, dim0 / G, dim1, taps]
        pieces = (("split", 0, g, 0), ("split", 0, g, 1), ("merge", (1,)), rest(2))
        return Layout(pieces, (3, 0, 2, 1) if name == "w_conv" else (3, 0, 1, 2))
    if name == "go" and g and rank >= 1:  # a per-channel vector, [C] or [C, 1, ...]
        # (`reshape(G, -1)`: a dim after the first is of extent 1, in no piece: index 0)
        return Layout((("split", 0, g, 0), ("split", 0, g, 1)), (0, 1))
    if view == "n1s" and rank >= 1:
        return Layout((("merge", (0,)), ("merge", ()), rest(1)), (0, 1, 2))
    if view == "w_dw" and rank >= 1:
        return Layout((("merge", (0,)), rest(1)), (1, 0))
    return None


# the views a spec is written over; a conv's or a pool's input entry mixes an output
# coordinate with a window tap (o * stride - pad + k * dil) inside the merged run of
# spatial dims, which a merge does not decompose: ValueError "(merged positions)"
SUPPORTED = (
    "1d",
    "2d",
    "rows:K",
    "mid:D",
    "gns:G",
    "ngsc:G",
    "go:G",
    "n1s",
    "w_dw",
    "w_conv:G",
    "w_convT:G",
)


def known_view(view: str) -> bool:
    name, _, arg = view.partition(":")
    return view in ("2d", "1d", "n1s", "w_dw") or (
        name in ("rows", "mid", "gns", "ngsc", "go", "w_conv", "w_convT") and arg.isdigit()
    )


# ----------------------------------------------------------------- expressions


def rewrite(e: IntLike, f: Callable[[Expr], IntLike | None]) -> IntLike:
    """`e` with every node n for which f(n) is not None replaced by f(n) (top-down; a
    replaced node's children are not visited), constants folded."""
    if not isinstance(e, Expr):
        return e
    r = f(e)
    if r is not None:
        return r
    if isinstance(e, BinOp):
        return binop(e.op, rewrite(e.a, f), rewrite(e.b, f))
    if isinstance(e, Call):
        return call(e.fn, *[rewrite(a, f) for a in e.args])
    if isinstance(e, Cmp):
        return Cmp(e.op, as_expr(rewrite(e.a, f)), as_expr(rewrite(e.b, f))).map(lambda s: s)
    if isinstance(e, BoolOp):
        return BoolOp(e.op, tuple(as_expr(rewrite(a, f)) for a in e.args))
    if isinstance(e, Select):
        return Select(*(as_expr(rewrite(x, f)) for x in (e.cond, e.a, e.b)))
    return e


def same(a: IntLike, b: IntLike) -> bool:
    """Structural equality of two index expressions (numbers included)."""
    a = a.value if isinstance(a, Const) else a
    b = b.value if isinstance(b, Const) else b
    if isinstance(a, int) or isinstance(b, int):
        return isinstance(a, int) and isinstance(b, int) and a == b
    return bool(a == b)


def _prod(xs: list[IntLike]) -> IntLike:
    out: IntLike = 1
    for x in xs:
        out = x if (isinstance(out, int) and out == 1) else out * x
    return out


def _is_one(e: IntLike) -> bool:
    return isinstance(e, int) and e == 1


def _sub(e: IntLike, m: dict[Sym, IntLike]) -> IntLike:
    return e.subs(m) if isinstance(e, Expr) else e


# ---------------------------------------------------------------- the spec over views


def spec_over_views(spec: Spec, views: dict[str, str]) -> Spec:
    """`spec` over the coordinates of the views its tensors are launched through (the
    module doc); ValueError naming the view and the read where it cannot be written."""
    views = {k: v for k, v in views.items() if v}
    bad = sorted({v for v in views.values() if not known_view(v)})
    if bad:
        raise ValueError(
            f"views {bad} are not supported; supported: {', '.join(map(repr, SUPPORTED))}"
        )
    shapes = {**spec.params, **spec.dims, **{n: o.shape for n, o in spec.outputs.items()}}
    table: dict[Sym, tuple[int, Sym]] = {}  # a split dim's symbol D -> (G, F = D / G)
    # a parameter's dims last: one the reads index as another tensor's split dim is that
    # dim (`_alias`)
    order = sorted(views.items(), key=lambda tv: tv[0] in spec.params)
    aliases: dict[Sym, IntLike] = {}
    for t, v in order:
        if t not in shapes:
            continue
        lay = view_layout(v, len(shapes[t]))
        if lay is None:
            raise ValueError(f"view {v!r} of the {len(shapes[t])}-d {t}")
        for p in lay.pieces:
            if p[0] != "split" or p[3]:
                continue
            d, g = p[1], p[2]
            ext = shapes[t][d]
            if g == 1:  # (1, D): the dim itself, behind a coordinate of extent 1
                continue
            if isinstance(ext, int):
                if ext % g:
                    raise ValueError(f"view {v!r} splits dim {d} of {t} ({ext}) into {g} groups")
            elif isinstance(ext, Sym):
                if ext not in table and t in spec.params:
                    x = _alias(spec, t, d, g, table)
                    known = _sub(x, dict(spec.sizes)) if x is not None else None
                    if isinstance(known, Const):
                        known = known.value
                    if isinstance(known, int) and ext in spec.sizes and known != spec.sizes[ext]:
                        x = None  # the parameter's size says otherwise: no alias
                    if x is not None:
                        aliases[ext] = x
                        if not (isinstance(x, Sym) and x in table) and _divide(x, g) is None:
                            raise ValueError(
                                f"view {v!r} splits dim {d} of {t}, of extent "
                                f"{to_source(x)}: not divided by {g}"
                            )
                        continue
                if ext in table and table[ext][0] != g:
                    raise ValueError(
                        f"{ext.name} is split into {table[ext][0]} and {g} groups by two views"
                    )
                table.setdefault(ext, (g, Sym(f"{ext.name}_over{g}", ext.kind)))
            elif _divide(ext, g) is None:
                raise ValueError(
                    f"view {v!r} splits dim {d} of {t}, of extent {to_source(ext)}: not a "
                    f"shape symbol, a number or a product the spec divides by {g}"
                )
    sizes = dict(spec.sizes)
    if table or aliases:
        spec = _resplit(spec, table, aliases)
        for s_, (g, inner) in table.items():  # a parameter's inner extent: its size / G
            if s_ in sizes and sizes[s_] % g == 0:
                sizes.setdefault(inner, sizes[s_] // g)
        shapes = {**spec.params, **spec.dims, **{n: o.shape for n, o in spec.outputs.items()}}
    dims = dict(spec.dims)
    for t, v in views.items():
        if t in dims:
            lay = view_layout(v, len(dims[t]))
            assert lay is not None
            ext = _extents(lay, dims[t])
            dims[t] = tuple(ext[k] for k in lay.perm)
    exts = {**spec.params, **shapes}  # a merged run's extents (row-major strides)
    outs = {name: _output(name, o, views, shapes, exts) for name, o in spec.outputs.items()}
    base = {t: exts[t] for t in views if t in exts}
    return Spec(outs, dims, dict(spec.names), dict(spec.params), sizes, base, dict(views))


def _extents(lay: Layout, shape: tuple[IntLike, ...]) -> list[IntLike]:
    """Each piece's extent (pieces order), over the resplit symbols."""
    out: list[IntLike] = []
    for p in lay.pieces:
        if p[0] == "merge":
            out.append(_prod([shape[d] for d in p[1]]))
        else:
            ext, g = shape[p[1]], p[2]
            out.append(g if p[3] == 0 else _inner(ext, g))
    return out


def _inner(ext: IntLike, g: int) -> IntLike:
    """The inner extent of a dim of extent `ext` (after `_resplit`: G * F) split by g."""
    if isinstance(ext, int):
        return ext // g
    q = _divide(ext, g)
    return ext // g if q is None else q


def _divide(ext: IntLike, g: int) -> IntLike | None:
    """`ext / g` where the form of `ext` divides it (a product with a factor the group
    count divides: a grouped transposed conv's output channels `w_1 * G`); else None."""
    if isinstance(ext, int):
        return ext // g if ext % g == 0 else None
    if isinstance(ext, Const):
        return _divide(ext.value, g)
    if isinstance(ext, BinOp) and ext.op == "*":
        for a, b in ((ext.a, ext.b), (ext.b, ext.a)):
            q = _divide(a, g)
            if q is not None:
                return b if _is_one(q) else q * b
    return None


def _alias(spec: Spec, t: str, d: int, g: int, table: dict[Sym, tuple[int, Sym]]) -> IntLike | None:
    """The extent X a parameter's dim d is, split into g groups, where every read of `t`
    says which: indexed as `A * (X // g) + B`, B a summed variable of extent X // g, X
    split into g groups by another view (a grouped transposed conv's weight [C, OC/G, *k]
    read at `g * (C / G) + c`: its dim 0 is the input's channels), or by an output
    coordinate o_k (a conv's bias [OC] read at the output channel: X is the output's dim
    k, `w_1 * G` for a transposed conv). PyTorch requires those dims equal (the module
    would not run otherwise); None where no read says so."""
    found: set[IntLike] = set()
    for o in spec.outputs.values():
        for r in o.reads_of(t):
            e = r.index[d] if d < len(r.index) else None
            hit: IntLike | None = None
            if isinstance(e, Sym) and e.name.startswith("o") and e.name[1:].isdigit():
                k = int(e.name[1:])
                if e == out_sym(k) and k < len(o.shape) and e not in o.bounds:
                    hit = o.shape[k]
            for x, (gx, _) in table.items():
                if gx != g or hit is not None:
                    continue
                a, b = _affine(e, binop("//", x, g)) if isinstance(e, Expr) else (None, 0)
                if a is not None and isinstance(b, Sym) and b in o.bounds:
                    if same(o.bounds[b].extent, binop("//", x, g)):
                        hit = x
                        break
            if hit is None:
                return None
            found.add(as_expr(hit) if isinstance(hit, int) else hit)
    return found.pop() if len(found) == 1 else None


def _resplit(
    spec: Spec, table: dict[Sym, tuple[int, Sym]], aliases: dict[Sym, IntLike] | None = None
) -> Spec:
    """`spec` with each split symbol D of `table` written G * F (`D // G` as F), and each
    parameter dim symbol of `aliases` written as the extent it is (`_alias`)."""
    aliases = aliases or {}

    def f(e: Expr) -> IntLike | None:
        if isinstance(e, Sym) and e in aliases:
            return rewrite(aliases[e], f)
        if (
            isinstance(e, BinOp)
            and e.op == "//"
            and isinstance(e.a, Sym)
            and e.a in table
            and same(e.b, table[e.a][0])
        ):
            return table[e.a][1]
        if isinstance(e, Sym) and e in table:
            g, inner = table[e]
            return g * inner
        return None

    def rw(e: Any) -> Any:
        return rewrite(e, f) if isinstance(e, Expr) else e

    def read(r: Read) -> Read:
        return Read(r.tensor, tuple(rw(i) for i in r.index), rw(r.guard))

    outs = {}
    for n, o in spec.outputs.items():
        bounds = {s: Bound(b.sym, b.kind, rw(b.extent), b.op) for s, b in o.bounds.items()}
        outs[n] = OutputSpec(
            n, tuple(rw(x) for x in o.shape), [read(r) for r in o.reads], bounds, rw(o.values)
        )
    dims = {t: tuple(rw(x) for x in ds) for t, ds in spec.dims.items()}
    params = {t: tuple(rw(x) for x in ds) for t, ds in spec.params.items()}
    return Spec(outs, dims, dict(spec.names), params, dict(spec.sizes))


@dataclass
class _Coords:
    """How an output's old coordinates read over its view's: `ren` (alone in a merged run,
    or 0 for a dim of 1), `groups` (merged runs), `splits` (o -> (outer, inner, F)),
    `unravel` (a coordinate of a merged run as the merged coordinate unravelled row-major:
    o2 -> q // O3, o3 -> q % O3), `apart` (summed variables a read uses outside a run of
    bare variables: a window's taps, which a merge keeps row-major, not as one variable)."""

    ren: dict[Sym, IntLike]
    groups: dict[tuple[Sym, ...], Sym]
    splits: dict[Sym, tuple[IntLike, IntLike, IntLike]]
    read: str = ""
    unravel: dict[Sym, IntLike] = field(default_factory=dict)
    apart: set[Sym] = field(default_factory=set)

    def new(self, e: IntLike) -> IntLike:
        """Expression `e` over the old coordinates, over the new ones."""
        merged = {s for k in self.groups for s in k}
        splits, ren = self.splits, self.ren

        def f(x: Expr) -> IntLike | None:
            if (
                isinstance(x, BinOp)
                and x.op in ("//", "%")
                and isinstance(x.a, Sym)
                and x.a in splits
                and same(x.b, splits[x.a][2])
            ):
                outer, inner, _ = splits[x.a]
                return outer if x.op == "//" else inner
            if isinstance(x, Sym):
                if x in self.unravel:
                    return self.unravel[x]
                if x in merged:
                    raise ValueError(
                        f"{self.read} reads output coordinate {x.name} apart from the ones "
                        "its view merges it with (merged positions)"
                    )
                if x in splits:
                    outer, inner, ext = splits[x]
                    return outer * ext + inner
                if x in ren:
                    return ren[x]
            return None

        return rewrite(e, f)


def _output(
    name: str,
    o: OutputSpec,
    views: dict[str, str],
    shapes: dict[str, tuple[IntLike, ...]],
    exts: dict[str, tuple[IntLike, ...]],
) -> OutputSpec:
    n = len(o.shape)
    if n == 0:  # a 0-d output seen as one element
        mb: dict[tuple[Sym, ...], Bound] = {}
        cs = _Coords({}, {}, {}, apart=_apart(o))
        reads = [_read(r, views, cs, o.bounds, mb, shapes, exts) for r in o.reads]
        bounds = _merged_bounds(o, reads, mb)
        return OutputSpec(name, (1,) if name in views else (), reads, bounds, o.values)
    lay = view_layout(views[name], n) if name in views else None
    if lay is None and name in views:
        raise ValueError(f"view {views[name]!r} of the {n}-d output {name}")
    if lay is None:
        lay = Layout(tuple(("merge", (d,)) for d in range(n)), tuple(range(n)))
    ext = _extents(lay, o.shape)
    cs = _Coords({}, {}, {}, apart=_apart(o))
    halves: dict[int, list[Any]] = {}
    shape: list[IntLike] = []
    for j, k in enumerate(lay.perm):
        p = lay.pieces[k]
        shape.append(ext[k])
        if p[0] == "split":
            halves.setdefault(p[1], [0, 0, 1])[p[3]] = 0 if _is_one(ext[k]) else out_sym(j)
            if p[3] == 1:
                halves[p[1]][2] = ext[k]
            continue
        big = [d for d in p[1] if not _is_one(o.shape[d])]
        for d in p[1]:
            if d not in big:
                cs.ren[out_sym(d)] = 0  # a dim of 1 (keepdim): coordinate 0
        if len(big) == 1:
            cs.ren[out_sym(big[0])] = out_sym(j)
        elif len(big) > 1:
            cs.groups[tuple(out_sym(d) for d in big)] = out_sym(j)
            for i, d in enumerate(big):  # o_d = (q // (extents after d)) % extent of d
                inner = _prod([o.shape[x] for x in big[i + 1 :]])
                at: IntLike = out_sym(j) if _is_one(inner) else out_sym(j) // inner
                cs.unravel[out_sym(d)] = at % o.shape[d] if i else at
    cs.splits = {out_sym(d): (h[0], h[1], h[2]) for d, h in halves.items()}
    merged_bounds: dict[tuple[Sym, ...], Bound] = {}
    reads = [_read(r, views, cs, o.bounds, merged_bounds, shapes, exts) for r in o.reads]
    bounds = _merged_bounds(o, reads, merged_bounds)
    return OutputSpec(name, tuple(shape), reads, bounds, o.values)


def _apart(o: OutputSpec) -> set[Sym]:
    """The summed variables some read of `o` uses in its guard or inside an expression (a
    window's tap `o2 * 2 - 1 + k1`): a view merging them writes them row-major."""
    out: set[Sym] = set()
    for r in o.reads:
        if r.guard is not None:
            out |= {s for s in r.guard.symbols() if s in o.bounds}
        for e in r.index:
            if isinstance(e, Expr) and not isinstance(e, Sym):
                out |= {s for s in e.symbols() if s in o.bounds}
    return out


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


def _read(
    r: Read,
    views: dict[str, str],
    cs: _Coords,
    bounds: dict[Sym, Bound],
    merged_bounds: dict[tuple[Sym, ...], Bound],
    shapes: dict[str, tuple[IntLike, ...]],
    exts: dict[str, tuple[IntLike, ...]],
) -> Read:
    cs.read = r.text()
    guard = None if r.guard is None else cs.new(r.guard)
    if r.tensor not in views:
        return Read(r.tensor, tuple(cs.new(e) for e in r.index), guard)  # type: ignore[arg-type]
    view = views[r.tensor]
    k = len(r.index)
    if k == 0:  # a 0-d tensor seen as one element
        lay0 = view_layout(view, 0)
        return Read(r.tensor, (0,) * (len(lay0.pieces) if lay0 else 1), guard)  # type: ignore[arg-type]
    lay = view_layout(view, k)
    if lay is None:
        raise ValueError(f"{r.text()}: view {view!r} of a {k}-d tensor")
    # an output coordinate of a dim of 1 is 0 (`ren`): a read by it indexes 0 there
    zero = {s: 0 for s, v in cs.ren.items() if isinstance(v, int) and v == 0}
    covered = {d for p in lay.pieces for d in (p[1] if p[0] == "merge" else (p[1],))}
    for d in sorted(set(range(k)) - covered):  # a dim of 1 the view drops: read at 0
        e = _sub(r.index[d], zero)
        ext = exts.get(r.tensor)
        if not (isinstance(e, int) and e == 0) or (ext is not None and not _is_one(ext[d])):
            raise ValueError(f"{r.text()}: its {view} view drops dim {d}, not one of extent 1")
    per_piece: list[IntLike] = []
    for p in lay.pieces:
        if p[0] == "merge":
            per_piece.append(
                _merged_entry(r, view, p[1], zero, cs, bounds, merged_bounds, exts.get(r.tensor))
            )
        else:
            d, g, part = p[1], p[2], p[3]
            ext = shapes[r.tensor][d] if r.tensor in shapes else (1 if g == 1 else None)
            if ext is None:
                raise ValueError(f"{r.text()}: its {view} view splits dim {d} of unknown extent")
            per_piece.append(_split_entry(r, view, d, g, _inner(ext, g), zero, cs, bounds)[part])
    return Read(r.tensor, tuple(per_piece[k_] for k_ in lay.perm), guard)  # type: ignore[arg-type]


def _merged_entry(
    r: Read,
    view: str,
    g: tuple[int, ...],
    zero: dict[Sym, IntLike],
    cs: _Coords,
    bounds: dict[Sym, Bound],
    merged_bounds: dict[tuple[Sym, ...], Bound],
    ext: tuple[IntLike, ...] | None,
) -> IntLike:
    """The view's entry for the run of dims `g` merged into one: the output's merged
    coordinates, one coordinate (the rest 0: dims of 1), distinct summed variables of one
    kind (merged into one of the product extent), else the entries combined row-major over
    the tensor's extents, the output's merged coordinates unravelled (a window's input
    position `(o2 // O3 * 2 - 1 + k1) * I3 + o2 % O3 - 2 + k2 * 2`: exact wherever the read
    is made, each entry inside its dim, which its guard says)."""
    at = [_sub(r.index[d], zero) for d in g]
    es = [e for e in at if not (isinstance(e, int) and e == 0)]
    if not es:
        return 0
    if len(es) == 1 and (ext is None or _unit_after(at, g, ext)):
        return cs.new(es[0])
    if tuple(es) in cs.groups:
        return cs.groups[tuple(es)]  # type: ignore[index]
    bare = all(isinstance(e, Sym) and e in bounds for e in es) and len(set(es)) == len(es)
    if bare and not (set(es) & cs.apart):
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
        return merged_bounds[key].sym
    if ext is None:
        raise ValueError(
            f"{r.text()}: its {view} view merges coordinates "
            f"{', '.join(to_source(e) for e in es)}, neither the output's merged ones nor "
            "summed indices, of a tensor of unknown extents (merged positions)"
        )
    return row_major([cs.new(e) for e in at], [ext[d] for d in g])


def _unit_after(at: list[IntLike], g: tuple[int, ...], ext: tuple[IntLike, ...]) -> bool:
    """Whether the one nonzero entry of `at` is the run's row-major position: every dim
    after it of extent 1."""
    k = max(i for i, e in enumerate(at) if not (isinstance(e, int) and e == 0))
    return all(_is_one(ext[d]) for d in g[k + 1 :])


def row_major(entries: list[IntLike], extents: list[IntLike]) -> IntLike:
    """sum_j entries[j] * prod(extents[j + 1:]): the position of `entries` in a row-major
    run of dims of `extents` (zero entries left out)."""
    out: IntLike = 0
    for j, e in enumerate(entries):
        if isinstance(e, int) and e == 0:
            continue
        stride = _prod(list(extents[j + 1 :]))
        term = e if _is_one(stride) else e * stride
        out = term if (isinstance(out, int) and out == 0) else out + term
    return out


def _split_entry(
    r: Read,
    view: str,
    d: int,
    g: int,
    inner: IntLike,
    zero: dict[Sym, IntLike],
    cs: _Coords,
    bounds: dict[Sym, Bound],
) -> tuple[IntLike, IntLike]:
    """(outer, inner): the view's two entries for dim d of the read split into (g, inner)."""
    e = _sub(r.index[d], zero)
    if g == 1:  # one group: the outer coordinate is 0, the inner the entry
        return 0, cs.new(e)
    if isinstance(e, Sym) and e in cs.splits and same(cs.splits[e][2], inner):
        return cs.splits[e][0], cs.splits[e][1]
    if isinstance(e, int):
        if e == 0:
            return 0, 0
        if isinstance(inner, int):
            return e // inner, e % inner
    a, b = _affine(e, inner)
    if a is not None and _below(b, inner, bounds):
        return cs.new(a), cs.new(b)
    raise ValueError(
        f"{r.text()}: its {view} view splits dim {d} into ({g}, {to_source(inner)}); entry "
        f"{to_source(e)} is neither the output's coordinate split the same way nor "
        f"A * {to_source(inner)} + B with B below {to_source(inner)}"
    )


def _affine(e: IntLike, f: IntLike) -> tuple[IntLike | None, IntLike]:
    """(A, B) with e == A * f + B read off e's form (A * f + B, B + A * f, A * f); (None, 0)
    where e has none of them."""

    def times(x: IntLike) -> IntLike | None:
        if isinstance(x, BinOp) and x.op == "*":
            if same(x.b, f):
                return x.a
            if same(x.a, f):
                return x.b
        return None

    if isinstance(e, BinOp) and e.op == "+":
        a = times(e.a)
        if a is not None:
            return a, e.b
        a = times(e.b)
        if a is not None:
            return a, e.a
    a = times(e)
    if a is not None:
        return a, 0
    return None, 0


def _below(b: IntLike, f: IntLike, bounds: dict[Sym, Bound]) -> bool:
    """Whether b lies in [0, f) by its form: a number there, a summed variable of extent f,
    a remainder by f."""
    b = b.value if isinstance(b, Const) else b
    if isinstance(b, int):
        return b == 0 or (isinstance(f, int) and 0 <= b < f)
    if isinstance(b, Sym) and b in bounds:
        return same(bounds[b].extent, f)
    return isinstance(b, BinOp) and b.op == "%" and same(b.b, f)
