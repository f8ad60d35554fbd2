"""Lowering of the tile-level IR to readable Triton source (`triton.language`).

Tags and tag assertions never reach this module's output: only data-flow ops are printed,
so the lowered source of a kernel is the same with and without its invariants. Each emitted
statement carries a comment with the DSL line it came from.
"""

from __future__ import annotations

import os
from typing import Any

from argus_core.errors import DSLError
from argus_core.ir import (
    Cast,
    Dot,
    Elementwise,
    ExpandDims,
    Full,
    KernelIR,
    Let,
    Load,
    LoadScalar,
    Loop,
    Op,
    Reduce,
    Scan,
    Store,
    Sym,
    TileElem,
    Value,
    View,
    Zeros,
    to_source,
)
from argus_core.types import LoweredKernel, Param, Policy

TL_DTYPES = {
    "f32": "tl.float32",
    "f16": "tl.float16",
    "bf16": "tl.bfloat16",
    "i32": "tl.int32",
    "i1": "tl.int1",
}

_UNARY = {
    "exp": "tl.exp",
    "exp2": "tl.exp2",
    "log": "tl.log",
    "log2": "tl.log2",
    "sqrt": "tl.sqrt",
    "abs": "tl.abs",
    "sigmoid": "tl.sigmoid",
}
_BINARY = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "div": "/",
    "floordiv": "//",
    "mod": "%",
    "and": "&",
    "or": "|",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
    "eq": "==",
    "ne": "!=",
}
_CALL2 = {"minimum": "tl.minimum", "maximum": "tl.maximum"}
_REDUCE = {"sum": "tl.sum", "max": "tl.max", "min": "tl.min"}


def dtype_expr(dtype: str) -> str:
    if dtype.startswith("like:"):
        return f"{dtype[5:]}.dtype.element_ty"
    return TL_DTYPES[dtype]


def params_of(ir: KernelIR) -> list[Param]:
    """Kernel parameters in launch order: tensors, shape symbols, strides, constexprs."""
    params = [Param(t.name, "ptr", ("tensor", t.name)) for t in ir.tensors]
    for s in ir.shape_syms:
        t, d = ir.shape_bindings[s.name]
        params.append(Param(s.name, "int", ("shape", t, d), "i32"))
    for t in ir.tensors:
        for d, s in enumerate(t.strides):
            params.append(Param(s.name, "int", ("stride", t.name, d), "i32"))
    for sym, dt in ir.scalars:
        params.append(Param(sym.name, "int" if dt == "i32" else "float", ("scalar", sym.name), dt))
    for c in ir.constexprs:
        params.append(Param(c.name, "constexpr", ("const", c.name)))
    return params


