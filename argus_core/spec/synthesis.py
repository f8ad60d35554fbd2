"""Invariants written for you: ghost assertions synthesized from a `Spec` onto a kernel's IR.

`synthesize(ir, spec)` walks back from each store of an output the spec describes and gives
every tile axis its *roles*: which output axis it becomes ("out", d), or which `dot`
contracts it / which `reduce` or `scan` folds it. Each load of an input then has, per
coordinate entry, what it walks: an output axis, a contracted/reduced axis, or nothing (a
per-program entry: a batch, a head, an expert). Against the spec's read of that input:

- an entry the spec gives as an expression of the output coordinates (`o1 // G`, `o0`)
  becomes a synthesized `tag` + `assert_tag` on the loaded tile: the entry equals that
  expression at the output element the tile feeds;
- an entry the spec gives as a bound variable must walk a contracted/reduced axis, and
  every read sharing the variable must share the kernel's contraction;
- every read of the spec must be matched by some load (a kernel that never reads `b`, or
  reads `a` where the reference reads `b`, is flagged);
- a contracted variable whose reads are guarded (a mask: causal attention's `j <= i + SKV
  - S`) becomes an `assert_contraction` window on the accumulator, asserted at the output's
  in-bounds elements: each output element sums exactly the coordinates its mask admits.

The synthesized IR is for the verifier only (the kernel that is lowered is the original:
synthesized code is ghost code by construction). Structural mismatches need no solver:
they hold for every output element and are reported symbolically. `check` runs a verifier
on the kernel with the synthesized assertions and turns a failing one into a counterexample
naming the output element, the input element it should have read and the one it read.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Any

from argus_core.ir import (
    Carry,
    Cast,
    Dot,
    Elementwise,
    ExpandDims,
    Expr,
    IntLike,
    KernelIR,
    Let,
    Load,
    LoadScalar,
    Loop,
    Op,
    ProgramPoint,
    Reduce,
    Scan,
    Store,
    Sym,
    Zeros,
    as_expr,
    land,
    lnot,
    to_source,
)
from argus_core.ir.expr import BoolOp, Const
from argus_core.ir.nodes import TileElem, Value, elem_axis, elem_sym
from argus_core.ir.tags import (
    AssertContraction,
    AssertTag,
    AssertTagEq,
    Requires,
    Summand,
    Tag,
)
from argus_core.spec.derive import guard_of
from argus_core.spec.model import OutputSpec, Read, Spec, out_sym

SYNTH_TAG = "synth"
HAND_WRITTEN = (Tag, AssertTag, AssertTagEq, AssertContraction)


def strip_hand_written(ir: KernelIR) -> KernelIR:
    """A copy of `ir` without its hand-written tags and tag assertions (preconditions,
    contracts and the implied assertions of loads, dots and stores stay)."""

    def go(ops: list[Op]) -> list[Op]:
        out = []
        for op in ops:
            if isinstance(op, HAND_WRITTEN):
                continue
            if isinstance(op, Loop):
                op = copy.copy(op)
                object.__setattr__(op, "body", go(op.body))
            out.append(op)
        return out

    return _with_ops(ir, go(ir.ops))


def _with_ops(ir: KernelIR, ops: list[Op]) -> KernelIR:
    new = copy.copy(ir)
    new.ops = ops
    return new


def count_hand_written(ir: KernelIR) -> int:
    return sum(isinstance(op, HAND_WRITTEN) for op in ir.walk())


# ------------------------------------------------------------------------ roles


VIA_RHS = ("via", "rhs")
Role = tuple[str, Any]  # ("out", axis) | ("contract", dot id) | ("reduce", op id) | ("bcast", None)


def _producers(ir: KernelIR) -> dict[int, Any]:
    prod: dict[int, Any] = {}
    for op in ir.walk():
        out = getattr(op, "out", None)
        if out is not None:
            prod[out.id] = op
        if isinstance(op, Loop):
            for c in op.carried:
                prod[c.result.id] = c
                prod[c.arg.id] = c
    return prod


def roles_of(ir: KernelIR, store: Store) -> tuple[dict[int, list[set[Role]]], list[Load]]:
    """Per value feeding `store`, the roles of each of its axes; and the loads it reads."""
    prod = _producers(ir)
    roles: dict[int, list[set[Role]]] = {}
    loads: dict[int, Load] = {}
    scalars: set[Sym] = set()
    visited: set[int] = set()
    stack = [(store.value, [{("out", d)} for d in range(len(store.value.shape))])]
    while stack:
        v, rs = stack.pop()
        cur = roles.setdefault(v.id, [set() for _ in v.shape])
        grew = False
        for a, r in enumerate(rs):
            if not r <= cur[a]:
                cur[a] |= r
                grew = True
        if not grew and v.id in visited:
            continue
        visited.add(v.id)
        op = prod.get(v.id)
        cur = [set(c) for c in cur]
        if isinstance(op, Load):
            loads[v.id] = op
        elif isinstance(op, Cast):
            stack.append((op.x, cur))
        elif isinstance(op, Elementwise):
            for a in op.args:  # scalars (a `load_scalar`'s symbol) it combines
                if isinstance(a, Expr) and not isinstance(a, Value):
                    scalars.update(a.symbols())
            for a in op.operands():
                bc = [
                    {("bcast", None)} if _one(a.shape[d]) and not _one(v.shape[d]) else cur[d]
                    for d in range(len(a.shape))
                ]
                stack.append((a, bc))
        elif isinstance(op, Dot):
            cid = ("contract", id(op))
            stack.append((op.a, [cur[0], {cid}]))
            # ("via", "rhs") marks what reaches a dot as its b operand: the implied
            # assertions pin b's rows and columns, not its fixed entries (head, expert)
            stack.append((op.b, [{cid, VIA_RHS}, cur[1] | {VIA_RHS}]))
            if op.acc is not None:
                stack.append((op.acc, cur))
        elif isinstance(op, Reduce):
            rr = list(cur)
            if len(op.x.shape) == len(v.shape) + 1:
                rr.insert(op.axis, {("reduce", id(op))})
            else:
                rr[op.axis] = rr[op.axis] | {("reduce", id(op))}
            stack.append((op.x, rr))
        elif isinstance(op, Scan):
            rr = list(cur)
            rr[op.axis] = rr[op.axis] | {("reduce", id(op))}
            stack.append((op.x, rr))
        elif isinstance(op, ExpandDims):
            stack.append((op.x, [c for d, c in enumerate(cur) if d != op.axis]))
        elif isinstance(op, Carry):
            stack.append((op.init, cur))
            stack.append((op.yielded, cur))
    scalar_loads = [op for op in ir.walk() if isinstance(op, LoadScalar) and op.sym in scalars]
    return roles, list(loads.values()) + scalar_loads  # type: ignore[return-value]


def _one(e: IntLike) -> bool:
    return isinstance(e, int) and e == 1


def _bound_roles(r: set[Role]) -> set[Role]:
    return {x for x in r if x[0] in ("contract", "reduce")}


# -------------------------------------------------------------------- synthesis


@dataclass
class Synthesized:
    """One synthesized assertion: the load of `tensor` feeding `output` reads, per entry,
    `expected` (over the kernel's program/loop/element symbols)."""

    output: str
    tensor: str
    read: Read
    load: Load
    store: Store
    entries: dict[int, IntLike]  # tensor dim -> expected coordinate
    axis_map: dict[str, str]  # store element symbol -> load element symbol
    summed: set[int] = field(default_factory=set)  # dims that must walk a summed axis
    rows: set[int] = field(default_factory=set)  # dims asserted per row on the dot's product
    op: AssertTag | None = None
    guard: Expr | None = None  # where the read is made, over the load's elements


@dataclass
class Mismatch:
    """A data-flow difference found without a solver (it holds for every element)."""

    output: str
    expected: str
    got: str
    line: int
    text: str

    def as_counterexample(self, file: str) -> dict[str, Any]:
        return {
            "assertion": "synth_dataflow",
            "invariant": f"{self.output} <- {self.expected}",  # the spec's read it pins
            "message": self.text,
            "program_point": {"file": file, "line": self.line, "op": "synth"},
            "output_element": f"{self.output}[every element]",
            "should_read": self.expected,
            "reads": self.got,
            "text": f"synth at {file.rsplit('/', 1)[-1]}:{self.line}: {self.text}",
        }


@dataclass
class Synthesis:
    ir: KernelIR  # the kernel with the synthesized ghost ops
    assertions: list[Synthesized] = field(default_factory=list)
    mismatches: list[Mismatch] = field(default_factory=list)
    pinned: list[str] = field(default_factory=list)  # what the synthesized assertions pin
    windows: list[tuple[str, str]] = field(default_factory=list)  # (output, window)
    # index-valued outputs: (store, its synthesized value assertion, the spec's values
    # predicate over `v`), one per store
    values: list[tuple[Store, Op, str]] = field(default_factory=list)
    seconds: float = 0.0


def _load_desc(load: Load, rs: list[set[Role]], store: Store, names: dict[Role, str]) -> str:
    """The load's coordinates in the spec's vocabulary: o<d> for an output axis, the
    contraction's name for a contracted one, else its expression."""
    parts = []
    for c in load.view.coords:
        axes = _axes(c)
        if len(axes) == 1:
            r = rs[axes[0]]
            outs = sorted(x[1] for x in r if x[0] == "out")
            bound = sorted(names.get(x, "k") for x in _bound_roles(r))
            parts.append(f"o{outs[0]}" if outs else (bound[0] if bound else to_source(c)))
        else:
            parts.append(to_source(c))
    return f"{load.view.tensor.name}[{', '.join(parts)}]"


def _axes(e: IntLike) -> list[int]:
    if not isinstance(e, Expr):
        return []
    return sorted({a for s in e.symbols() if (a := elem_axis(s)) is not None})


def _match(
    load: Load,
    rs: list[set[Role]],
    store: Store,
    read: Read,
    out: OutputSpec,
    summands: set[tuple[int, int]] | None = None,
) -> tuple[str | None, dict[int, IntLike], dict[str, str], Any]:
    """(why not, expected entries, store->load element map, (bound var -> kernel roles,
    the entries that walk a summed axis, the entries to assert after the dot the load is
    the right operand of: their expected value, over the store's elements)).

    A store coordinate that is data (a gathered row index: `al.at(slots)`, element r of a
    1-D tile) is moved to the load's matching axis; where the load has no such axis (a
    weight tile, a dot's right operand shared by every row), the entry is *deferred*: it is
    asserted on the dot's product, whose rows are the store's, through the product's
    provenance tag of its right operand's fixed entries (`coord.rhs`)."""
    none: tuple[Any, ...] = ({}, set(), {}, None)
    coords = load.view.coords
    if len(coords) != len(read.index):
        return f"{len(coords)} coordinates for a {len(read.index)}-d read", {}, {}, none
    emap: dict[Sym, Sym] = {}
    for a, r in enumerate(rs):
        for x in r:
            if x[0] == "out":
                emap.setdefault(Sym(f"_i{x[1]}", "elem"), Sym(f"_i{a}", "elem"))
    # a store axis of extent 1 that no load axis follows: its element is 0 (one element)
    flat = {
        Sym(f"_i{a}", "elem"): 0
        for a, n in enumerate(store.value.shape)
        if _one(n) and Sym(f"_i{a}", "elem") not in emap
    }
    expected: dict[int, IntLike] = {}
    deferred: dict[int, IntLike] = {}
    bvars: dict[Sym, set[Role]] = {}
    summed: set[int] = set()
    for e, (c, g) in enumerate(zip(coords, read.index)):
        gs = g.symbols() if isinstance(g, Expr) else set()
        bs = {s for s in gs if s in out.bounds}
        axes = _axes(c)
        if bs:
            # the entry must walk a summed axis; a bare variable (a matmul's k) must also
            # pair with the other reads of it (which window of a non-bare one, a group's
            # members, is summed is left to the correctness check). A loop's summand
            # (`al.summand`, a token's K slots) sums its entry across iterations.
            if summands and (load.out.id, e) in summands and not axes:
                summed.add(e)
                if isinstance(g, Sym):
                    bvars[g] = {("summand", load.out.id)}
                continue
            if not (len(axes) == 1 and _bound_roles(rs[axes[0]])):
                return f"entry {e} should be summed over ({to_source(g)})", {}, {}, none
            if isinstance(g, Sym):
                bvars[g] = _bound_roles(rs[axes[0]])
            summed.add(e)
            continue
        cv = c.value if isinstance(c, Const) else c
        if isinstance(g, int) and isinstance(cv, int) and cv != g:
            return f"entry {e} is {cv}, the read's is {g}", {}, {}, none  # w1[e, 1], not 0
        m: dict[Sym, IntLike] = {}
        defer = False
        for s in gs:
            if not (s.kind == "spec" and s.name[0] == "o"):
                continue  # a shape symbol
            d = int(s.name[1:])
            sc = _sub(store.view.coords[d], flat)
            if isinstance(sc, Expr):
                for x in sc.symbols():
                    if elem_axis(x) is not None and x not in emap:
                        return f"entry {e} should follow output dim {d}", {}, {}, none
                moved: dict[Sym, IntLike] = {}
                for x in sc.symbols():
                    if isinstance(x, TileElem):
                        to = emap.get(Sym(f"_i{x.axis}", "elem"))
                        if to is None:
                            defer = True
                        else:
                            moved[x] = _tile_elem(x, elem_axis(to) or 0)
                if not defer:
                    sc = sc.subs({**emap, **moved}) if moved else sc.subs(emap)
            m[out_sym(d)] = sc
        if defer:  # over the store's elements: asserted on the dot's product
            deferred[e] = g.subs(m) if isinstance(g, Expr) else g
            continue
        expected[e] = g.subs(m) if isinstance(g, Expr) else g
        for a in axes:  # an entry walking an axis must walk the output axis it names
            if _one(load.out.shape[a]):
                continue  # an axis of extent 1 walks one element: the assertion pins it
            if not any(x[0] == "out" for x in rs[a]):
                return f"entry {e} walks a summed axis but should be {to_source(g)}", {}, {}, none
    guard = _mapped_guard(read.guard, out, store, flat, emap)
    return (
        None,
        expected,
        {k.name: v.name for k, v in emap.items()},
        (bvars, summed, deferred, guard),
    )


def _loops_of(ir: KernelIR) -> dict[int, list[Loop]]:
    """Per op (by id), the loops around it, outermost first."""
    out: dict[int, list[Loop]] = {}

    def go(ops: list[Op], stack: list[Loop]) -> None:
        for o in ops:
            out[id(o)] = stack
            if isinstance(o, Loop):
                go(o.body, [*stack, o])

    go(ir.ops, [])
    return out


def _tap_order(b: Sym) -> tuple[int, str]:
    digits = "".join(ch for ch in b.name if ch.isdigit())
    return (int(digits) if digits else 0, b.name)


def _unravel(i: IntLike, extents: list[int]) -> list[IntLike]:
    """The row-major coordinates of position `i` in a run of `extents`."""
    out: list[IntLike] = []
    for j, n in enumerate(extents):
        inner = 1
        for x in extents[j + 1 :]:
            inner *= x
        at = i if inner == 1 else i // inner
        out.append(at % n if j else at)
    return out


def _row_major_of(g: IntLike, vs: list[Sym], extents: list[int]) -> bool:
    """Whether `g` (over the variables `vs` only) is their row-major position in a run of
    `extents`, checked at every point of the run."""
    import itertools

    if not isinstance(g, Expr) or g.symbols() - set(vs):
        return False
    for vals in itertools.product(*[range(n) for n in extents]):
        want = 0
        for v, n in zip(vals, extents):
            want = want * n + v
        try:
            if int(g.evaluate({s.name: v for s, v in zip(vs, vals)})) != want:
                return False
        except Exception:
            return False
    return True


def _iterations(c: IntLike, loops: list[Loop], n: int) -> tuple[dict[int, int], int] | None:
    """How often expression `c` (over the loops' variables) takes each value over every
    iteration of `loops` (concrete bounds), and the iteration count; None where it cannot
    be enumerated (symbolic bounds, other symbols, past 2**16 iterations)."""
    import itertools

    ranges = []
    for lp in loops:
        if not all(isinstance(x, int) for x in (lp.start, lp.stop, lp.step)) or lp.step <= 0:
            return None
        ranges.append(range(lp.start, lp.stop, lp.step))  # type: ignore[arg-type]
    total = 1
    for r in ranges:
        total *= len(r)
    if total > 1 << 16:
        return None
    names = [lp.var.name for lp in loops]
    if isinstance(c, Expr) and {x.name for x in c.symbols()} - set(names):
        return None
    counts: dict[int, int] = {}
    for vals in itertools.product(*ranges):
        v = int(c.evaluate(dict(zip(names, vals)))) if isinstance(c, Expr) else int(c)
        counts[v] = counts.get(v, 0) + 1
    return counts, total


def bind_window_taps(
    ir: KernelIR,
    store: Store,
    out: OutputSpec,
    reads: list[Read],
    loads: list[Any],
    rs_all: dict[int, list[set[Role]]],
    canon: dict[str, str],
    shape_map: dict[Sym, IntLike] | None = None,
) -> tuple[dict[Sym, IntLike], tuple[str, str, int, str] | None]:
    """The kernel's value of each summed variable of a window (a conv's or a pool's taps:
    variables the spec uses inside an input position, `o2 * 2 - 1 + k1`, or in a guard),
    which a loop visits rather than a tile axis:

    - where a read indexes one entry by the taps alone, row-major (a conv weight's
      `w[k1 * K2 + k2, 0, k0, o3]` through its `w_conv` view), and a load of it has there a
      scalar of the loops around it (`kk`, `kk // chunks`): the taps are that scalar
      unravelled, and the loops must visit every tap equally often;
    - else the loops around the load of such a read that carry a value the store writes
      (the accumulator a max or a sum is folded into): the taps are their iteration,
      row-major over the loops and then over the taps in the spec's order, and the loops
      must make exactly one iteration per tap.

    Substituted into the reads, the window's input position becomes an expression of the
    output element and the iteration, asserted like any other entry, and its guard
    (padding) likewise. ({}, None) where no variable needs it; a mismatch (expected, got,
    line, text) where the loops do not visit the window."""
    apart: set[Sym] = set()
    for r in reads:
        for e in r.index:
            if isinstance(e, Expr) and not isinstance(e, Sym):
                apart |= {x for x in e.symbols() if x in out.bounds}
        if r.guard is not None:
            apart |= {x for x in r.guard.symbols() if x in out.bounds}
    ext_of = {b: _sub(x.extent, shape_map or {}) for b, x in out.bounds.items()}
    taps = {b for b in apart if isinstance(ext_of[b], int)}
    if not taps:
        return {}, None
    loops_of = _loops_of(ir)
    binds: dict[Sym, IntLike] = {}
    why: tuple[str, str, int, str] | None = None
    sname = store.view.tensor.name
    lds = [x for x in loads if isinstance(x, Load)]
    for ld in lds:
        tname = canon.get(ld.view.tensor.name, ld.view.tensor.name)
        loops = loops_of.get(id(ld), [])
        lvars = {lp.var for lp in loops}
        for r in reads:
            if r.tensor != tname or len(r.index) != len(ld.view.coords):
                continue
            for c, g in zip(ld.view.coords, r.index):
                vs = sorted(
                    (x for x in (g.symbols() if isinstance(g, Expr) else ()) if x in taps),
                    key=_tap_order,
                )
                if not vs or set(vs) & set(binds) or not isinstance(c, Expr):
                    continue
                if not c.symbols() or not c.symbols() <= lvars:
                    continue
                exts = [ext_of[v] for v in vs]
                if not _row_major_of(g, vs, exts):  # type: ignore[arg-type]
                    continue
                n = 1
                for x in exts:
                    n *= x  # type: ignore[operator]
                seen = _iterations(c, [lp for lp in loops if lp.var in c.symbols()], n)
                if seen is not None:
                    counts, _ = seen
                    if set(counts) != set(range(n)) or len(set(counts.values())) != 1:
                        why = why or (
                            f"each of the {n} taps of {r.text()} equally often",
                            f"{ld.view.tensor.name} entry {to_source(c)} over the loop",
                            ld.point.line,
                            f"{sname}[o] sums {r.text()} over {n} taps "
                            f"({', '.join(v.name for v in vs)}); the loops around the load "
                            f"read {ld.view.tensor.name} at taps {sorted(counts)}, "
                            f"{'/'.join(map(str, sorted(set(counts.values()))))} times each",
                        )
                binds.update(zip(vs, _unravel(c, exts)))  # type: ignore[arg-type]
    rest = sorted(
        {x for r in reads for e in r.index if isinstance(e, Expr) for x in e.symbols()}
        & taps - set(binds),
        key=_tap_order,
    )
    if not rest:
        return binds, why
    for ld in lds:
        tname = canon.get(ld.view.tensor.name, ld.view.tensor.name)
        if not any(
            r.tensor == tname
            and any(isinstance(e, Expr) and set(rest) & e.symbols() for e in r.index)
            for r in reads
        ):
            continue
        acc = [
            lp for lp in loops_of.get(id(ld), []) if any(c.result.id in rs_all for c in lp.carried)
        ]
        if not acc:
            continue
        exts = [int(ext_of[v]) for v in rest]  # type: ignore[arg-type]
        n = 1
        for x in exts:
            n *= x
        it: IntLike = 0
        trips = 1
        for lp in acc:
            if not all(isinstance(x, int) for x in (lp.start, lp.stop, lp.step)):
                return binds, why
            k = len(range(lp.start, lp.stop, lp.step))  # type: ignore[arg-type]
            i = lp.var - lp.start if lp.start else lp.var
            i = i // lp.step if lp.step != 1 else i
            it = i if trips == 1 else it * k + i
            trips *= k
        if trips != n:
            why = why or (
                f"one iteration per tap of the window ({', '.join(v.name for v in rest)}: {n})",
                f"{trips} iterations",
                acc[-1].point.line,
                f"{sname}[o] folds a window of {n} taps "
                f"({', '.join(v.name for v in rest)}); the loops folding it into the "
                f"accumulator make {trips} iterations",
            )
        binds.update(zip(rest, _unravel(it, exts)))
        break
    return binds, why


def _read_where_guarded(
    ld: Load,
    guard: Expr,
    store: Store,
    out: OutputSpec,
    expected: dict[int, IntLike],
    emap: dict[str, str],
    tname: str,
    pt0: ProgramPoint,
) -> list[Op]:
    """Ghost ops asserting that the load reads (its mask holds) every element of the tile
    the spec reads where `guard` (over the load's elements) holds: the element is for an
    output element the store writes (its bounds, on the load's axes that follow the
    output's) and for a summed coordinate inside its extent. With the assertion on the
    loaded tile (where it reads, the guard holds), the load reads exactly where the
    reference does: a window's padding, and nothing inside the input, is masked."""
    if ld.mask is None:
        return []
    inside: list[Expr] = [guard]
    for e, c in enumerate(ld.view.coords):
        if e not in expected and _axes(c):  # a summed coordinate: inside its extent
            inside += [as_expr(c) >= 0, as_expr(c) < ld.view.tensor.dims[e]]
    # the store's bounds, on the load's axes that follow the output's
    emap_ = {Sym(k, "elem"): Sym(v, "elem") for k, v in emap.items()}
    bounds = store.view.in_bounds if store.mask is None else store.mask
    conj = bounds.args if isinstance(bounds, BoolOp) and bounds.op == "and" else (bounds,)
    for b in conj:
        if not isinstance(b, Expr) or any(isinstance(x, TileElem) for x in b.symbols()):
            continue
        if all(x in emap_ for x in b.symbols() if elem_axis(x) is not None):
            inside.append(as_expr(b.subs(emap_)))
    pt = ProgramPoint(pt0.file, pt0.line, f"synth: {tname} read for {out.name} (guard)")
    ghost = Value(tuple(ld.out.shape), "fp32", "synth_cover")
    name = f"{SYNTH_TAG}.cover.{tname}.{pt0.line}"
    sym = Sym("_synthc", "scalar")
    return [
        Zeros(pt, ghost),
        Tag(pt, ghost, (0,), name),
        AssertTag(pt, ghost, name, (sym,), lnot(land(*inside)) | as_expr(ld.mask)),
    ]


def _mapped_guard(
    guard: Expr | None,
    out: OutputSpec,
    store: Store,
    flat: dict[Sym, IntLike],
    emap: dict[Sym, Sym],
) -> Expr | None:
    """A read's guard over the load's elements (each output coordinate the store's, its
    elements moved to the load's axes that follow them); None where it has no guard, keeps
    a summed variable (a window the accumulator's `assert_contraction` checks), or speaks
    of an output coordinate no axis of the load follows (a weight read under a conv's
    guard: its product is gated by the paired read's mask)."""
    if guard is None or any(x in out.bounds for x in guard.symbols()):
        return None
    m: dict[Sym, IntLike] = {}
    for x in guard.symbols():
        if not (x.kind == "spec" and x.name[0] == "o" and x.name[1:].isdigit()):
            continue
        sc = _sub(store.view.coords[int(x.name[1:])], flat)
        if isinstance(sc, Expr):
            if any(
                (elem_axis(y) is not None and y not in emap)
                or (isinstance(y, TileElem) and Sym(f"_i{y.axis}", "elem") not in emap)
                for y in sc.symbols()
            ):
                return None
            moved = {
                y: _tile_elem(y, elem_axis(emap[Sym(f"_i{y.axis}", "elem")]) or 0)
                for y in sc.symbols()
                if isinstance(y, TileElem)
            }
            sc = sc.subs({**emap, **moved})
        m[x] = sc
    return as_expr(guard.subs(m))


def _tile_elem(x: TileElem, axis: int) -> TileElem:
    """`x` read along another axis of the tile an assertion speaks about."""
    if x.axis == axis:
        return x
    return TileElem(x.name, x.kind, x.lo, x.hi, value=x.value, axis=axis)


def synthesize(
    ir: KernelIR, spec: Spec, names: dict[str, str | tuple[str, ...]] | None = None
) -> Synthesis:
    """Synthesize the spec's assertions onto `ir` (see the module doc). `names` maps a
    spec tensor name to the kernel's (default: the same name), or to several kernel
    tensors bound to the one input (the front end binds a parameter used twice twice);
    shape symbols of the spec's inputs become the kernel's dims of that tensor."""
    t0 = time.perf_counter()
    canon: dict[str, str] = {}  # kernel tensor -> the name its reads go by
    flat: dict[str, str] = {}
    group_of: dict[str, tuple[str, ...]] = {}
    for k, v in (names if names else spec.names).items():
        group = (v,) if isinstance(v, str) else tuple(v)
        group_of[k] = group
        flat[k] = group[0]
        canon.update({g: group[0] for g in group})
    names = flat
    kt = {t.name: t for t in ir.tensors}
    shape_map: dict[Sym, IntLike] = {}
    ones: set[Sym] = set()
    for tname, dims in spec.dims.items():
        t = kt.get(names.get(tname, tname))
        if t is None:
            continue
        for d, s in enumerate(dims):
            if isinstance(s, Sym) and d < len(t.dims):
                shape_map[s] = t.dims[d]
            elif len(dims) == len(t.dims) and s == 1 and isinstance(t.dims[d], Sym):
                ones.add(t.dims[d])  # the reference's dim of 1 (index 0): the kernel's too
    same_shape, named = _viewed_shapes(ir, spec, group_of, shape_map)

    def dims_of(e: Any) -> Any:  # the spec's shape arithmetic, by the kernel's dim names
        e = _sub(e, shape_map)
        if not named or not isinstance(e, Expr):
            return e
        from argus_core.spec.views import rewrite

        return rewrite(e, lambda x: named.get(x))

    res = Synthesis(ir)
    inserts: dict[int, list[Op]] = {}
    summands = {(op.value.id, op.entry) for op in ir.walk() if isinstance(op, Summand)}
    prod = _producers(ir)
    for op in ir.walk():
        if not isinstance(op, Store):
            continue
        sname = op.view.tensor.name
        out = next((o for o in spec.outputs.values() if names.get(o.name, o.name) == sname), None)
        if out is None:
            continue
        reads = [
            Read(
                names.get(r.tensor, r.tensor),
                tuple(dims_of(i) for i in r.index),
                guard_of(dims_of(r.guard)) if r.guard is not None else None,
            )
            for r in out.reads
        ]
        if len(op.view.coords) != len(out.shape):
            raise ValueError(
                f"{ir.name}: the store at line {op.point.line} writes {sname} as a "
                f"{len(op.view.coords)}-d view, the reference's output is {len(out.shape)}-d "
                f"(a reshaped view: give the spec over the same view, `views.spec_over_views`)"
            )
        if out.values is not None:
            va = _value_assertion(op, _sub(out.values, shape_map), sname, prod)
            if va is None:
                res.mismatches.append(
                    Mismatch(
                        sname,
                        f"values {to_source(out.values)}",
                        f"a {len(op.value.shape)}-d tile",
                        op.point.line,
                        f"{sname}'s values ({to_source(out.values)}) are asserted on 0-d and "
                        f"1-D stored tiles only; the store at line {op.point.line} writes a "
                        f"{len(op.value.shape)}-d one",
                    )
                )
            else:
                inserts.setdefault(id(op), []).extend(va)
                res.values.append((op, va[1], to_source(out.values)))
                res.pinned.append(f"{sname}: every value written is {to_source(out.values)}")
        rs_all, loads = roles_of(ir, op)
        binds, why = bind_window_taps(ir, op, out, reads, loads, rs_all, canon, shape_map)
        if why:
            res.mismatches.append(Mismatch(sname, why[0], why[1], why[2], why[3]))
        if binds:
            reads = [
                Read(
                    r.tensor,
                    tuple(_sub(i, binds) for i in r.index),
                    guard_of(_sub(r.guard, binds)) if r.guard is not None else None,
                )
                for r in reads
            ]
            out = OutputSpec(
                out.name,
                out.shape,
                out.reads,
                {b: x for b, x in out.bounds.items() if b not in binds},
                out.values,
            )
            res.pinned.append(
                f"{sname}: the window's taps "
                + ", ".join(f"{b.name} = {to_source(x)}" for b, x in binds.items())
            )
        window = _window(out, reads, shape_map, op, ir)
        if window is not None:
            inserts.setdefault(id(window[0]), []).extend(window[1])
            res.pinned.append(f"{sname}: summed exactly over {to_source(window[1][-1].window)}")
            res.windows.append((sname, to_source(window[1][-1].window)))
        matched: set[str] = set()
        for sl in [x for x in loads if isinstance(x, LoadScalar)]:  # one element, by value
            name = canon.get(sl.tensor.name, sl.tensor.name)
            exact = [r for r in reads if r.tensor == name and tuple(r.index) == tuple(sl.coords)]
            matched.update(r.key() for r in exact)
            # a read at an expression of the output element (a GroupNorm's per-channel
            # weight `w[o0 * CG + o1]`): asserted on the stored tile, whose elements are
            # the output's, where the store writes
            cands = [
                r
                for r in reads
                if r.tensor == name
                and len(r.index) == len(sl.coords)
                and r.guard is None
                and not r.bound_syms(out.bounds)
            ]
            if exact or len(cands) != 1:
                continue
            r = cands[0]
            matched.add(r.key())
            entries, ops_ = _scalar_assertion(sl, r, op, name, len(inserts))
            inserts.setdefault(id(op), []).extend(ops_)
            syn = Synthesized(
                sname,
                name,
                r,
                sl,
                op,
                entries,
                {f"_i{d}": f"_i{d}" for d in range(len(op.value.shape))},
            )
            syn.op = ops_[-1] if ops_ else None  # none: every entry is the load's own
            res.assertions.append(syn)
            res.pinned.append(
                f"{sname} <- {r.text()}: "
                + ", ".join(f"entry {e} = {to_source(x)}" for e, x in entries.items())
                + " (a scalar read)"
            )
        loads = [x for x in loads if isinstance(x, Load)]
        bvar_roles: dict[Sym, list[tuple[set[Role], str, str]]] = {}
        for ld in loads:
            rs = rs_all[ld.out.id]
            tname = canon.get(ld.view.tensor.name, ld.view.tensor.name)
            cands = [r for r in reads if r.tensor == tname]
            desc = _load_desc(ld, rs, op, {})
            if not cands:
                res.mismatches.append(
                    Mismatch(
                        sname,
                        "no element of " + tname,
                        desc,
                        ld.point.line,
                        f"{sname}[o] does not depend on {tname} in the reference, but the kernel reads {desc} into it",
                    )
                )
                continue
            ok = []
            why = ""
            for r in cands:
                w, exp, emap, bvs = _match(ld, rs, op, r, out, summands)
                if w is None:
                    ok.append((r, exp, emap, bvs))
                else:
                    why = why or w
            if not ok:
                want = " or ".join(r.text() for r in cands)
                res.mismatches.append(
                    Mismatch(
                        sname,
                        want,
                        desc,
                        ld.point.line,
                        f"{sname}[{', '.join(f'o{d}' for d in range(len(out.shape)))}] should read {want}, the kernel reads {desc} ({why})",
                    )
                )
                continue
            preds = []
            tag_syms = tuple(Sym(f"_synth{d}", "scalar") for d in range(len(ld.view.coords)))
            guarded: list[tuple[Read, Expr]] = []
            for r, exp, emap, (bv, summed, deferred, gd) in ok:
                if gd is not None and len(ok) == 1:  # read only where the guard holds
                    preds.append(gd)
                    guarded.append((r, gd))
                matched.add(r.key())
                if deferred:
                    after = _rhs_assertion(ld, deferred, rs_all, prod, op, tname)
                    if after is None:
                        res.mismatches.append(
                            Mismatch(
                                sname,
                                r.text(),
                                desc,
                                ld.point.line,
                                f"{sname}[o] should read {r.text()}; the kernel's {desc} has no "
                                "row of the output to check it against (not a dot's right operand)",
                            )
                        )
                    else:
                        for dot, assertion in after:
                            inserts.setdefault(id(dot), []).append(assertion)
                for b, roles in bv.items():
                    bvar_roles.setdefault(b, []).append((roles, desc, tname))
                for e, x in exp.items():
                    if (
                        not (isinstance(x, Expr) and x == ld.view.coords[e])
                        and x != ld.view.coords[e]
                    ):
                        preds.append(tag_syms[e].eq(x))
                syn = Synthesized(
                    sname,
                    tname,
                    r,
                    ld,
                    op,
                    {**exp, **deferred},
                    emap,
                    summed=summed,
                    rows=set(deferred),
                    guard=gd if len(ok) == 1 else None,
                )
                res.assertions.append(syn)
                res.pinned.append(
                    f"{sname} <- {r.text()}: "
                    + ", ".join(f"dim {e} = {to_source(x)}" for e, x in exp.items())
                    + (f"; {', '.join(b.name for b in bv)} contracted" if bv else "")
                )
            pt = ProgramPoint(ld.point.file, ld.point.line, f"synth: {tname} read for {sname}")
            tname_ = (
                f"{SYNTH_TAG}.{len(inserts)}.{tname}"  # one name per load: dots pair equal names
            )
            # asserted on a ghost copy of the loaded tile: its tag stays off the kernel's
            # values (a tag of a tile summed across a loop would be compared between
            # iterations by the verifier's elementwise and loop checks)
            ghost = Value(tuple(ld.out.shape), ld.out.dtype, "synth_read")
            tag = Tag(pt, ghost, tuple(ld.view.coords), tname_)
            assertion = AssertTag(pt, ghost, tname_, tag_syms, land(*preds))
            for s in res.assertions[-len(ok) :]:
                s.op = assertion
            if preds:  # else every entry is the load's own coordinate: nothing to prove
                inserts.setdefault(id(ld), []).extend([Cast(pt, ghost, ld.out), tag, assertion])
            if len(guarded) == 1 and len(ok) == 1:
                cover = _read_where_guarded(
                    ld, guarded[0][1], op, out, ok[0][1], ok[0][2], tname, pt
                )
                if cover:
                    inserts.setdefault(id(ld), []).extend(cover)
                    res.pinned.append(
                        f"{sname} <- {guarded[0][0].text()}: read wherever its guard holds"
                    )
        for r in reads:
            if r.key() not in matched:
                res.mismatches.append(
                    Mismatch(
                        sname,
                        r.text(),
                        "nothing",
                        op.point.line,
                        f"{sname}[o] should read {r.text()}; no load feeding the store at line {op.point.line} reads it",
                    )
                )
        for b, lst in bvar_roles.items():
            for roles, desc, tname in lst:
                for other in {t for _, _, t in lst} - {tname}:
                    if any(roles & r2 for r2, _, t2 in lst if t2 == other):
                        continue
                    res.mismatches.append(
                        Mismatch(
                            sname,
                            f"{desc} paired with {other} over one {b.name}",
                            "no pairing",
                            op.point.line,
                            f"{sname}[o] pairs {tname} and {other} over one index {b.name} in the "
                            f"reference; the kernel's read {desc} is summed with no read of {other}",
                        )
                    )

    # after a synthesized window, later ops read the window's tile instead of the
    # accumulator (same values and tags; its checks are then the window's, not [0, K)'s)
    renames: dict[int, Value] = {}

    def go(ops: list[Op]) -> list[Op]:
        new: list[Op] = []
        for o in ops:
            after = inserts.get(id(o), [])
            if isinstance(o, Loop):
                o = copy.copy(o)
                object.__setattr__(o, "body", go(o.body))
            elif any(v.id in renames for v in o.operands()):
                o = copy.copy(o)
                for v in list(o.operands()):
                    if v.id in renames:
                        o.replace_operand(v, renames[v.id])
            new.append(o)
            new.extend(after)
            for a in after:
                if isinstance(a, Elementwise) and a.out.name == "synth_acc":
                    renames[a.operands()[0].id] = a.out
        return new

    ops = go(ir.ops)
    if ones:  # the spec holds for the reference's shape: those dims are 1 there
        pt = ProgramPoint(ir.file, 0, "synth: dims of 1 in the reference")
        ops = [Requires(pt, land(*[d.eq(1) for d in sorted(ones, key=lambda x: x.name)])), *ops]
    if same_shape:  # and for its shapes: a viewed tensor's dims are the reference's
        pt = ProgramPoint(ir.file, 0, "synth: the reference's shapes through its views")
        ops = [Requires(pt, land(*same_shape)), *ops]
    res.ir = _with_ops(ir, ops)
    res.seconds = time.perf_counter() - t0
    return res


def _viewed_shapes(
    ir: KernelIR,
    spec: Spec,
    group_of: dict[str, tuple[str, ...]],
    shape_map: dict[Sym, IntLike],
) -> tuple[list[Expr], dict[Expr, Sym]]:
    """Map the dims of the tensors the spec is written over a view of (`Spec.base`) onto
    the kernel's, and the parameters' dim symbols onto their sizes (`Spec.sizes`); return
    the equalities the reference's shapes then impose on the kernel's dims (a merged run's
    extent `S == I0 * I1`, an output's spatial extents in terms of the input's).

    A kernel tensor bound to a viewed spec tensor and loaded or stored is the view (the
    spec's reads are over it: its dims are `Spec.dims` / the output's viewed shape); one
    the kernel only takes the extents of (the conv templates' `xs`, `ys`) is the tensor as
    the reference has it (its dims are the base ones). Also each such expression (over the
    kernel's dims) -> the kernel's dim it equals, which the reads then name it by (an
    unravelled position `q // O3` as the kernel computes it, not `q // ((I1 - 1) // 2 + 1)`:
    the same terms are easier for the solver)."""
    if not spec.base:
        for s_, v in spec.sizes.items():
            shape_map.setdefault(s_, v)
        return [], {}
    kt = {t.name: t for t in ir.tensors}
    used = {
        x.view.tensor.name if isinstance(x, Load | Store) else x.tensor.name
        for x in ir.walk()
        if isinstance(x, Load | Store | LoadScalar)
    }
    pairs: list[tuple[IntLike, IntLike]] = []
    for tname, base in spec.base.items():
        viewed = spec.dims.get(tname)
        if viewed is None and tname in spec.outputs:
            viewed = spec.outputs[tname].shape
        for kname in group_of.get(tname, (tname,)):
            t = kt.get(kname)
            dims = viewed if kname in used else base
            if t is None or dims is None or len(dims) != len(t.dims):
                continue
            for sd, kd in zip(dims, t.dims):
                if isinstance(sd, Sym) and sd not in shape_map:
                    shape_map[sd] = kd
                else:
                    pairs.append((sd, kd))
    for s_, v in spec.sizes.items():
        shape_map.setdefault(s_, v)
    spec_syms = {
        x
        for ds in (*spec.dims.values(), *spec.base.values(), *spec.params.values())
        for d in ds
        if isinstance(d, Expr)
        for x in d.symbols()
    }
    out: list[Expr] = []
    named: dict[Expr, Sym] = {}
    for sd, kd in pairs:
        e = _sub(sd, shape_map)
        if isinstance(e, Expr) and e.symbols() & spec_syms:
            continue  # a symbol of the reference the kernel has no dim for
        if (isinstance(e, int) and isinstance(kd, int)) or as_expr(e) == as_expr(kd):
            continue
        out.append(as_expr(kd).eq(e))
        if isinstance(e, Expr) and isinstance(kd, Sym) and not isinstance(e, Sym):
            named.setdefault(e, kd)
    return out, named


def _scalar_assertion(
    sl: LoadScalar, read: Read, store: Store, tname: str, n: int
) -> tuple[dict[int, IntLike], list[Op]]:
    """(expected entries, [a tag, an `assert_tag`]) after `store`: the scalar `sl` reads,
    at every element the store writes (its mask), the entries `read` gives at that output
    element (the store's coordinates for o<d>); no ops when every entry is the load's own."""
    m = {out_sym(d): c for d, c in enumerate(store.view.coords)}
    entries = {e: _sub(g, m) for e, g in enumerate(read.index)}
    syms = tuple(Sym(f"_synth{e}", "scalar") for e in range(len(sl.coords)))
    preds = [
        syms[e].eq(x)
        for e, x in entries.items()
        if not (isinstance(x, int) and isinstance(sl.coords[e], int) and x == sl.coords[e])
        and not (isinstance(x, Expr) and x == sl.coords[e])
    ]
    if not preds:
        return entries, []
    v = store.value
    mask = store.view.in_bounds if store.mask is None else store.mask
    pt = ProgramPoint(
        sl.point.file, sl.point.line, f"synth: {tname} read for {store.view.tensor.name}"
    )
    name = f"{SYNTH_TAG}.{n}.{tname}.scalar"
    return entries, [
        Tag(pt, v, tuple(sl.coords), name),
        AssertTag(pt, v, name, syms, lnot(mask) | land(*preds)),
    ]


def _value_assertion(
    store: Store, values: Expr, sname: str, prod: dict[int, Any]
) -> list[Op] | None:
    """A tag and an `assert_tag` after `store`: every element it writes (its mask, which
    holds the view's bounds) holds a value `values` admits (`v`: the stored element,
    `al.at(value)`); None for a stored tile of 2 or more dims (`at` speaks of 0-d and 1-D
    tiles). A *uniform* tile (one scalar broadcast: `al.zeros((BM,)) + SLOTS`, the padding
    sentinel) is asserted at every element, the mask aside: whether some element is written
    is then no question for the solver (a store whose mask holds nowhere, writing an invalid
    constant, is reported too)."""
    from argus_core.spec.model import value_sym

    v = store.value
    if len(v.shape) > 1:
        return None
    at = TileElem(f"%{v.id}", "data", 0, None, value=v, axis=0)
    pred = values.subs({value_sym(): at})
    if store.mask is not None and not _uniform(v, prod):
        pred = lnot(store.mask) | pred
    pt = ProgramPoint(store.point.file, store.point.line, f"synth: {sname} values")
    name = f"{SYNTH_TAG}.values.{sname}.{store.point.line}"
    elems = tuple(elem_sym(d, v.shape[d]) for d in range(len(v.shape)))
    syms = tuple(Sym(f"_synthv{d}", "scalar") for d in range(len(v.shape)))
    return [Tag(pt, v, elems, name), AssertTag(pt, v, name, syms, pred)]


def _uniform(v: Any, prod: dict[int, Any], depth: int = 8) -> bool:
    """Every element of tile `v` is the same scalar: zeros/full combined elementwise with
    scalar expressions free of element symbols (shapes, program ids, loop variables)."""
    from argus_core.ir.nodes import Full, Zeros

    op = prod.get(v.id)
    if depth == 0 or op is None:
        return False
    if isinstance(op, Zeros | Full):
        return True
    if isinstance(op, Cast):
        return _uniform(op.x, prod, depth - 1)
    if isinstance(op, Elementwise):
        for a in op.args:
            if isinstance(a, Value):
                if not _uniform(a, prod, depth - 1):
                    return False
            elif isinstance(a, Expr):
                if any(elem_axis(x) is not None or isinstance(x, TileElem) for x in a.symbols()):
                    return False
            elif not isinstance(a, int | float):
                return False
        return True
    return False


def _rhs_assertion(
    ld: Load,
    deferred: dict[int, IntLike],
    rs_all: dict[int, list[set[Role]]],
    prod: dict[int, Any],
    store: Store,
    tname: str,
) -> list[tuple[Op, AssertTag]] | None:
    """[(a dot, an assertion after it)]: the entries `deferred` of the load's coordinates,
    which the load fixes per program (an expert) while the spec gives them per output row
    (`ids[o0]`), asserted on the product of the dot whose right operand the load is: its
    `coord.rhs` tag carries the operand's fixed entries, per element of the product, whose
    rows are the store's (the row's data coordinate moves to the product's axis)."""
    dots = [
        op for op in prod.values() if isinstance(op, Dot) and _through_casts(op.b, prod) is ld.out
    ]
    if not dots:
        return None
    out = []
    for dot in dots:
        one = _rhs_one(ld, dot, deferred, rs_all, store, tname)
        if one is None:
            return None
        out.append((dot, one))
    return out


def _rhs_one(
    ld: Load,
    dot: Dot,
    deferred: dict[int, IntLike],
    rs_all: dict[int, list[set[Role]]],
    store: Store,
    tname: str,
) -> AssertTag | None:
    fixed = [e for e, c in enumerate(ld.view.coords) if not _axes(c)]
    if not set(deferred) <= set(fixed):
        return None
    rs = rs_all.get(dot.out.id)
    if rs is None:
        return None
    axis_of = {x[1]: a for a, r in enumerate(rs) for x in r if x[0] == "out"}
    syms = tuple(Sym(f"_synth{j}", "scalar") for j in range(len(fixed)))

    def moved(e: IntLike) -> IntLike | None:
        if not isinstance(e, Expr):
            return e
        m: dict[Sym, IntLike] = {}
        for x in e.symbols():
            a = x.axis if isinstance(x, TileElem) else elem_axis(x)
            if a is None:
                continue
            if a not in axis_of:
                return None
            m[x] = _tile_elem(x, axis_of[a]) if isinstance(x, TileElem) else elem_sym(axis_of[a])
        return e.subs(m) if m else e

    preds = []
    for e, want in deferred.items():
        w = moved(want)
        if w is None:
            return None
        preds.append(syms[fixed.index(e)].eq(w))
    # only where the store writes: its coordinates inside the output (a padding row's
    # sentinel is past the extent, so it is masked and reads nothing)
    inside = []
    for c, n in zip(store.view.coords, store.view.tensor.dims):
        c2 = moved(c)
        if c2 is None:
            return None
        inside += [as_expr(c2) >= 0, as_expr(c2) < n]
    sname = store.view.tensor.name
    pt = ProgramPoint(ld.point.file, ld.point.line, f"synth: {tname} read for {sname} (rows)")
    return AssertTag(pt, dot.out, "coord.rhs", syms, lnot(land(*inside)) | land(*preds))


def _through_casts(v: Any, prod: dict[int, Any]) -> Any:
    op = prod.get(v.id)
    while isinstance(op, Cast):
        v = op.x
        op = prod.get(v.id)
    return v


def _summed(store: Store, ir: KernelIR) -> tuple[Any, Op] | None:
    """The accumulator the stored value is computed from (back through casts and
    elementwise ops, first tile operand, to a dot or a loop's carried result) and the op
    after which it is final (the dot, or the loop)."""
    prod = _producers(ir)
    loop_of = {c.result.id: op for op in ir.walk() if isinstance(op, Loop) for c in op.carried}
    v = store.value
    while True:
        op = prod.get(v.id)
        if isinstance(op, Cast):
            v = op.x
        elif isinstance(op, Elementwise) and op.operands():
            v = op.operands()[0]
        elif isinstance(op, Dot):
            return v, op
        elif isinstance(op, Carry) and v.id in loop_of and _adds_dot(op.yielded, prod):
            return v, loop_of[v.id]
        else:
            return None


def _adds_dot(v: Any, prod: dict[int, Any], depth: int = 4) -> bool:
    """Whether `v` is a sum with a dot among its terms (an accumulator's yield)."""
    op = prod.get(v.id)
    if isinstance(op, Dot):
        return True
    if depth and isinstance(op, Cast):
        return _adds_dot(op.x, prod, depth - 1)
    if depth and isinstance(op, Elementwise) and op.fn in ("add", "sub"):
        return any(_adds_dot(a, prod, depth - 1) for a in op.operands())
    return False


def _window(
    out: OutputSpec, reads: list[Read], shape_map: dict[Sym, IntLike], store: Store, ir: KernelIR
) -> tuple[Op, list[Op]] | None:
    """The contraction window of the store's accumulator: for the one contracted variable
    whose reads are guarded (a mask), the guard over the output element and the contracted
    coordinate, below the contraction's extent; checked at the store's in-bounds elements."""
    found = _summed(store, ir)
    if found is None:
        return None
    acc, final = found
    for b, bd in out.bounds.items():
        if bd.kind != "contract":
            continue
        guards = {
            to_source(r.guard): r.guard
            for r in reads
            if r.guard is not None and b in r.guard.symbols()
        }
        if len(guards) != 1:
            continue
        (g,) = guards.values()
        if any(s in out.bounds and s != b for s in g.symbols()):
            continue
        n = len(out.shape)
        syms = tuple(Sym(f"_tag{d}", "scalar") for d in range(n))
        c = Sym("_tagc", "scalar")
        m: dict[Sym, IntLike] = {out_sym(d): syms[d] for d in range(n)}
        m[b] = c
        win = land(g.subs(m), c < _sub(bd.extent, shape_map))
        pt = ProgramPoint(store.point.file, store.point.line, f"synth: window of {out.name}")
        # asserted only where the store writes: the accumulator plus the output tile as
        # loaded (valid where in bounds, tagged with the output coordinates)
        here = Value(tuple(acc.shape), "fp32", "synth_out")
        mask = store.view.in_bounds if store.mask is None else store.mask
        masked = Value(tuple(acc.shape), acc.dtype, "synth_acc")
        ops: list[Op] = [
            Load(pt, here, store.view, mask, 0.0),
            Elementwise(pt, masked, "add", [acc, here]),
            AssertContraction(pt, masked, "coord", syms, c, win),
        ]
        return final, ops
    return None


def _sub(e: IntLike, m: dict[Sym, IntLike]) -> IntLike:
    return e.subs(m) if isinstance(e, Expr) else e


# ------------------------------------------------------------------------ check


@dataclass
class SynthReport:
    status: str  # verified | violated | unknown
    counterexamples: list[dict[str, Any]]
    synthesized: int
    pinned: list[str]
    synth_seconds: float
    verify_seconds: float
    summary: str = ""
    report: Any = None


def check(
    verifier: Any,
    ir: KernelIR,
    policy: Any,
    spec: Spec,
    target: Any,
    options: dict[str, Any] | None = None,
    names: dict[str, Any] | None = None,
    assume: dict[str, int] | None = None,
) -> SynthReport:
    """Synthesize the spec's assertions onto `ir` and prove them (with every assertion the
    kernel already has) with `verifier` (a `protocols.Verifier`). `assume` fixes scalar arguments (the mode
    a spec is the reference of: `{"causal": 1}`)."""
    syn = synthesize(with_scalars(ir, assume) if assume else ir, spec, names)
    t0 = time.perf_counter()
    report = verifier.verify(syn.ir, policy, dict(options or {}), target)
    vs = time.perf_counter() - t0
    cexs = [m.as_counterexample(ir.file) for m in syn.mismatches]
    for c in report.counterexamples:
        cexs.append(
            _explain(c, syn, policy)
            if str(c.get("program_point", {}).get("op", "")).startswith("synth")
            else c
        )
    status = "violated" if cexs else report.status
    summary = cexs[0]["text"] if cexs else report.summary
    return SynthReport(
        status,
        cexs,
        len(syn.assertions) + len(syn.values),
        syn.pinned,
        syn.seconds,
        vs,
        summary,
        report,
    )


def with_scalars(ir: KernelIR, values: dict[str, int]) -> KernelIR:
    """`ir` with a precondition fixing scalar arguments; an unknown name is an error naming
    the kernel's scalars."""
    scalars = {s.name: s for s, _ in ir.scalars}
    bad = sorted(set(values) - set(scalars))
    if bad:
        raise ValueError(f"{ir.name} has no scalar {bad}; its scalars: {sorted(scalars)}")
    pred = land(*[scalars[k].eq(v) for k, v in values.items()])
    pt = ProgramPoint(ir.file, 0, f"synth: mode {values}")
    return _with_ops(ir, [Requires(pt, pred), *ir.ops])


def kernel_modes(
    ir: KernelIR, modes: list[tuple[dict[str, int], Spec]]
) -> list[tuple[dict[str, int], Spec]]:
    """The modes that apply to `ir`: a scalar the kernel does not take is an option it does
    not have, which is the option off (0); modes fixing it to anything else are dropped and
    the rest keep only the scalars the kernel takes (a non-causal attention kernel is
    checked against the non-causal reference). ValueError when none applies."""
    have = {s.name for s, _ in ir.scalars}
    out = []
    for values, spec in modes:
        if all(v == 0 for k, v in values.items() if k not in have):
            out.append(({k: v for k, v in values.items() if k in have}, spec))
    if not out:
        raise ValueError(
            f"{ir.name}: no reference mode applies (modes {[m for m, _ in modes]}, "
            f"kernel scalars {sorted(have)})"
        )
    return out


def check_modes(
    verifier: Any,
    ir: KernelIR,
    policy: Any,
    modes: list[tuple[dict[str, int], Spec]],
    target: Any,
    options: dict[str, Any] | None = None,
    names: dict[str, str] | None = None,
) -> SynthReport:
    """`check` once per mode (scalar values, the reference's spec in that mode); the first
    mode that is not verified decides, else the last report with every mode's pins."""
    last = None
    pinned: list[str] = []
    t_syn = t_ver = 0.0
    for values, spec in kernel_modes(ir, modes):
        r = check(verifier, ir, policy, spec, target, options, names, values or None)
        t_syn, t_ver = t_syn + r.synth_seconds, t_ver + r.verify_seconds
        pinned += [f"{values}: {p}" if values else p for p in r.pinned]
        if r.status != "verified":
            r.synth_seconds, r.verify_seconds = t_syn, t_ver
            return r
        last = r
    assert last is not None, "check_modes needs at least one mode"
    last.pinned, last.synth_seconds, last.verify_seconds = pinned, t_syn, t_ver
    return last


def _explain(c: dict[str, Any], syn: Synthesis, policy: Any) -> dict[str, Any]:
    """Name the output element, the input element it should have read, the one it read."""
    line = c["program_point"]["line"]
    if str(c["program_point"].get("op", "")).endswith(" values"):
        return _explain_values(c, syn)
    cand = [s for s in syn.assertions if s.load.point.line == line and s.op is not None]
    if not cand:
        return c
    s = cand[0]
    if "(rows)" in str(c["program_point"].get("op", "")):
        return _explain_rows(c, s)
    if "(guard)" in str(c["program_point"].get("op", "")):
        return _explain_masked(c, s)
    env = _env(syn.ir, policy, c)
    elems = {f"_i{d}": v for d, v in enumerate(c.get("element") or [])}
    got = list(c.get("lhs") or [])
    inv = {v: k for k, v in s.axis_map.items()}
    store_env = dict(env)
    for d in range(len(s.store.value.shape)):
        store_env[f"_i{d}"] = 0
    for ls, ss in ((v, k) for k, v in s.axis_map.items()):
        if ls in elems:
            store_env[ss] = elems[ls]
    del inv
    try:
        out_el = [_ev(x, store_env) for x in s.store.view.coords]
        want = [
            _ev(s.entries[e], {**env, **elems}) if e in s.entries else got[e]
            for e in range(len(got))
        ]
    except Exception:  # a symbol the counterexample does not bind: keep the verifier's text
        return _explain_rows(c, s)
    text = (
        f"{s.output}{out_el} should read {s.tensor}{want} "
        f"({s.read.text()}) but reads {s.tensor}{got}"
    )
    try:
        outside = s.guard is not None and not _ev(s.guard, {**env, **elems})
    except Exception:  # a symbol the model does not bind (data): the plain text
        outside = False
    if outside:  # the reference reads nothing there: the window's padding
        want = []
        text = (
            f"{s.output}{out_el} reads {s.tensor}{got}, where the reference reads no "
            f"element of {s.tensor} (outside the guard of {s.read.text()}: padding)"
        )
    return {
        **c,
        "assertion": "synth_dataflow",
        "invariant": f"{s.output} <- {s.read.text()}",
        "output_element": out_el,
        "should_read": want,
        "reads": got,
        "text": f"synth at {c['program_point']['file'].rsplit('/', 1)[-1]}:{line}: {text}",
        "message": text,
    }


def _explain_masked(c: dict[str, Any], s: Synthesized) -> dict[str, Any]:
    """The load masks an element the reference reads (its guard holds there)."""
    line = c["program_point"]["line"]
    where = f"element {c.get('element')} of program {c.get('program_id')}"
    it = c.get("iteration")
    text = (
        f"{s.output}[o] should read {s.read.text()} wherever its guard holds, but at {where}"
        + (f" (iteration {it})" if it else "")
        + f" the load masks an element there (reads its `other`, not {s.tensor})"
    )
    return {
        **c,
        "assertion": "synth_dataflow",
        "invariant": f"{s.output} <- {s.read.text()}",
        "output_element": c.get("element"),
        "should_read": s.read.text(),
        "reads": "a masked element",
        "text": f"synth at {c['program_point']['file'].rsplit('/', 1)[-1]}:{line}: {text}",
        "message": text,
    }


def _explain_values(c: dict[str, Any], syn: Synthesis) -> dict[str, Any]:
    """An index-valued output's store wrote a value the reference's values exclude."""
    line = c["program_point"]["line"]
    found = [(st, want) for st, _, want in syn.values if st.point.line == line]
    if not found:
        return c
    st, want = found[0]
    sname = st.view.tensor.name
    elem = list(c.get("lhs") or [])
    shapes = ", ".join(f"{k}={v}" for k, v in (c.get("shapes") or {}).items())
    file = str(c["program_point"]["file"]).rsplit("/", 1)[-1]
    text = (
        f"synth at {file}:{line}: element {elem} of the tile stored into {sname} holds a "
        f"value v the reference's {sname} never holds (it must satisfy {want}) [{shapes}]"
    )
    return {
        **c,
        "assertion": "synth_dataflow",
        "invariant": f"{sname} values",
        "output_element": f"{sname}[the row element {elem} is stored to]",
        "should_read": f"a value with {want}",
        "reads": "another value",
        "text": text,
    }


def _explain_rows(c: dict[str, Any], s: Synthesized) -> dict[str, Any]:
    """A per-row assertion on a dot's product (an expert read through the routing ids):
    the rows' data the solver chose (`data`), the entries the kernel read (`lhs`)."""
    got = list(c.get("lhs") or [])
    data = ", ".join(f"{k} = {v}" for k, v in (c.get("data") or {}).items())
    if "(rows)" in str(c["program_point"].get("op", "")):
        fixed = sorted(s.rows | {e for e, x in enumerate(s.load.view.coords) if not _axes(x)})
        reads = ", ".join(
            f"entry {e} = {got[j]}" for j, e in enumerate(fixed) if j < len(got) and e in s.rows
        )
    else:  # a symbol the counterexample does not bind (data): the entries as read
        reads = f"{s.tensor}{got}" if got else ""
    where = f"element {c.get('element')} of program {c.get('program_id')}"
    via = " (through the index tensor)" if "(rows)" in str(c["program_point"].get("op", "")) else ""
    text = (
        f"{s.output}[o] should read {s.read.text()}{via}, but at {where} "
        f"the kernel reads {s.tensor} with {reads or 'other entries'}"
        + (f" [{data}]" if data else "")
    )
    line = c["program_point"]["line"]
    return {
        **c,
        "assertion": "synth_dataflow",
        "invariant": f"{s.output} <- {s.read.text()}",
        "output_element": c.get("element"),
        "should_read": s.read.text(),
        "reads": got,
        "text": f"synth at {c['program_point']['file'].rsplit('/', 1)[-1]}:{line}: {text}",
        "message": text,
    }


def _ev(e: IntLike, env: dict[str, int]) -> int:
    return e if isinstance(e, int) else int(e.evaluate(env))


def _env(ir: KernelIR, policy: Any, c: dict[str, Any]) -> dict[str, int]:
    env: dict[str, int] = {s.name: 1 for s in ir.shape_syms}
    env.update(c.get("shapes") or {})
    for k, v in list(env.items()):  # X_per_Y symbols introduced by divisibility preconditions
        if "_per_" in k:
            x, y = k.split("_per_")
            env.setdefault(y, 1)
            env[x] = v * env[y]
    env.update(policy.tiles)
    env.update(c.get("scalars") or {})
    for t in ir.tensors:
        acc = 1
        for d in reversed(range(len(t.dims))):
            env[t.strides[d].name] = acc
            acc *= env.get(t.dims[d].name, 1)
    env["program_id_0"] = c["program_id"] if c.get("program_id") is not None else 0
    for op in ir.walk():
        if isinstance(op, Let):
            try:
                env[op.sym.name] = _ev(op.expr, env)
            except Exception:
                pass
    env.update(c.get("iteration") or {})
    return env


# --------------------------------------------------------------- strength report


def strength_report(
    original: KernelIR, syn: Synthesis | None, spec_outputs: list[str] | None = None
) -> dict[str, Any]:
    """Which parts of each output's data flow are pinned, and by what: for every load
    feeding a store, per coordinate entry, "hand-written" (a kernel's own `assert_tag` on
    the tile), "synthesized" (an assertion derived from the reference), "implied" (the
    entry walks an output axis: the store's and elementwise tag checks pin it; a contracted
    axis: the dot's pairing and the store's coverage pin it; a fixed entry of a tile that
    is no dot's b operand: its coordinate tag reaches the store); else "correctness check".
    Also each accumulator's contraction window, and what no assertion covers."""
    hand: dict[int, set[int]] = {}
    hand_windows: set[int] = set()
    for op in original.walk():
        if isinstance(op, AssertTag) and op.name == "coord":
            used = op.pred.symbols() if isinstance(op.pred, Expr) else set()
            hand.setdefault(op.value.id, set()).update(
                d for d, t in enumerate(op.tag_syms) if t in used
            )
        elif isinstance(op, AssertContraction):
            hand_windows.add(op.value.id)
    synth: dict[tuple[int, int], str] = {}
    for a in syn.assertions if syn is not None else []:
        for e in a.entries:
            synth[(id(a.load), e)] = "synthesized"
        for e in a.summed:
            synth.setdefault((id(a.load), e), "synthesized (summed axis)")
    outputs: dict[str, Any] = {}
    for st in original.walk():
        if not isinstance(st, Store):
            continue
        rs_all, loads = roles_of(original, st)
        name = st.view.tensor.name
        entry = outputs.setdefault(name, {"reads": [], "window": "", "line": st.point.line})
        for ld in sorted(loads, key=lambda x: x.point.line):
            if isinstance(ld, LoadScalar):  # one element: no tile, no implied tag
                sdims = [
                    {"dim": e, "coord": to_source(c), "pinned_by": [synth[(id(ld), e)]]}
                    if (id(ld), e) in synth
                    else {"dim": e, "coord": to_source(c), "pinned_by": ["correctness check"]}
                    for e, c in enumerate(ld.coords)
                ]
                entry["reads"].append(
                    {"tensor": ld.tensor.name, "line": ld.point.line, "dims": sdims}
                )
                continue
            rs = rs_all[ld.out.id]
            rhs = any(VIA_RHS in r for r in rs)
            dims = []
            for e, c in enumerate(ld.view.coords):
                by = []
                if e in hand.get(ld.out.id, set()):
                    by.append("hand-written")
                if (id(ld), e) in synth:
                    by.append(synth[(id(ld), e)])
                axes = _axes(c)
                if len(axes) == 1 and any(x[0] == "out" for x in rs[axes[0]]):
                    by.append("implied (output axis)")
                elif len(axes) == 1 and any(x[0] == "contract" for x in rs[axes[0]]):
                    by.append("implied (contracted)")
                elif not axes and not rhs:
                    by.append("implied (tag reaches the store)")
                dims.append(
                    {"dim": e, "coord": to_source(c), "pinned_by": by or ["correctness check"]}
                )
            entry["reads"].append(
                {"tensor": ld.view.tensor.name, "line": ld.point.line, "dims": dims}
            )
        accs = [a for a in syn.windows if a[0] == name] if syn is not None else []
        found = _summed(st, original)
        if found is None:
            entry["window"] = "no contraction"
        elif found[0].id in hand_windows:
            entry["window"] = "hand-written assert_contraction"
        elif accs:
            entry["window"] = f"synthesized: {accs[0][1]}"
        else:
            entry["window"] = "implied: every contracted coordinate in [0, extent) once"
        if syn is not None and spec_outputs is not None and name not in spec_outputs:
            entry["spec"] = "none (the reference names no such output)"
    return {
        "kernel": original.name,
        "outputs": outputs,
        "left_to_correctness": [
            "the arithmetic on the values (which ops combine them, rounding)",
            "entries marked 'correctness check' above",
        ],
    }


def strength_text(rep: dict[str, Any]) -> str:
    lines = [f"strength report for {rep['kernel']}:"]
    for name, o in rep["outputs"].items():
        lines.append(f"  {name} (store at line {o['line']}); window: {o['window']}")
        for r in o["reads"]:
            parts = [f"{d['coord']}: {', '.join(d['pinned_by'])}" for d in r["dims"]]
            lines.append(f"    {r['tensor']} (line {r['line']}): " + "; ".join(parts))
    lines.append("  left to the correctness check: " + "; ".join(rep["left_to_correctness"]))
    return "\n".join(lines)


__all__ = [
    "strength_report",
    "strength_text",
    "Mismatch",
    "SynthReport",
    "Synthesis",
    "Synthesized",
    "check",
    "check_modes",
    "kernel_modes",
    "with_scalars",
    "count_hand_written",
    "roles_of",
    "strip_hand_written",
    "synthesize",
]
