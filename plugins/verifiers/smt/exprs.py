"""IR expression helpers every layer of the verifier uses (the bottom layer: it imports
only `argus_core.ir`).

Program copies: a query that relates two programs (or elements, or iterations) names the
second copy's per-program symbols with a suffix (`pid_m'`); `rename` makes that copy of an
expression, `split_suffix` recovers the base name. Data reads (`DataRead`) are symbols too,
so renaming reaches their index arguments and two copies read different rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from argus_core.ir import Expr, IntLike, Sym, as_expr
from argus_core.ir.expr import BinOp, BoolOp, Call, Cmp, Select, binop, call
from argus_core.ir.tags import DataRead

PER_PROGRAM_KINDS = ("pid", "loop", "elem", "scalar")
PROGRAM_ID = "program_id_0"


def sub(e: IntLike, mapping: dict[Sym, IntLike]) -> IntLike:
    """`e` with symbols replaced simultaneously (ints pass through)."""
    return e.subs(mapping) if isinstance(e, Expr) else e


def split_suffix(name: str) -> tuple[str, str]:
    """('pid_m', "'") for "pid_m'"; suffixes start with ', # or %."""
    for i, ch in enumerate(name):
        if ch in "'#%":
            return name[:i], name[i:]
    return name, ""


def rename(e: IntLike, suffix: str) -> IntLike:
    """`e` in another copy of the program: per-program symbols get `suffix`."""
    if not suffix or not isinstance(e, Expr):
        return e
    return e.map(lambda s: Sym(s.name + suffix, s.kind) if s.kind in PER_PROGRAM_KINDS else s)


def rewrite(e: IntLike, fn: Callable[[Expr], Expr]) -> IntLike:
    """`e` rebuilt bottom-up with `fn` applied to every node (`fn` returns the node or a
    replacement)."""
    if not isinstance(e, Expr):
        return e
    if isinstance(e, BinOp):
        e = as_expr(binop(e.op, rewrite(e.a, fn), rewrite(e.b, fn)))
    elif isinstance(e, Call):
        e = as_expr(call(e.fn, *[rewrite(a, fn) for a in e.args]))
    elif isinstance(e, Cmp):
        e = Cmp(e.op, as_expr(rewrite(e.a, fn)), as_expr(rewrite(e.b, fn)))
    elif isinstance(e, BoolOp):
        e = BoolOp(e.op, tuple(as_expr(rewrite(a, fn)) for a in e.args))
    elif isinstance(e, Select):
        e = Select(*(as_expr(rewrite(x, fn)) for x in (e.cond, e.a, e.b)))
    return fn(e)


def any_ne(ls: Iterable[IntLike], rs: Iterable[IntLike]) -> Expr:
    """Some entry of `ls` differs from its partner in `rs`."""
    terms = [as_expr(a).ne(b) for a, b in zip(ls, rs)]
    return terms[0] if len(terms) == 1 else BoolOp("or", tuple(terms))


def lor(*ps: IntLike) -> Expr:
    return BoolOp("or", tuple(as_expr(p) for p in ps))


def same(ls: Iterable[IntLike], rs: Iterable[IntLike]) -> bool:
    """The two sides are syntactically equal, entry by entry (a proof without z3)."""
    return all(as_expr(a) == as_expr(b) for a, b in zip(ls, rs))


def reads(exprs: Iterable[IntLike]) -> list[DataRead]:
    """Every data read in `exprs` (index arguments included), each once, in order."""
    out: dict[str, DataRead] = {}
    stack = [e for e in exprs if isinstance(e, Expr)]
    seen: set[int] = set()  # shared subexpressions are walked once (the list keeps them)
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, DataRead):
            out.setdefault(e.name, e)
        stack.extend(e.children())
    return list(out.values())


def is_data(e: IntLike) -> bool:
    """`e` depends on data (reads memory)."""
    return isinstance(e, Expr) and bool(reads([e]))


__all__ = [
    "PER_PROGRAM_KINDS",
    "PROGRAM_ID",
    "any_ne",
    "is_data",
    "lor",
    "reads",
    "rename",
    "rewrite",
    "same",
    "split_suffix",
    "sub",
]
