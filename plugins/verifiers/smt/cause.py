"""Causes of a counterexample: the backward slice of a failing assertion, over the kernel's
source, ranked.

The IR keeps one source line per op, but not where the scalar and mask arithmetic it
inlines was written (`hi = minimum(...)`, `mask = row < M - 1`, a program-id formula):
those are Python statements of the DSL kernel. So the slice is taken over the kernel's
source (`ast`): from the statement of the failing op, the statements that assign the
names it uses (the nearest assignment before it, and, inside a loop, the loop-carried
ones after it) and the loop headers it sits in, transitively.

Each statement of the slice is ranked by how likely it is the mistake for the kind of
assertion that failed (a coverage gap points at loop bounds and the scalars they use
first; an out-of-bounds access at its mask; a wrong coordinate at index formulas), then
by whether it does arithmetic with a small constant (the classic off-by-one), then by
distance from the failing statement. The specification ranks last: an assertion statement
itself, and what only its predicate (a lambda) uses. The source is only parsed (`ast`),
never run. Inside a helper, the statements calling it are sliced too (what it was given).
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field

from argus_core.ir import KernelIR, ProgramPoint

# categories of statements, most likely cause first, per assertion kind
_LIKELY: dict[str, tuple[str, ...]] = {
    "contraction_gap": ("loop", "scalar", "load", "use", "dot"),
    "contraction_once": ("loop", "scalar", "load", "use", "dot"),
    "contraction_start": ("init", "loop", "scalar", "use"),
    "bounds": ("mask", "use", "index", "scalar", "loop"),
    "store_cover": ("mask", "use", "index", "scalar", "loop"),
    "store_once": ("use", "index", "scalar", "loop", "mask"),
    "layout": ("view", "use", "index", "scalar"),
    "dot_contract": ("index", "view", "use", "load", "scalar", "loop"),
    "dot_operand": ("index", "view", "use", "load", "scalar", "loop"),
    # two operands of one op disagree: one of them was loaded from the wrong tile
    "elementwise_tag": ("load", "index", "view", "use", "scalar", "loop"),
    "rows_for": ("index", "scalar", "mask", "use", "view", "loop"),
}
_DEFAULT = ("use", "index", "scalar", "view", "loop", "init")

_LOADS = {"load", "tile", "gather", "load_scalar"}
_VIEWS = {"with_strides", "permute", "swizzle", "reshape", "trans"}
_INITS = {"zeros", "full"}


@dataclass
class _Stmt:
    node: ast.stmt
    first: int
    last: int
    defs: set[str]
    uses: set[str]
    mask_uses: set[str]
    spec_uses: set[str] = field(default_factory=set)  # names inside an assertion's lambda
    loops: list[_Stmt] = field(default_factory=list)  # enclosing loop headers, innermost last
    category: str = "scalar"
    off_by_small: bool = False  # arithmetic with a small integer constant
    arith: bool = False  # arithmetic, a comparison or a min/max in the statement


def _names(node: ast.AST | None) -> set[str]:
    if node is None:
        return set()
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _targets(node: ast.AST) -> set[str]:
    return {
        n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }


def _calls(node: ast.AST) -> set[str]:
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            f = n.func
            out.add(
                f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            )
    return out


def _small_offset(node: ast.AST) -> bool:
    """`x + 1`, `x - 1`, `k + 2`, `<= n`: arithmetic whose mistake is one step."""
    for n in ast.walk(node):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add | ast.Sub):
            for side in (n.left, n.right):
                if isinstance(side, ast.Constant) and side.value in (1, 2):
                    return True
        if isinstance(n, ast.Compare) and any(isinstance(o, ast.LtE | ast.GtE) for o in n.ops):
            return True
        if (  # range(1, n): a loop that starts one step late
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "range"
            and len(n.args) >= 2
            and isinstance(n.args[0], ast.Constant)
            and n.args[0].value in (1, 2)
        ):
            return True
    return False


def _arith(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.BinOp | ast.Compare)
        or (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr in ("minimum", "maximum")
        )
        for n in ast.walk(node)
    )


def _has_index_arith(node: ast.AST) -> bool:
    """A subscript (a tile index) with arithmetic inside it."""
    return any(isinstance(n, ast.Subscript) and _arith(n.slice) for n in ast.walk(node))


def _stmts(body: list[ast.stmt], loops: list[_Stmt], out: list[_Stmt]) -> None:
    for node in body:
        last = node.end_lineno or node.lineno
        if isinstance(node, ast.For):
            s = _Stmt(
                node,
                node.lineno,
                node.iter.end_lineno or node.lineno,
                _targets(node.target),
                _names(node.iter),
                set(),
                loops=list(loops),
                category="loop",
            )
            s.off_by_small, s.arith = _small_offset(node.iter), _arith(node.iter)
            out.append(s)
            _stmts(node.body, [*loops, s], out)
            continue
        if isinstance(node, ast.If | ast.While):
            s = _Stmt(
                node,
                node.lineno,
                node.test.end_lineno or node.lineno,
                set(),
                _names(node.test),
                set(),
                loops=list(loops),
                category="loop",
            )
            out.append(s)
            _stmts(node.body, [*loops, s], out)
            _stmts(node.orelse, [*loops, s], out)
            continue
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            continue
        value = getattr(node, "value", None)
        targets = (
            set().union(*(_targets(t) for t in getattr(node, "targets", [])))
            if isinstance(node, ast.Assign)
            else _targets(getattr(node, "target", ast.Pass()))
        )
        mask = set()
        for n in ast.walk(node):
            if isinstance(n, ast.Call):
                for kw in n.keywords:
                    if kw.arg in ("mask", "other"):
                        mask |= _names(kw.value)
        spec = set().union(*(_names(n.body) for n in ast.walk(node) if isinstance(n, ast.Lambda)))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            call = node.value
            name = call.func.attr if isinstance(call.func, ast.Attribute) else ""
            if name == "tag" and call.args:  # `tag(x, ...)` (re)defines x's tags
                targets = _names(call.args[0])
        # `acc = al.dot(x, y, acc)` reads the acc assigned before it (an earlier loop's):
        # an assignment uses every name its value reads, its own target included
        uses = _names(node) - (
            targets if not isinstance(node, ast.Assign | ast.AugAssign) else set()
        )
        if isinstance(node, ast.AugAssign):
            uses |= targets
        calls = _calls(value if value is not None else node)
        cat = (
            "view"
            if calls & _VIEWS
            else "init"
            if calls & _INITS
            else "load"
            if calls & _LOADS
            else "dot"
            if "dot" in calls
            else "scalar"
        )
        s = _Stmt(node, node.lineno, last, targets, uses, mask, spec, list(loops), cat)
        s.off_by_small, s.arith = _small_offset(node), _arith(node) or _has_index_arith(node)
        out.append(s)


@functools.lru_cache(maxsize=64)
def _function_statements(source: str) -> tuple[tuple[str, int, int, list[_Stmt]], ...]:
    """(name, first line, last line, statements) of every function of the module."""
    tree = ast.parse(source)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            stmts: list[_Stmt] = []
            _stmts(node.body, [], stmts)
            out.append((node.name, node.lineno, node.end_lineno or node.lineno, stmts))
    return tuple(out)


def _calls_to(s: _Stmt, name: str) -> bool:
    """Does statement `s` call function `name` (a loop or branch: in its header)?"""
    node = s.node
    if isinstance(node, ast.For):
        node = node.iter
    elif isinstance(node, ast.If | ast.While):
        node = node.test
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
        for n in ast.walk(node)
    )


def _is_assertion(node: ast.stmt) -> bool:
    """A statement that only states an invariant: `al.assert_tag(...)`, or an
    `al.expect(x, ...)` of a named tile (`return al.expect(mine, pred)` in a ghost helper;
    not `al.expect(al.load(...), ...)`, which also loads)."""
    call = getattr(node, "value", None)
    if not (isinstance(node, ast.Expr | ast.Return | ast.Assign) and isinstance(call, ast.Call)):
        return False
    f = call.func
    if not isinstance(f, ast.Attribute):
        return False
    if f.attr == "expect":
        return bool(call.args) and isinstance(call.args[0], ast.Name)
    return f.attr.startswith("assert")


def _outside_lambdas(node: ast.AST) -> set[str]:
    """Names a statement uses outside any lambda (the value it asserts about, not the
    assertion's predicate)."""
    inner = {id(n) for lam in ast.walk(node) if isinstance(lam, ast.Lambda) for n in ast.walk(lam)}
    return {
        n.id
        for n in ast.walk(node)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in inner
    }


def _slice(stmts: list[_Stmt], use: _Stmt) -> list[tuple[_Stmt, int, frozenset[str]]]:
    """(statement, distance, how it was reached) for everything `use` depends on; how:
    "mask" (through a mask), "loop" (through a loop's bounds), "spec" (only through the
    predicate of the failing assertion: the specification, trusted over the code). The
    code's slice is taken first, so a statement the value depends on is never "spec"."""
    seen: dict[int, tuple[_Stmt, int, frozenset[str]]] = {id(use): (use, 0, frozenset())}
    spec_only = use.spec_uses - _outside_lambdas(use.node)
    _bfs(stmts, use, seen, use.uses - spec_only, frozenset())
    _bfs(stmts, use, seen, spec_only, frozenset({"spec"}))
    return sorted(seen.values(), key=lambda t: t[1])


def _bfs(
    stmts: list[_Stmt],
    use: _Stmt,
    seen: dict[int, tuple[_Stmt, int, frozenset[str]]],
    names: set[str],
    start: frozenset[str],
) -> None:
    """Add to `seen` what `use`'s `names` depend on, transitively, reached `start`-ly."""
    frontier = [use]
    depth = 0
    while frontier:
        depth += 1
        nxt = []
        for s in frontier:
            how = start if s is use else seen[id(s)][2]
            if s.category == "loop" and s is not use:
                how = how | {"loop"}
            deps: list[tuple[_Stmt, frozenset[str]]] = (
                []
                if s is use and "spec" in start
                else [(h, how) for h in s.loops if h.category == "loop"]
            )
            inner = set(map(id, s.loops))
            for name in names if s is use else s.uses:
                via = how | {"mask"} if name in s.mask_uses else how
                before = [d for d in stmts if name in d.defs and d.first < s.first]
                if before:
                    near = max(before, key=lambda d: d.first)
                    deps.append((near, via))
                    # assigned inside a loop the use is not in: every assignment there
                    deps += [
                        (d, via)
                        for d in before
                        if d is not near
                        and near.loops
                        and d.loops == near.loops
                        and not set(map(id, d.loops)) & inner
                    ]
                deps += [  # loop-carried: assigned later in a loop the use is in
                    (d, via)
                    for d in stmts
                    if name in d.defs
                    and d.first >= s.first
                    and d is not s
                    and set(map(id, d.loops)) & inner
                ]
            for d, via in deps:
                if id(d) not in seen:
                    seen[id(d)] = (d, depth, via)
                    nxt.append(d)
        frontier = nxt


def _rank(
    stmts: list[_Stmt],
    use: _Stmt,
    assertion: str,
    lines: list[str],
    offset: int,
    as_use: bool = True,
) -> list[tuple[tuple, dict]]:
    """(sort key, row) for every statement of `use`'s slice; `offset` is added to the
    distance (a helper's call site is one step from the helper's statement)."""
    likely = _LIKELY.get(assertion, _DEFAULT)
    ranked = []
    for s, dist, how in _slice(stmts, use):
        cat = "use" if s is use and as_use else "mask" if "mask" in how else s.category
        if s is use and _is_assertion(s.node):  # a stated invariant: the spec, not the code
            how = how | {"spec"}
        if "loop" in how and cat == "scalar":  # feeds a loop's bounds
            cat = "loop"
        if cat == "init" and not s.loops:  # an accumulator's one initialization
            cat = "scalar"
        if cat in ("load", "scalar") and _has_index_arith(s.node):
            cat = "index"
        rank = likely.index(cat) if cat in likely else len(likely)
        if "spec" in how:  # the assertion's own predicate: trusted over the code
            rank += 2 * len(likely)
        exempt = ("loop", "init", "use", "view") + (("load",) if likely[0] == "load" else ())
        if not s.arith and cat not in exempt:
            rank += len(likely)  # plumbing: a name passed on
        dist += offset
        key = (rank, 0 if s.off_by_small else 1, dist, s.first)
        text = lines[s.first - 1].strip() if s.first <= len(lines) else ""
        row = {"line": s.first, "lines": [s.first, s.last], "kind": cat, "what": text[:80]}
        ranked.append((key, {**row, "distance": dist}))
    return ranked


def _rows_for_parts(node: ast.AST) -> tuple[ast.AST, str, ast.Lambda] | None:
    """(the `.rows(X)` row expression, the index tile's name, the spec lambda) of an
    `al.rows_for(al.load(t.rows(X)...), p, lambda q: ...)` in `node`."""
    for n in ast.walk(node):
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)):
            continue
        if n.func.attr != "rows_for" or len(n.args) != 3:
            continue
        value, index, spec = n.args
        if not (isinstance(index, ast.Name) and isinstance(spec, ast.Lambda)):
            continue
        rows = [
            c.args[0]
            for c in ast.walk(value)
            if isinstance(c, ast.Call)
            and isinstance(c.func, ast.Attribute)
            and c.func.attr == "rows"
            and c.args
        ]
        if rows and len(spec.args.args) == 1:
            return rows[0], index.id, spec
    return None