class _Emitter:
    def __init__(self, ir: KernelIR, options: dict[str, Any]):
        self.ir = ir
        self.options = options
        self.lines: list[str] = []
        self.names: dict[int, str] = {}
        self.used: set[str] = {p.name for p in params_of(ir)} | {"tl", "triton"}
        self.last_line: int | None = None
        # how many ops (or loops, as carried inits) read each tile: a loop may take over the
        # name of its entering value only if nothing else reads that value
        self.uses: dict[int, int] = {}
        for op in ir.walk():
            reads = op.operands() + ([c.init for c in op.carried] if isinstance(op, Loop) else [])
            for v in {id(v): v for v in reads}.values():
                self.uses[v.id] = self.uses.get(v.id, 0) + 1

    # names ---------------------------------------------------------------------------
    def name(self, v: Value) -> str:
        if v.id not in self.names:
            # unnamed tiles are numbered per kernel, never by global id (stable golden files)
            base = v.name or f"t{len(self.names)}"
            n, k = base, 1
            while n in self.used:
                n = f"{base}_{k}"
                k += 1
            self.used.add(n)
            self.names[v.id] = n
        return self.names[v.id]

    def fresh(self, base: str) -> str:
        n, k = base, 1
        while n in self.used:
            n = f"{base}_{k}"
            k += 1
        self.used.add(n)
        return n

    def alias(self, v: Value, name: str) -> None:
        self.names[v.id] = name
        self.used.add(name)

    # expressions ---------------------------------------------------------------------
    def expr(self, e: Any, shape: tuple | None = None) -> str:
        """Source of a scalar or element-indexed expression. Element symbols of a tile of
        `shape` become broadcast aranges."""
        rank = len(shape) if shape else 0

        def name_of(s: Sym) -> str:
            if s.kind == "elem":
                axis = int(s.name[2:])
                if shape is None or axis >= rank:
                    raise DSLError(f"element index {s.name} used outside a tile of rank > {axis}")
                ar = f"tl.arange(0, {self.expr(shape[axis])})"
                if rank == 1:
                    return ar
                idx = ", ".join(":" if d == axis else "None" for d in range(rank))
                return f"{ar}[{idx}]"
            if s.name == "program_id_0":
                return "tl.program_id(0)"
            if isinstance(s, TileElem):
                name = self.name(s.value)
                if s.axis is None or rank <= 1:
                    return name
                idx = ", ".join(":" if d == s.axis else "None" for d in range(rank))
                return f"{name}[{idx}]"
            return s.name

        return to_source(e, name_of, {"min": "tl.minimum", "max": "tl.maximum", "cdiv": "tl.cdiv"})

    def operand(self, a: Any, shape: tuple | None = None) -> str:
        if isinstance(a, Value):
            return self.name(a)
        if isinstance(a, float):
            return _float(a)
        text = self.expr(a, shape)  # may hold element indices of the result tile
        return text if isinstance(a, int | Sym) else f"({text})"

    def pointer(self, view: View) -> str:
        return f"{view.tensor.name} + ({self.expr(view.offset, view.shape)})"

    # statements ----------------------------------------------------------------------
    def emit(self, indent: int, text: str, op: Op | None = None, note: str = "") -> None:
        comment = ""
        if op is not None and op.point.line != self.last_line:
            comment = f"  # L{op.point.line} {op.point.op}"
            self.last_line = op.point.line
        if note:
            comment = (comment or "  #") + f" {note}"
        self.lines.append("    " * indent + text + comment)

    def ops(self, ops: list[Op], indent: int) -> None:
        for op in ops:
            self.op(op, indent)

    def op(self, op: Op, ind: int) -> None:
        if getattr(op, "erased", False):
            return  # tags and tag assertions exist for the verifier only
        if isinstance(op, Let):
            self.emit(ind, f"{op.sym.name} = {self.expr(op.expr)}", op)
        elif isinstance(op, Zeros):
            self.emit(
                ind,
                f"{self.name(op.out)} = tl.zeros({self.shape(op.out)}, dtype={dtype_expr(op.out.dtype)})",
                op,
            )
        elif isinstance(op, Full):
            self.emit(
                ind,
                f"{self.name(op.out)} = tl.full({self.shape(op.out)}, {_float(op.value)}, dtype={dtype_expr(op.out.dtype)})",
                op,
            )
        elif isinstance(op, Load):
            mask = (
                f", mask={self.expr(op.mask, op.view.shape)}, other={_float(op.other)}"
                if op.mask is not None
                else ""
            )
            self.emit(
                ind,
                f"{self.name(op.out)} = tl.load({self.pointer(op.view)}{mask})",
                op,
                op.view.desc,
            )
        elif isinstance(op, Store):
            mask = f", mask={self.expr(op.mask, op.view.shape)}" if op.mask is not None else ""
            fn = "tl.atomic_add" if op.kind == "atomic_add" else "tl.store"  # AtomicAdd is a Store
            self.emit(
                ind, f"{fn}({self.pointer(op.view)}, {self.name(op.value)}{mask})", op, op.view.desc
            )
        elif isinstance(op, Dot):
            a, b = self.name(op.a), self.name(op.b)
            if self.options.get("dot_upcast_fp32"):
                a, b = f"{a}.to(tl.float32)", f"{b}.to(tl.float32)"
            acc = f", {self.name(op.acc)}" if op.acc is not None else ""
            prec = self.options.get("dot_input_precision")  # "ieee": no TF32 for fp32 operands
            if prec:
                acc += f", input_precision={prec!r}"
            self.emit(ind, f"{self.name(op.out)} = tl.dot({a}, {b}{acc})", op)
        elif isinstance(op, Cast):
            self.emit(
                ind, f"{self.name(op.out)} = {self.name(op.x)}.to({dtype_expr(op.out.dtype)})", op
            )
        elif isinstance(op, Elementwise):
            self.emit(ind, f"{self.name(op.out)} = {self.elementwise(op)}", op)
        elif isinstance(op, LoadScalar):
            self.emit(
                ind, f"{op.sym.name} = tl.load({op.tensor.name} + ({self.expr(op.offset)}))", op
            )
        elif isinstance(op, Scan):
            self.emit(
                ind, f"{self.name(op.out)} = tl.cumsum({self.name(op.x)}, axis={op.axis})", op
            )
        elif isinstance(op, ExpandDims):
            idx = ", ".join("None" if d == op.axis else ":" for d in range(len(op.out.shape)))
            self.emit(ind, f"{self.name(op.out)} = {self.name(op.x)}[{idx}]", op)
        elif isinstance(op, Reduce):
            self.emit(
                ind,
                f"{self.name(op.out)} = {_REDUCE[op.fn]}({self.name(op.x)}, axis={op.axis})",
                op,
            )
        elif isinstance(op, Loop):
            self.loop(op, ind)
        else:
            raise DSLError(f"the triton lowering has no rule for op {op.kind!r}", str(op.point))

    def shape(self, v: Value) -> str:
        return (
            "("
            + ", ".join(self.expr(s) for s in v.shape)
            + ("," if len(v.shape) == 1 else "")
            + ")"
        )

    def elementwise(self, op: Elementwise) -> str:
        args = [self.operand(a, op.out.shape) for a in op.args]
        if op.fn in _BINARY:
            return f"{args[0]} {_BINARY[op.fn]} {args[1]}"
        if op.fn in _UNARY:
            return f"{_UNARY[op.fn]}({args[0]})"
        if op.fn in _CALL2:
            return f"{_CALL2[op.fn]}({args[0]}, {args[1]})"
        if op.fn == "neg":
            return f"-{args[0]}"
        if op.fn == "where":
            return f"tl.where({args[0]}, {args[1]}, {args[2]})"
        raise DSLError(f"the triton lowering has no rule for elementwise {op.fn!r}", str(op.point))

    def loop(self, op: Loop, ind: int) -> None:
        # one Python name per carried value: init, iteration argument, yield and result
        uses_after_yield = _uses_after_definition(
            op.body, {id(c.arg) for c in op.carried}, {id(c.yielded) for c in op.carried}
        )
        for c in op.carried:
            init = self.name(c.init)
            if self.uses.get(c.init.id, 0) > 1 or (c.result.name and c.result.name != init):
                # the entering value lives on elsewhere (or is another variable): copy it
                name = self.fresh(c.result.name or init)
                self.emit(ind, f"{name} = {init}")
            else:
                name = init
            self.alias(c.arg, name)
            self.alias(c.result, name)
            if uses_after_yield:
                self.name(c.yielded)
            else:
                self.alias(c.yielded, name)
        rng = f"{self.expr(op.start)}, {self.expr(op.stop)}" + (
            f", {self.expr(op.step)}" if op.step != 1 else ""
        )
        self.emit(ind, f"for {op.var.name} in range({rng}):", op)
        self.last_line = None
        self.ops(op.body, ind + 1)
        for c in op.carried:
            if self.name(c.yielded) != self.name(c.arg):
                self.emit(ind + 1, f"{self.name(c.arg)} = {self.name(c.yielded)}")
        if not op.body:
            self.emit(ind + 1, "pass")


