"""The generic Triton lowering: tile IR to readable `triton.language` source.

Triton is the substrate every built-in target compiles through, so its rules exist once,
here: one rule per IR op in `TRITON_RULES`. A target extends the table with its own rules
(Hopper's TMA loads and stores, warp-specialized loops and persistent grid; the
interpreter's fp32 dot operands) and lowers with `TritonLowering`.

Tags and tag assertions (ghost ops) have rules that write nothing, so the lowered source of
a kernel is the same with and without its invariants. Each emitted statement carries a
comment with the DSL line it came from. An fp32 run (`options["dtype"] == "fp32"`) gets
`input_precision="ieee"` dots: NVIDIA's default for fp32 `tl.dot` is TF32 (~1e-3 off),
which fp32 tolerances reject; `options["fp32_dot"]` (`kernel.fp32_dot`) picks a split form
instead ("tf32x3", "bf16x6": fp32's accuracy on matrix cores). Offsets are int32 unless
`options["offsets"] == "i64"` (a tensor of 2^31 elements or more): then every shape and
stride parameter is cast to int64 on entry, and every offset built from one widens.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from argus_core.errors import DSLError, choices_error
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
from argus_core.ir.nodes import AtomicAdd
from argus_core.ir.tags import (
    AssertContraction,
    AssertTag,
    AssertTagEq,
    Contract,
    Requires,
    RowsFor,
    Summand,
    Tag,
)
from argus_core.lowering.rules import Rule, RuleTable
from argus_core.target import TargetSpec
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
OFFSETS = ("i32", "i64")  # the run fact "offsets": how wide a kernel computes its offsets


def dtype_expr(dtype: str) -> str:
    """The `tl` dtype of an IR dtype; "like:x" is tensor x's element type."""
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


def float_literal(x: float) -> str:
    """A float literal Triton's JIT accepts, infinities and NaN included."""
    if x != x:
        return 'float("nan")'
    if x in (float("inf"), float("-inf")):
        return 'float("inf")' if x > 0 else 'float("-inf")'
    return repr(x)


def tuple_src(items: tuple[str, ...] | list[str]) -> str:
    """Python source of a tuple of these item sources (a 1-tuple keeps its comma)."""
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def bind_constexprs(ir: KernelIR, policy: Policy) -> dict[str, int]:
    """The policy's tiles by constexpr name; DSLError unless they bind exactly the kernel's
    constexprs."""
    names = [c.name for c in ir.constexprs]
    missing = [n for n in names if n not in policy.tiles]
    extra = [k for k in policy.tiles if k not in names]
    if missing or extra:
        raise DSLError(
            f"policy tiles {sorted(policy.tiles)} do not match kernel {ir.name!r} constexprs "
            f"{names} (missing {missing}, unknown {extra})"
        )
    return {n: int(policy.tiles[n]) for n in names}