def _diff_causes(
    stmts: list[_Stmt], use: _Stmt, assertion: str, lines: list[str]
) -> list[tuple[tuple, dict]]:
    """For `rows_for`: the statement where the code's row expression, expanded through the
    assignments it reads, first departs from the spec lambda's (a stride, a tap offset, a
    row width): ranked first. [] when they agree or do not pair up."""
    if assertion != "rows_for":
        return []
    parts = _rows_for_parts(use.node)
    if parts is None:
        return []
    code, index, spec = parts
    param = spec.args.args[0].arg

    def definition(name: str, before: int) -> _Stmt | None:
        cands = [
            d
            for d in stmts
            if name in d.defs
            and d.first < before
            and isinstance(d.node, ast.Assign)
            and len(d.node.targets) == 1
            and isinstance(d.node.targets[0], ast.Name)
        ]
        return max(cands, key=lambda d: d.first) if cands else None

    def same(a: ast.AST, b: ast.AST) -> bool:
        return ast.dump(a) == ast.dump(b)

    def diff(c: ast.AST, sp: ast.AST, owner: _Stmt, depth: int = 0) -> _Stmt | None:
        if depth > 40:
            return None
        if isinstance(c, ast.Name) and isinstance(sp, ast.Name):
            if c.id == sp.id or (c.id == index and sp.id == param):
                return None
        if same(c, sp):
            return None
        if isinstance(c, ast.Name) and c.id != index:
            d = definition(c.id, owner.first if owner is not use else use.first)
            if d is not None:
                return diff(d.node.value, sp, d, depth + 1)
            return owner
        if type(c) is not type(sp):
            return owner
        if isinstance(c, ast.BinOp):
            if type(c.op) is not type(sp.op):
                return owner
            return diff(c.left, sp.left, owner, depth + 1) or diff(
                c.right, sp.right, owner, depth + 1
            )
        return owner  # a differing leaf (a constant, a shape)

    culprit = diff(code, spec.body, use)
    if culprit is None or culprit is use:
        return []
    text = lines[culprit.first - 1].strip() if culprit.first <= len(lines) else ""
    row = {
        "line": culprit.first,
        "lines": [culprit.first, culprit.last],
        "kind": "index",
        "what": text[:80],
        "distance": 0,
    }
    return [((-1, 0, 0, culprit.first), row)]


