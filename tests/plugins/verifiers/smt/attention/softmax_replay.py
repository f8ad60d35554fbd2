"""Numerical replay of a softmax counterexample: run the kernel's IR in NumPy for the
counterexample's program (shapes, program id, causal flag) with random tiles for its
loads, and compare the o and lse it stores with the softmax of the very score blocks it
computed (and the V blocks it multiplied). A bug in the running max/sum makes them differ;
the correct kernel matches (tested), so the replay can fail."""

from __future__ import annotations

import numpy as np

from argus_core.ir import (
    Cast,
    Dot,
    Elementwise,
    ExpandDims,
    Expr,
    Full,
    KernelIR,
    Load,
    Loop,
    Reduce,
    Store,
    Value,
    Zeros,
    elem_sym,
)
from argus_core.types import Policy

LN2 = 0.6931471805599453
_FN = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "maximum": np.maximum,
    "exp2": np.exp2,
    "log2": np.log2,
}


class RowRun:
    """Executes `ir` for one program; records the score blocks (the `where`-masked tile
    that `max` reduces), the V blocks of P·V, and the stored tiles."""

    def __init__(self, ir: KernelIR, pol: Policy, env: dict[str, int], seed: int = 0):
        self.ir, self.env = ir, dict(env)
        self.rng = np.random.default_rng(seed)
        self.vals: dict[int, np.ndarray] = {}
        self.scores: list[np.ndarray] = []
        self.vblocks: list[np.ndarray] = []
        self.stored: dict[str, np.ndarray] = {}
        self.tiles = pol.tiles
        self.reduced = {op.x.id for op in ir.walk() if isinstance(op, Reduce) and op.fn == "max"}

    def shape(self, v: Value) -> tuple[int, ...]:
        return tuple(s if isinstance(s, int) else self.tiles[s.name] for s in v.shape)

    def arg(self, a, shape):
        if isinstance(a, Value):
            return self.vals[a.id]
        if isinstance(a, Expr) and not a.symbols():
            return float(a.evaluate({}))
        if isinstance(a, Expr):  # a scalar kernel argument (scale) or an element guard
            if not any(s.name.startswith("_i") for s in a.symbols()):
                return 1.0
            return self.guard(a, shape)
        return float(a)

    def guard(self, e: Expr, shape) -> np.ndarray:
        out = np.zeros(shape, dtype=bool)
        for idx in np.ndindex(*shape):
            env = {**self.env, **{elem_sym(d).name: i for d, i in enumerate(idx)}}
            out[idx] = bool(e.evaluate(env))
        return out

    def run(self, ops) -> RowRun:
        with np.errstate(all="ignore"):
            for op in ops:
                self.op(op)
        return self

    def op(self, op) -> None:
        if isinstance(op, Load):
            self.vals[op.out.id] = self.rng.standard_normal(self.shape(op.out))
        elif isinstance(op, Full):
            self.vals[op.out.id] = np.full(self.shape(op.out), op.value)
        elif isinstance(op, Zeros):
            self.vals[op.out.id] = np.zeros(self.shape(op.out))
        elif isinstance(op, Cast):
            self.vals[op.out.id] = self.vals[op.x.id]
        elif isinstance(op, ExpandDims):
            self.vals[op.out.id] = np.expand_dims(self.vals[op.x.id], op.axis)
        elif isinstance(op, Reduce):
            fn = {"max": np.max, "sum": np.sum}[op.fn]
            self.vals[op.out.id] = fn(self.vals[op.x.id], axis=op.axis)
        elif isinstance(op, Dot):
            a, b = self.vals[op.a.id], self.vals[op.b.id]
            v_loads = {
                o.out.id
                for o in self.ir.walk()
                if isinstance(o, Load) and o.view.tensor.name == "v"
            }
            if op.b.id in v_loads:
                self.vblocks.append(b)  # P·V: its right operand is a block of V
            out = a @ b
            self.vals[op.out.id] = out if op.acc is None else out + self.vals[op.acc.id]
            if op.out.id in self.reduced:  # an unmasked block's scores are the dot itself
                self.scores.append(self.vals[op.out.id])
        elif isinstance(op, Elementwise):
            self.elementwise(op)
        elif isinstance(op, Loop):
            start, stop = (
                b if isinstance(b, int) else b.evaluate(self.env) for b in (op.start, op.stop)
            )
            for c in op.carried:
                self.vals[c.arg.id] = self.vals[c.init.id]
            for n in range(start, stop):
                self.env[op.var.name] = n
                self.run(op.body)
                for c in op.carried:
                    self.vals[c.arg.id] = self.vals[c.yielded.id]
            for c in op.carried:
                self.vals[c.result.id] = self.vals[c.arg.id]
        elif isinstance(op, Store):
            self.stored[op.view.tensor.name] = self.vals[op.value.id]

    def elementwise(self, op: Elementwise) -> None:
        shape = self.shape(op.out)
        if op.fn == "where":
            pred, a, b = (self.arg(x, shape) for x in op.args)
            out = np.where(pred, a, b)
        else:
            out = _FN[op.fn](*(self.arg(x, shape) for x in op.args))
        self.vals[op.out.id] = out
        if op.out.id in self.reduced:
            self.scores.append(out)


def softmax_error(ir: KernelIR, pol: Policy, env: dict[str, int], row: int) -> float:
    """Largest difference between the o row / lse the kernel stores at tile row `row` and
    the softmax of the score blocks it computed (base 2, as the kernel's scores are)."""
    r = RowRun(ir, pol, env).run(ir.ops)
    s = np.concatenate([blk[row] for blk in r.scores])
    v = np.concatenate(r.vblocks)
    live = np.isfinite(s)
    w = np.exp2(s[live] - s[live].max())
    o_ref = (w / w.sum()) @ v[live]
    lse_ref = (s[live].max() + np.log2(w.sum())) * LN2
    o, lse = r.stored["o"][row], r.stored["lse"][row]
    err = max(float(np.max(np.abs(o - o_ref))), abs(float(lse) - lse_ref))
    return err if np.isfinite(err) else float("inf")