class TritonEmitter:
    """One kernel's Triton source as its rules write it: names, expressions, statements,
    and the launch facts a rule may change (parameters, constexprs, grid, TMA tensors).

    Rules call `ops` for nested op lists; a target that needs per-kernel state of its own
    (Hopper's TMA descriptors) subclasses this and names the subclass in its lowering."""

    def __init__(
        self,
        ir: KernelIR,
        rules: RuleTable,
        policy: Policy,
        constexprs: dict[str, int],
        target: TargetSpec,
        options: Mapping[str, Any],
    ):
        self.ir, self.rules, self.policy, self.target = ir, rules, policy, target
        self.options = dict(options)
        self.constexprs = dict(constexprs)
        self.params = params_of(ir)
        self.grid = (
            "(" + ", ".join(to_source(g, None, {"cdiv": "triton.cdiv"}) for g in ir.grid) + ",)"
        )
        self.tma_tensors: list[str] = []
        self.dot_input_precision = (
            str(options.get("fp32_dot") or "ieee") if options.get("dtype") == "fp32" else None
        )
        self.lines: list[str] = []
        self.pid = "tl.program_id(0)"  # a persistent kernel loops over virtual program ids
        self.names: dict[int, str] = {}
        self.used: set[str] = {p.name for p in self.params} | {"tl", "triton"}
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
    def expr(self, e: Any, shape: tuple | None = None, dims: tuple[int, ...] | None = None) -> str:
        """Source of a scalar or element-indexed expression. Element symbols of a tile of
        `shape` become broadcast aranges. `dims`: the tile's dims in the order the source
        lays them out (a permuted tile, `load(along=)`); None keeps the tile's order."""
        rank = len(shape) if shape else 0
        at = {d: k for k, d in enumerate(dims)} if dims else {d: d for d in range(rank)}

        def name_of(s: Sym) -> str:
            if s.kind == "elem":
                axis = int(s.name[2:])
                if shape is None or axis >= rank:
                    raise DSLError(f"element index {s.name} used outside a tile of rank > {axis}")
                ar = f"tl.arange(0, {self.expr(shape[axis])})"
                if rank == 1:
                    return ar
                idx = ", ".join(":" if d == at[axis] else "None" for d in range(rank))
                return f"{ar}[{idx}]"
            if s.name == "program_id_0":
                return self.pid
            if isinstance(s, TileElem):
                name = self.name(s.value)
                if rank <= 1:
                    return name
                if s.axis is None:  # a tile of the full shape
                    return f"tl.permute({name}, {tuple(dims)})" if dims else name
                idx = ", ".join(":" if d == at[s.axis] else "None" for d in range(rank))
                return f"{name}[{idx}]"
            return s.name

        return to_source(e, name_of, {"min": "tl.minimum", "max": "tl.maximum", "cdiv": "tl.cdiv"})

    def operand(self, a: Any, shape: tuple | None = None) -> str:
        if isinstance(a, Value):
            return self.name(a)
        if isinstance(a, float):
            return float_literal(a)
        text = self.expr(a, shape)  # may hold element indices of the result tile
        return text if isinstance(a, int | Sym) else f"({text})"

    def pointer(self, view: View, dims: tuple[int, ...] | None = None) -> str:
        """The view's pointer block (its dims in the order `dims`, as `expr`)."""
        return f"{view.tensor.name} + ({self.expr(view.offset, view.shape, dims)})"

    def shape(self, v: Value) -> str:
        return tuple_src([self.expr(s) for s in v.shape])

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
        """Each op through its rule, at `indent`."""
        for op in ops:
            self.rules.rule_for(op)(self, op, indent)


# --- the generic rules, one per op ---------------------------------------------------------


def erase(em: TritonEmitter, op: Op, ind: int) -> None:
    """Ghost ops (tags, assertions, contracts) exist for the verifier only."""


def let(em: TritonEmitter, op: Let, ind: int) -> None:
    em.emit(ind, f"{op.sym.name} = {em.expr(op.expr)}", op)


def zeros(em: TritonEmitter, op: Zeros, ind: int) -> None:
    em.emit(
        ind,
        f"{em.name(op.out)} = tl.zeros({em.shape(op.out)}, dtype={dtype_expr(op.out.dtype)})",
        op,
    )


def full(em: TritonEmitter, op: Full, ind: int) -> None:
    em.emit(
        ind,
        f"{em.name(op.out)} = tl.full({em.shape(op.out)}, {float_literal(op.value)}, "
        f"dtype={dtype_expr(op.out.dtype)})",
        op,
    )


def load_text(em: TritonEmitter, op: Load) -> str:
    """`out = tl.load(pointer, mask=..., other=...)` through the view's pointers. A load
    `along` dim d is made with d last (Triton gives the last dim of a tile whose addresses
    it cannot prove contiguous to neighbouring lanes) and permuted back."""
    shape = op.view.shape
    dims = None
    if op.along is not None and op.along != len(shape) - 1:
        dims = tuple(d for d in range(len(shape)) if d != op.along) + (op.along,)
    mask = (
        f", mask={em.expr(op.mask, shape, dims)}, other={float_literal(op.other)}"
        if op.mask is not None
        else ""
    )
    text = f"tl.load({em.pointer(op.view, dims)}{mask})"
    if dims is not None:
        back = tuple(dims.index(d) for d in range(len(shape)))
        text = f"tl.trans({text})" if len(shape) == 2 else f"tl.permute({text}, {back})"
    return f"{em.name(op.out)} = {text}"


def load(em: TritonEmitter, op: Load, ind: int) -> None:
    em.emit(ind, load_text(em, op), op, op.view.desc)


def store_text(em: TritonEmitter, op: Store, fn: str = "tl.store") -> str:
    """`fn(pointer, value, mask=...)` through the view's pointers."""
    mask = f", mask={em.expr(op.mask, op.view.shape)}" if op.mask is not None else ""
    return f"{fn}({em.pointer(op.view)}, {em.name(op.value)}{mask})"


def store(em: TritonEmitter, op: Store, ind: int) -> None:
    em.emit(ind, store_text(em, op), op, op.view.desc)