def causes(
    ir: KernelIR,
    assertion: str,
    point: ProgramPoint,
    limit: int = 10,
    origins: tuple[int, ...] | list[int] = (),
) -> list[dict]:
    """The ranked backward slice of `assertion` failing at `point`: [{"line", "lines",
    "what", "kind", "distance"}], most likely cause first; [] without the kernel's source
    or when `point` is not in it. Inside a helper, the helper's own slice and that of each
    statement calling it (the call sites: what the helper was given). `origins`: lines of
    the ops that made the failing value, as the verifier tracked them (a masked load whose
    `other` a reduction took): the statements holding them rank first, in that order."""
    if not ir.source or point.file != ir.file:
        return []
    try:
        funcs = _function_statements(ir.source)
    except SyntaxError:
        return []
    line = point.line
    found = [f for f in funcs if f[1] <= line <= f[2]]
    if not found:
        return []
    name, _first, _last, stmts = min(found, key=lambda f: f[2] - f[1])
    inside = [s for s in stmts if s.first <= line <= max(s.last, s.first)]
    if not inside:
        return []
    lines = ir.source.splitlines()
    use = min(inside, key=lambda s: s.last - s.first)
    ranked = _rank(stmts, use, assertion, lines, 0)
    roots = [(name, stmts, use, 0)]
    for other, _f, _l, body in funcs:
        if other == name:
            continue
        for s in body:
            if _calls_to(s, name):  # a call site: slice what it passes
                ranked += _rank(body, s, assertion, lines, 1)
                roots.append((other, body, s, 1))
    # a helper a slice calls (`x, y = k_tiles(...)`, `hk = kv_head_of(...)` at a call
    # site): what it returns, sliced inside it
    for owner, body0, root, offset in roots:
        sliced = _slice(body0, root)
        for other, _f, _l, body in funcs:
            if other in (name, owner):
                continue
            returns = [  # not a helper returning a predicate (a ghost assertion's spec)
                r
                for r in body
                if isinstance(r.node, ast.Return)
                and r.node.value is not None
                and not isinstance(r.node.value, ast.Lambda)
                and not _is_assertion(r.node)
            ]
            for s, dist, _how in sliced:
                if returns and _calls_to(s, other):
                    for r in returns:
                        ranked += _rank(body, r, assertion, lines, dist + offset + 1, as_use=False)
                    break
    if use.category != "loop":  # the failing statement's own mistakes: rows_for's index
        ranked += _diff_causes(stmts, use, assertion, lines)
    first = list(origins)
    ranked = [
        (
            next(
                (
                    (-2, n, *key[1:])
                    for n, o in enumerate(first)
                    if row["lines"][0] <= o <= row["lines"][1]
                ),
                key,
            ),
            row,
        )
        for key, row in ranked
    ]
    best: dict[int, tuple[tuple, dict]] = {}
    for key, row in ranked:  # one entry per statement, its best rank
        if row["line"] not in best or key < best[row["line"]][0]:
            best[row["line"]] = (key, row)
    out = sorted(best.values(), key=lambda t: t[0])
    return [row for _k, row in out[:limit]]


__all__ = ["causes"]