def _float(x: float) -> str:
    """A float literal Triton's JIT accepts, infinities and NaN included."""
    if x != x:
        return 'float("nan")'
    if x in (float("inf"), float("-inf")):
        return 'float("inf")' if x > 0 else 'float("-inf")'
    return repr(x)


def _uses_after_definition(body: list[Op], args: set[int], yields: set[int]) -> bool:
    """True if some op reads a carried argument after that iteration's new value was made."""
    seen_yield = False
    for op in body:
        if seen_yield and any(id(v) in args for v in op.operands()):
            return True
        if op.result is not None and id(op.result) in yields:
            seen_yield = True
    return False


def lower(
    ir: KernelIR, policy: Policy | None = None, options: dict[str, Any] | None = None
) -> LoweredKernel:
    """Triton source for `ir`. The policy's tiles must bind every constexpr of the kernel."""
    options = options or {}
    params = params_of(ir)
    constexprs: dict[str, int] = {}
    if policy is not None:
        missing = [c.name for c in ir.constexprs if c.name not in policy.tiles]
        extra = [k for k in policy.tiles if k not in {c.name for c in ir.constexprs}]
        if missing or extra:
            raise DSLError(
                f"policy tiles {sorted(policy.tiles)} do not match kernel {ir.name!r} constexprs "
                f"{[c.name for c in ir.constexprs]} (missing {missing}, unknown {extra})"
            )
        constexprs = {c.name: int(policy.tiles[c.name]) for c in ir.constexprs}
    em = _Emitter(ir, options)
    em.ops(ir.ops, 1)
    sig = ", ".join(p.name + (": tl.constexpr" if p.kind == "constexpr" else "") for p in params)
    header = [
        f"# Lowered by Argus from {os.path.basename(ir.file)} (kernel {ir.name!r}); do not edit.",
        "import triton",
        "import triton.language as tl",
        "",
        "",
        "@triton.jit",
        f"def {ir.name}({sig}):",
    ]
    grid = "(" + ", ".join(to_source(g, None, {"cdiv": "triton.cdiv"}) for g in ir.grid) + ",)"
    return LoweredKernel(
        name=ir.name,
        source="\n".join(header + em.lines) + "\n",
        params=params,
        grid=grid,
        outputs=list(ir.written),
        constexprs=constexprs,
    )


__all__ = ["dtype_expr", "lower", "params_of"]