def atomic_add(em: TritonEmitter, op: AtomicAdd, ind: int) -> None:
    em.emit(ind, store_text(em, op, "tl.atomic_add"), op, op.view.desc)


def emit_dot(em: TritonEmitter, op: Dot, ind: int, operand: Callable[[str], str] = str) -> None:
    """`out = tl.dot(a, b, acc)`, each operand's name through `operand` (the interpreter
    upcasts), IEEE precision for an fp32 run."""
    a, b = operand(em.name(op.a)), operand(em.name(op.b))
    acc = f", {em.name(op.acc)}" if op.acc is not None else ""
    # a dot of operands cast to a 16-bit float (a split fp32 product's halves) is that
    # type's own: no fp32 input precision applies
    halves = {str(getattr(op.a, "dtype", "")), str(getattr(op.b, "dtype", ""))} & {"bf16", "f16"}
    if em.dot_input_precision and not halves:
        acc += f", input_precision={em.dot_input_precision!r}"
    em.emit(ind, f"{em.name(op.out)} = tl.dot({a}, {b}{acc})", op)


def dot(em: TritonEmitter, op: Dot, ind: int) -> None:
    emit_dot(em, op, ind)


def cast(em: TritonEmitter, op: Cast, ind: int) -> None:
    em.emit(ind, f"{em.name(op.out)} = {em.name(op.x)}.to({dtype_expr(op.out.dtype)})", op)


def elementwise(em: TritonEmitter, op: Elementwise, ind: int) -> None:
    out = em.name(op.out)  # named before its operands: unnamed tiles are numbered in order
    args = [em.operand(a, op.out.shape) for a in op.args]
    if op.fn in _BINARY:
        text = f"{args[0]} {_BINARY[op.fn]} {args[1]}"
    elif op.fn in _UNARY:
        text = f"{_UNARY[op.fn]}({args[0]})"
    elif op.fn in _CALL2:
        text = f"{_CALL2[op.fn]}({args[0]}, {args[1]})"
    elif op.fn == "neg":
        text = f"-{args[0]}"
    elif op.fn == "where":
        text = f"tl.where({args[0]}, {args[1]}, {args[2]})"
    else:
        valid = sorted([*_BINARY, *_UNARY, *_CALL2, "neg", "where"])
        raise DSLError(
            f"the triton lowering has no rule for elementwise {op.fn!r}; valid: {', '.join(valid)}",
            str(op.point),
        )
    em.emit(ind, f"{out} = {text}", op)


def load_scalar(em: TritonEmitter, op: LoadScalar, ind: int) -> None:
    em.emit(ind, f"{op.sym.name} = tl.load({op.tensor.name} + ({em.expr(op.offset)}))", op)


def scan(em: TritonEmitter, op: Scan, ind: int) -> None:
    em.emit(ind, f"{em.name(op.out)} = tl.cumsum({em.name(op.x)}, axis={op.axis})", op)


def expand_dims(em: TritonEmitter, op: ExpandDims, ind: int) -> None:
    idx = ", ".join("None" if d == op.axis else ":" for d in range(len(op.out.shape)))
    em.emit(ind, f"{em.name(op.out)} = {em.name(op.x)}[{idx}]", op)


def reduce(em: TritonEmitter, op: Reduce, ind: int) -> None:
    em.emit(ind, f"{em.name(op.out)} = {_REDUCE[op.fn]}({em.name(op.x)}, axis={op.axis})", op)


def emit_loop(
    em: TritonEmitter, op: Loop, ind: int, iterate: Callable[[str], str] = "range({})".format
) -> None:
    """The loop with one Python name per carried value (init, iteration argument, yield and
    result); `iterate(bounds)` is what the `for` runs over (Hopper: a warp-specialized
    `tl.range`)."""
    uses_after_yield = _uses_after_definition(
        op.body, {id(c.arg) for c in op.carried}, {id(c.yielded) for c in op.carried}
    )
    for c in op.carried:
        init = em.name(c.init)
        if em.uses.get(c.init.id, 0) > 1 or (c.result.name and c.result.name != init):
            # the entering value lives on elsewhere (or is another variable): copy it
            name = em.fresh(c.result.name or init)
            em.emit(ind, f"{name} = {init}")
        else:
            name = init
        em.alias(c.arg, name)
        em.alias(c.result, name)
        if uses_after_yield:
            em.name(c.yielded)
        else:
            em.alias(c.yielded, name)
    bounds = f"{em.expr(op.start)}, {em.expr(op.stop)}" + (
        f", {em.expr(op.step)}" if op.step != 1 else ""
    )
    em.emit(ind, f"for {op.var.name} in {iterate(bounds)}:", op)
    em.last_line = None
    em.ops(op.body, ind + 1)
    for c in op.carried:
        if em.name(c.yielded) != em.name(c.arg):
            em.emit(ind + 1, f"{em.name(c.arg)} = {em.name(c.yielded)}")
    if not op.body:
        em.emit(ind + 1, "pass")


