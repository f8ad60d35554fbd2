"""Lowering of the tile-level IR to readable Triton source (`triton.language`).

Tags and tag assertions never reach this module's output: only data-flow ops are printed,
so the lowered source of a kernel is the same with and without its invariants. Each emitted
statement carries a comment with the DSL line it came from.
"""

from __future__ import annotations

import os
import random
from typing import Any

from argus_core.errors import DSLError
from argus_core.ir import (
    Cast,
    Dot,
    Elementwise,
    ExpandDims,
    Expr,
    Full,
    IntLike,
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
    as_expr,
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
    def __init__(
        self, ir: KernelIR, options: dict[str, Any], constexprs: dict[str, int] | None = None
    ):
        self.ir = ir
        self.options = options
        self.constexprs = dict(constexprs or {})
        self.lines: list[str] = []
        # Hopper options (policy compiler options the lowering reads, LOWERING_OPTIONS)
        self.tma = bool(options.get("tma"))
        self.warp_specialize = bool(options.get("warp_specialize")) and self.tma
        self.pid = "tl.program_id(0)"  # persistent kernels loop over virtual program ids
        self.descs: dict[tuple[str, tuple[str, ...]], str] = {}  # (tensor, block) -> name
        self.desc_block: dict[str, tuple[str, ...]] = {}
        self.desc_lines: list[str] = []
        self.specialized = False
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
                return self.pid
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
            text = f"{self.name(op.out)} = tl.load({self.pointer(op.view)}{mask})"
            box = self.tma_box(op.view, op.mask) if op.other == 0 else None
            if box is not None:  # the same tile through a TMA descriptor (zero fill = other)
                desc, offsets, reshape = box
                self.emit(ind, "if USE_TMA:", op, op.view.desc)
                self.emit(ind + 1, f"{self.name(op.out)} = {desc}.load({offsets}){reshape}")
                self.emit(ind, "else:")
                self.emit(ind + 1, text)
            else:
                self.emit(ind, text, op, op.view.desc)
        elif isinstance(op, Store):
            mask = f", mask={self.expr(op.mask, op.view.shape)}" if op.mask is not None else ""
            fn = "tl.atomic_add" if op.kind == "atomic_add" else "tl.store"  # AtomicAdd is a Store
            text = f"{fn}({self.pointer(op.view)}, {self.name(op.value)}{mask})"
            box = self.tma_box(op.view, op.mask, load=False) if op.kind != "atomic_add" else None
            if box is not None:  # TMA stores clip at the tensor's edges, as the mask does
                desc, offsets, _ = box
                block = self.desc_block[desc]
                value = self.name(op.value)
                if len(block) != len(op.view.shape):
                    value = f"{value}.reshape({self.tuple_src(block)})"
                self.emit(ind, "if USE_TMA:", op, op.view.desc)
                self.emit(ind + 1, f"{desc}.store({offsets}, {value})")
                self.emit(ind, "else:")
                self.emit(ind + 1, text)
            else:
                self.emit(ind, text, op, op.view.desc)
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

    # TMA ------------------------------------------------------------------------------
    def tuple_src(self, items: tuple[str, ...] | list[str]) -> str:
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"

    def tma_box(
        self, view: View, mask: Expr | None, load: bool = True
    ) -> tuple[str, str, str] | None:
        """(descriptor, offsets, suffix) when `view` is a box a TMA descriptor can move:
        coordinate d is start_d plus tile element j with unit step, every tile dim used once,
        the innermost tensor dim along some tile dim with 16+ elements, every box dim <= 256,
        and its mask only the view's own bounds (TMA zero-fills and clips exactly there). A
        permuted view (attention's Kᵀ) is a box in the tensor's order, permuted after the
        load (loads only). The suffix reshapes away fixed dims and permutes. None
        otherwise, or when tma is off."""
        if not self.tma or len(view.tensor.dims) < 2:
            return None
        if mask is not None and repr(mask) != repr(view.in_bounds):
            return None
        mapping = _box_mapping(view)
        rank = len(view.shape)
        if mapping is None or mapping[-1] is None:
            return None
        order = [j for j in mapping if j is not None]  # tile dims in the tensor's order
        if order != list(range(rank)) and not load:
            return None
        sizes: list[int] = []
        for extent in view.shape:
            value = _const_value(extent, self.constexprs)
            if value is None or not 1 <= value <= 256:
                return None
            sizes.append(value)
        if sizes[mapping[-1]] < 16:
            return None
        block = tuple("1" if j is None else self.expr(view.shape[j]) for j in mapping)
        zero = {sym: 0 for c in view.coords if isinstance(c, Expr) for sym in c.symbols()
                if sym.name.startswith("_i")}  # fmt: skip
        starts = [self.expr(c.subs(zero) if isinstance(c, Expr) else c) for c in view.coords]
        key = (view.tensor.name, block)
        if key not in self.descs:
            name = f"{view.tensor.name}_desc{len([k for k in self.descs if k[0] == key[0]]) or ''}"
            self.descs[key] = name
            dims = ", ".join(self.expr(d) for d in view.tensor.dims)
            strides = ", ".join([self.expr(st) for st in view.tensor.strides[:-1]] + ["1"])
            self.desc_lines.append(
                f"{name} = tl.make_tensor_descriptor({view.tensor.name}, shape=[{dims}], "
                f"strides=[{strides}], block_shape=[{', '.join(block)}])"
            )
            self.desc_block[name] = block
        suffix = ""
        if len(block) != rank:  # drop the fixed dims (b, h of q[b, h])
            boxed = [self.expr(view.shape[j]) for j in order]
            suffix = f".reshape({self.tuple_src(boxed)})"
        if order != list(range(rank)):  # back to the view's own dim order
            perm = ", ".join(str(order.index(i)) for i in range(rank))
            suffix += f".permute({perm})"
        return self.descs[key], "[" + ", ".join(starts) + "]", suffix

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
        if self.warp_specialize and _has_dot(op.body) and not self.specialized:
            # Hopper warp specialization: producer warps issue the TMA loads, consumers the
            # wgmma; Triton 3.6 needs the loop's loads on descriptors (tma) for it
            self.specialized = True
            self.emit(
                ind, f"for {op.var.name} in tl.range({rng}, warp_specialize=USE_TMA == 1):", op
            )
        else:
            self.emit(ind, f"for {op.var.name} in range({rng}):", op)
        self.last_line = None
        self.ops(op.body, ind + 1)
        for c in op.carried:
            if self.name(c.yielded) != self.name(c.arg):
                self.emit(ind + 1, f"{self.name(c.arg)} = {self.name(c.yielded)}")
        if not op.body:
            self.emit(ind + 1, "pass")


def _has_dot(ops: list[Op]) -> bool:
    return any(isinstance(o, Dot) or (isinstance(o, Loop) and _has_dot(o.body)) for o in ops)


def _const_value(extent: IntLike, constexprs: dict[str, int]) -> int | None:
    """An extent's value: an int, or a constexpr the policy binds; None if unknown."""
    if isinstance(extent, int):
        return extent
    try:
        return int(as_expr(extent).evaluate(constexprs))
    except Exception:
        return None


def _box_mapping(view: View) -> list[int | None] | None:
    """Per tensor dim, the tile dim it runs along (None: one fixed index), when every
    coordinate is a start plus one tile element with unit step and every tile dim is used
    once (in any order: a permuted view); None for anything else (gathered, strided). Checked
    by evaluating each coordinate at seeded random values of its other symbols."""
    rng = random.Random(0)
    mapping: list[int | None] = []
    for c in view.coords:
        syms = as_expr(c).symbols() if not isinstance(c, int) else set()
        elems = [s for s in syms if s.name.startswith("_i")]
        if len(elems) > 1:
            return None
        if not elems:
            mapping.append(None)
            continue
        (e,) = elems
        try:
            for _ in range(3):
                env = {s.name: rng.randint(0, 40) for s in syms}
                base = as_expr(c).evaluate({**env, e.name: 0})
                for v in (1, 5):
                    if as_expr(c).evaluate({**env, e.name: v}) - base != v:
                        return None
        except Exception:  # data-dependent coordinates (gathers) do not evaluate
            return None
        mapping.append(int(e.name[2:]))
    js = [j for j in mapping if j is not None]
    return mapping if sorted(js) == list(range(len(view.shape))) else None


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
    em = _Emitter(ir, options, constexprs)
    programs = int(options.get("persistent_programs") or 0)
    total = to_source(ir.grid[0], None, {"cdiv": "tl.cdiv"}) if len(ir.grid) == 1 else None
    if programs and total is not None:
        # persistent: `programs` programs loop over the grid's virtual program ids, each id
        # once (the verified kernel's programs, run in sequence by fewer hardware ones)
        em.pid = "_pid"
        em.lines.append(f"    for _pid in tl.range(tl.program_id(0), {total}, tl.num_programs(0)):")
        em.ops(ir.ops, 2)
    else:
        programs = 0
        em.ops(ir.ops, 1)
    tma_tensors = sorted({key[0] for key in em.descs})
    if em.desc_lines:
        # descriptors once per program, before any loop; the pointer path when USE_TMA is 0
        em.lines[0:0] = ["    if USE_TMA:"] + ["        " + line for line in em.desc_lines]
        params = [*params, Param("USE_TMA", "constexpr", ("const", "USE_TMA"))]
        constexprs = {**constexprs, "USE_TMA": 1}
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
    if programs:
        grid = f"(min({to_source(ir.grid[0], None, {'cdiv': 'triton.cdiv'})}, {programs}),)"
    return LoweredKernel(
        name=ir.name,
        source="\n".join(header + em.lines) + "\n",
        params=params,
        grid=grid,
        outputs=list(ir.written),
        constexprs=constexprs,
        tma_tensors=tma_tensors,
    )


__all__ = ["dtype_expr", "lower", "params_of"]
