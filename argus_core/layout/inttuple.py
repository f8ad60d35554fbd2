"""Hierarchical integer tuples: the shapes, strides and coordinates of layouts.

An int tuple is an integer or a tuple of int tuples. An "integer" is anything with integer
arithmetic: a Python int, a symbolic `argus_core.ir.expr.Expr`, or a z3 arithmetic term, so
one function computes concrete indices, printable symbolic ones, and SMT terms. Only integer
division differs among them (`//` versus z3's `/`), hence `floordiv`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce
from typing import Any, TypeAlias

from argus_core.ir.expr import Expr, cdiv

# z3 terms are admitted too; they are typed as Any to keep z3 out of the import graph
Int: TypeAlias = int | Expr | Any
IntTuple: TypeAlias = Int | tuple["IntTuple", ...]


class LayoutError(ValueError):
    """A layout operation got arguments it is not defined for (the message names them)."""


def is_tuple(x: object) -> bool:
    return isinstance(x, tuple)


def is_int(x: object) -> bool:
    """True for a leaf of an int tuple: an int, an Expr, or a z3 term."""
    return not isinstance(x, tuple)


def is_concrete(x: object) -> bool:
    """True if `x` is a Python int (bools excluded) or a tuple of them."""
    if isinstance(x, tuple):
        return all(is_concrete(v) for v in x)
    return isinstance(x, int) and not isinstance(x, bool)


def _is_z3(x: object) -> bool:
    # checked by module so that z3 is imported only by callers who use it
    return type(x).__module__.startswith("z3")


def is_bitvec(x: object) -> bool:
    """True for a z3 bit-vector term."""
    return _is_z3(x) and x.sort().kind() == __import__("z3").Z3_BV_SORT


def floordiv(a: Int, b: Int) -> Int:
    """`a // b` for non-negative operands, for ints, Exprs and z3 terms (Int or bit-vector)."""
    if is_bitvec(a) or is_bitvec(b):
        import z3

        return z3.UDiv(a, b)
    if _is_z3(a) or _is_z3(b):
        return a / b  # z3 Int division is floor division for positive divisors
    return a // b


def mod(a: Int, b: Int) -> Int:
    """`a % b` for non-negative operands, for ints, Exprs and z3 terms (Int or bit-vector)."""
    if is_bitvec(a) or is_bitvec(b):
        import z3

        return z3.URem(a, b)
    return a % b


def ceildiv(a: Int, b: Int) -> Int:
    """Smallest q with q*b >= a (a >= 0, b > 0)."""
    if isinstance(a, Expr) or isinstance(b, Expr):
        return cdiv(a, b)
    if _is_z3(a) or _is_z3(b):
        return floordiv(a + b - 1, b)
    return -(-a // b)


def flatten(t: IntTuple) -> tuple[Int, ...]:
    """The leaves of `t`, left to right; an int becomes a 1-tuple."""
    if is_tuple(t):
        return tuple(leaf for sub in t for leaf in flatten(sub))
    return (t,)


def product(t: IntTuple) -> Int:
    """Product of all leaves (1 for an empty tuple)."""
    if is_tuple(t):
        return reduce(lambda acc, v: acc * product(v), t, 1)
    return t


def inner_product(a: IntTuple, b: IntTuple) -> Int:
    """Sum of leafwise products of two congruent int tuples."""
    if is_tuple(a):
        _require_same_rank(a, b, "inner_product")
        return reduce(lambda acc, xy: acc + inner_product(*xy), zip(a, b), 0)
    return a * b


def prefix_product(t: IntTuple, init: IntTuple = 1) -> IntTuple:
    """Exclusive prefix products of `t`, congruent to `t`: the column-major strides."""
    if is_tuple(t):
        if is_tuple(init):
            _require_same_rank(t, init, "prefix_product")
            return tuple(prefix_product(v, i) for v, i in zip(t, init))
        out = []
        for v in t:
            out.append(prefix_product(v, init))
            init = init * product(v)
        return tuple(out)
    if is_tuple(init):
        raise LayoutError(f"prefix_product: init {init!r} is a tuple but the shape {t!r} is not")
    return init


def divides(d: Int, n: Int) -> bool:
    """True if `d` divides `n`. Symbolic values are decided only in the trivial cases
    (d == 1, d == n); anything else raises, since guessing would give a wrong layout."""
    if is_concrete(d) and is_concrete(n):
        return d != 0 and n % d == 0
    if same(d, 1) or same(d, n):
        return True
    raise LayoutError(
        f"cannot decide symbolically whether {d!r} divides {n!r}; use concrete values"
    )


def shape_div(a: IntTuple, b: IntTuple) -> IntTuple:
    """Divide shape `a` by `b` from the left: modes of `a` are consumed by `b` in order.

    Promises `product(shape_div(a, b)) == product(a) // product(b)` when each step divides
    one way or the other (either the mode divides the rest of `b`, or the reverse)."""
    if is_tuple(a):
        if is_tuple(b):
            _require_same_rank(a, b, "shape_div")
            return tuple(shape_div(x, y) for x, y in zip(a, b))
        out = []
        for v in a:
            out.append(shape_div(v, b))
            b = shape_div(b, product(v))
        return tuple(out)
    if is_tuple(b):
        return shape_div(a, product(b))
    if divides(b, a):
        return floordiv(a, b)
    if divides(a, b):
        return 1
    raise LayoutError(f"shape_div: neither of {a!r} and {b!r} divides the other")


def elem_scale(a: IntTuple, b: IntTuple) -> IntTuple:
    """Scale each leaf of `a` by the matching mode of `b` (a whole mode counts as its product)."""
    if is_tuple(a):
        _require_same_rank(a, b, "elem_scale")
        return tuple(elem_scale(x, y) for x, y in zip(a, b))
    return a * product(b)


def congruent(a: IntTuple, b: IntTuple) -> bool:
    """True if `a` and `b` have the same hierarchical profile."""
    if is_tuple(a) and is_tuple(b):
        return len(a) == len(b) and all(congruent(x, y) for x, y in zip(a, b))
    return not is_tuple(a) and not is_tuple(b)


def crd2idx(crd: IntTuple, shape: IntTuple, stride: IntTuple | None = None) -> Int:
    """Offset of coordinate `crd` in `shape` with `stride` (default: column-major).

    `crd` may be hierarchical like `shape`, or an integer at any level: an integer for a
    tuple mode is split column-major over its sub-modes, the last taking the remainder
    (so indices past the size extend the last mode rather than wrapping)."""
    if stride is None:
        stride = prefix_product(shape)
    if is_tuple(crd):
        if not is_tuple(shape) or len(crd) != len(shape):
            raise LayoutError(f"coordinate {crd!r} does not match shape {shape!r}")
        return reduce(lambda acc, x: acc + crd2idx(*x), zip(crd, shape, stride), 0)
    if is_tuple(shape):
        if len(shape) == 0:
            return 0
        result: Int = 0
        for s, d in zip(shape[:-1], stride[:-1]):
            n = product(s)
            result = result + crd2idx(mod(crd, n), s, d)
            crd = floordiv(crd, n)
        return result + crd2idx(crd, shape[-1], stride[-1])
    return crd * stride


def idx2crd(idx: IntTuple, shape: IntTuple, stride: IntTuple | None = None) -> IntTuple:
    """The coordinate of `idx` in `shape` under `stride` (default column-major), congruent
    to `shape`: each leaf is `(idx // stride) % extent`."""
    if stride is None:
        stride = prefix_product(shape)
    if is_tuple(idx):
        _require_same_rank(idx, shape, "idx2crd")
        return tuple(idx2crd(i, s, d) for i, s, d in zip(idx, shape, stride))
    if is_tuple(shape):
        return tuple(idx2crd(idx, s, d) for s, d in zip(shape, stride))
    return mod(floordiv(idx, stride), shape)


def transform_leaves(f: Callable[[Int], Int], t: IntTuple) -> IntTuple:
    """`t` with `f` applied to every leaf."""
    if is_tuple(t):
        return tuple(transform_leaves(f, v) for v in t)
    return f(t)


def coalesce_ok(prev: tuple[Int, Int], stride: Int) -> bool:
    """True if a mode of stride `stride` continues the mode `prev` = (shape, stride)."""
    return same(prev[0] * prev[1], stride)


def same(a: object, b: object) -> bool:
    # structural equality for Exprs and ints; never asks z3 for a truth value
    if _is_z3(a) or _is_z3(b):
        return _is_z3(a) and _is_z3(b) and a.eq(b)
    if isinstance(a, Expr) or isinstance(b, Expr):
        return type(a) is type(b) and a == b
    return a == b


def _require_same_rank(a: tuple, b: object, what: str) -> None:
    if not is_tuple(b) or len(a) != len(b):
        raise LayoutError(f"{what}: {a!r} and {b!r} must be tuples of the same rank")