def loop(em: TritonEmitter, op: Loop, ind: int) -> None:
    emit_loop(em, op, ind)


def kernel(em: TritonEmitter, ir: KernelIR, ind: int) -> None:
    """The kernel body: its ops, once per program."""
    em.ops(ir.ops, ind)


def _uses_after_definition(body: list[Op], args: set[int], yields: set[int]) -> bool:
    """True if some op reads a carried argument after that iteration's new value was made."""
    seen_yield = False
    for op in body:
        if seen_yield and any(id(v) in args for v in op.operands()):
            return True
        if op.result is not None and id(op.result) in yields:
            seen_yield = True
    return False


GHOST_OPS: tuple[type[Op], ...] = (
    Tag,
    AssertTagEq,
    AssertTag,
    AssertContraction,
    Requires,
    Contract,
    Summand,
    RowsFor,
)

TRITON_RULES = RuleTable(
    "triton",
    {
        KernelIR: kernel,
        Let: let,
        Zeros: zeros,
        Full: full,
        Load: load,
        Store: store,
        AtomicAdd: atomic_add,
        Dot: dot,
        Cast: cast,
        Elementwise: elementwise,
        LoadScalar: load_scalar,
        Scan: scan,
        ExpandDims: expand_dims,
        Reduce: reduce,
        Loop: loop,
        **{ghost: erase for ghost in GHOST_OPS},
    },
)


@dataclass(frozen=True)
class TritonLowering:
    """How one target lowers to Triton: its rule table, the emitter the rules write with,
    and the target they may consult (Hopper: SMs for the persistent grid)."""

    rules: RuleTable
    target: TargetSpec
    emitter: type[TritonEmitter] = TritonEmitter

    def lower(self, ir: KernelIR, policy: Policy, options: Mapping[str, Any]) -> LoweredKernel:
        """Triton source for `ir`: the policy's tiles must bind exactly the kernel's
        constexprs (DSLError otherwise); `options` holds run facts ({"dtype": ...})."""
        em = self.emitter(ir, self.rules, policy, bind_constexprs(ir, policy), self.target, options)
        offsets = options.get("offsets", "i32")
        if offsets not in OFFSETS:
            raise DSLError(choices_error("offsets", offsets, OFFSETS))
        wide = offsets == "i64"
        if wide:  # i32 * i64 is i64: every offset built from a shape or a stride widens
            for p in em.params:
                if p.kind == "int" and p.binding[0] in ("shape", "stride"):
                    em.lines.append(f"    {p.name} = tl.cast({p.name}, tl.int64)")
        self.rules.rule_for(ir)(em, ir, 1)
        sig = ", ".join(
            p.name + (": tl.constexpr" if p.kind == "constexpr" else "") for p in em.params
        )
        header = [
            f"# Lowered by Argus from {os.path.basename(ir.file)} (kernel {ir.name!r}); do not edit.",
            "import triton",
            "import triton.language as tl",
            "",
            "",
            "@triton.jit",
            f"def {ir.name}({sig}):",
        ]
        return LoweredKernel(
            name=ir.name,
            source="\n".join(header + em.lines) + "\n",
            params=em.params,
            grid=em.grid,
            outputs=list(ir.written),
            constexprs=em.constexprs,
            tma_tensors=em.tma_tensors,
            wide_offsets=wide,
        )

    def extended(self, name: str, rules: Mapping[type, Rule]) -> TritonLowering:
        """This lowering with `rules` added or replacing its own (the table `name`d)."""
        return replace(self, rules=self.rules.extended(name, rules))


__all__ = [
    "GHOST_OPS",
    "TRITON_RULES",
    "TritonEmitter",
    "TritonLowering",
    "bind_constexprs",
    "dtype_expr",
    "emit_dot",
    "emit_loop",
    "float_literal",
    "load_text",
    "params_of",
    "store_text",
    "tuple_src",
]
