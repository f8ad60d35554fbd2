"""MI300X's (gfx942, CDNA3) Gluon lowering of explicit-level kernels: rule table and compile.

`GLUON_RULES` maps the CDNA3 ops of `argus_core.ir.explicit` (buffer loads into blocked
register layouts, generic stores to LDS with a swizzled shared layout, workgroup barriers,
MFMA from LDS through the dot-operand layouts of an `AMDMFMALayout` accumulator, buffer
stores) to Gluon source; `compile_explicit` cross-compiles it for
`GPUTarget("hip", "gfx942", 64)` with no GPU and reads the AMDGCN report (MFMA count,
buffer loads, LDS bytes, VGPRs, spills). Buffer loads and stores are unmasked: a kernel at
this level needs shapes divisible by its tiles (the kernel's docstring says which).
"""

from __future__ import annotations

import time
from typing import Any

from argus_core.ir import explicit as x
from argus_core.lowering.gluon import (
    GluonTarget,
    expr,
    load_entry,
    lower_explicit,
    shared_index,
    store_tile_indices,
    zero_acc,
)
from argus_core.lowering.triton_compile import error_text
from argus_core.types import CompileReport

IMPORTS = (
    "from triton.experimental import gluon",
    "from triton.experimental.gluon import language as gl",
    "from triton.experimental.gluon.language.amd import cdna3",
)


def _acc_layout(k: x.ExplicitKernel, acc: str) -> x.MfmaAcc:
    for _, op in k.ops():
        if isinstance(op, x.ZeroAcc) and op.acc == acc and isinstance(op.layout, x.MfmaAcc):
            return op.layout
    raise x.ExplicitIRError(f"{k.name}: accumulator {acc!r} has no ZeroAcc with an MFMA layout")


def _offsets(coords, stride, rows: str, cols: str, layout: str) -> str:
    r = f"({expr(coords[0])} + gl.arange(0, {rows}, layout=gl.SliceLayout(1, {layout})))"
    c = f"({expr(coords[1])} + gl.arange(0, {cols}, layout=gl.SliceLayout(0, {layout})))"
    return f"{r}[:, None] * {expr(stride)} + {c}[None, :]"


def _load_tile(op: x.LoadTile, k: x.ExplicitKernel) -> list[str]:
    lay = op.layout.gluon()
    return [
        f"{op.dst} = cdna3.buffer_load({op.ptr}, {_offsets(op.coords, op.stride, *op.block, lay)})"
    ]


def _mfma(op: x.Mfma, k: x.ExplicitKernel) -> list[str]:
    acc = _acc_layout(k, op.acc)
    if op.a_stage is None:  # a register operand, already in the A dot-operand layout
        a = op.a
    else:
        a = f"{shared_index(k, op.a, op.a_stage)}.load(gl.DotOperandLayout(0, {acc.gluon()}, {acc.k_width_a}))"
    view = ".permute((1, 0))" if op.b_trans else ""
    b = f"{shared_index(k, op.b, op.b_stage)}{view}.load(gl.DotOperandLayout(1, {acc.gluon()}, {acc.k_width_b}))"
    return [f"{op.acc} = cdna3.mfma({a}, {b}, {op.acc})"]


def _rows(k: x.ExplicitKernel, acc: str) -> str:
    return f"gl.SliceLayout(1, {_acc_layout(k, acc).gluon()})"


def _softmax(op: x.OnlineSoftmax, k: x.ExplicitKernel) -> list[str]:
    """The online softmax over an MFMA accumulator: the same arithmetic as Hopper's (base 2,
    the scale folded into the exponent, only edge blocks masked), P converted to the A
    dot-operand layout of `o`'s MFMA layout (k_width elements per lane)."""
    s_lay, o_lay = _acc_layout(k, op.s_acc), _acc_layout(k, op.o)
    zero = zero_acc(k, op.s_acc)
    mask = f"_cols[None, :] < {expr(op.kv_len)}"
    edge = f"({expr(op.col0)} + {zero.cols} > {expr(op.kv_len)})"
    if op.causal:
        mask = f"({mask}) & (_cols[None, :] <= _rows[:, None])"
        edge = f"{edge} | ({expr(op.col0)} + {zero.cols} > {expr(op.row0)} + 1)"
    return [
        f"_qk = {op.s_acc}",
        f"if {edge}:",
        f"    _cols = {expr(op.col0)} + gl.arange(0, {zero.cols}, layout=gl.SliceLayout(0, {s_lay.gluon()}))",
        f"    _rows = {expr(op.row0)} + gl.arange(0, {zero.rows}, layout={_rows(k, op.s_acc)})",
        f"    _qk = gl.where({mask}, _qk, float('-inf'))",
        f"_m_new = gl.maximum({op.row_max}, gl.max(_qk, 1) * {op.scale_log2!r})",
        f"_alpha = gl.exp2({op.row_max} - _m_new)",
        f"_p = gl.exp2(_qk * {op.scale_log2!r} - _m_new[:, None])",
        f"{op.row_sum} = {op.row_sum} * _alpha + gl.sum(_p, 1)",
        f"{op.row_max} = _m_new",
        (
            f"{op.alpha} = gl.convert_layout(_alpha, {_rows(k, op.o)})"
            if op.alpha
            else f"{op.o} = {op.o} * gl.convert_layout(_alpha, {_rows(k, op.o)})[:, None]"
        ),
        f"{op.p} = gl.convert_layout(_p.to(gl.bfloat16), gl.DotOperandLayout(0, "
        f"{o_lay.gluon()}, {o_lay.k_width_a}))",
    ]


def _normalize(op: x.NormalizeStore, k: x.ExplicitKernel) -> list[str]:
    """O / row sums: in place when `dst` is the accumulator itself (then a `StoreTile`
    writes it out by buffer stores), else into the LDS buffer `dst`."""
    val = f"{op.o} / gl.convert_layout({op.row_sum}, {_rows(k, op.o)})[:, None]"
    if op.dst == op.o:
        return [f"{op.o} = {val}"]
    return [f"{shared_index(k, op.dst, 0)}.store(({val}).to({op.dst}.dtype))"]


def _store_tile(op: x.StoreTile, k: x.ExplicitKernel) -> list[str]:
    zero = zero_acc(k, op.acc)
    lay = _acc_layout(k, op.acc).gluon()
    val = f"{op.acc}.to({op.ptr}.dtype.element_ty)"
    if op.cols is None and op.limits is None:
        offs = _offsets(op.coords, op.stride, zero.rows, zero.cols, lay)
        return [f"cdna3.buffer_store({val}, {op.ptr}, {offs})"]
    lines, offs, mask = store_tile_indices(op, zero.rows, zero.cols, lay)
    return [*lines, f"cdna3.buffer_store({val}, {op.ptr}, {offs}, mask={mask})"]


GLUON_RULES: dict[type, Any] = {
    x.ZeroAcc: lambda op, k: [
        f"{op.acc} = gl.zeros(({op.rows}, {op.cols}), gl.float32, {_acc_layout(k, op.acc).gluon()})"
    ],
    x.LoadTile: _load_tile,
    x.StoreRegs: lambda op, k: [f"{shared_index(k, op.dst, op.stage)}.store({op.src})"],
    x.Barrier: lambda op, k: ["gl.thread_barrier()"],
    x.Mfma: _mfma,
    x.StoreTile: _store_tile,
    x.SoftmaxState: lambda op, k: [
        f"{op.row_max} = gl.full([{op.rows}], float('-inf'), gl.float32, {_rows(k, op.s_acc)})",
        f"{op.row_sum} = gl.full([{op.rows}], 0.0, gl.float32, {_rows(k, op.s_acc)})",
    ],
    x.OnlineSoftmax: _softmax,
    x.RescaleAcc: lambda op, k: [f"{op.acc} = {op.acc} * {op.alpha}[:, None]"],
    x.Move: lambda op, k: [f"{op.dst} = {op.src}"],
    x.NormalizeStore: _normalize,
    x.StoreLse: lambda op, k: [
        f"_lse_rows = {expr(op.row0)} + gl.arange(0, {zero_acc(k, op.s_acc).rows}, layout={_rows(k, op.s_acc)})",
        f"gl.store({op.ptr} + _lse_rows, ({op.row_max} + gl.log2({op.row_sum})) * 0.6931471805599453)",
    ],
    x.LoadScalar: lambda op, k: [f"{op.name} = gl.load({op.ptr} + {expr(op.index)})"],
}


def lower(kernel: x.ExplicitKernel) -> str:
    """The Gluon source of `kernel` for gfx942."""
    return lower_explicit(kernel, CDNA3_GLUON)


def compile_explicit(
    kernel: x.ExplicitKernel, consts: dict[str, int] | None = None
) -> CompileReport:
    """Cross-compile `kernel` for gfx942 and report from its AMDGCN. Never raises for the
    kernel: a compiler failure gives ok=False with its message."""
    from argus_plugins.backends.mi300x.amdgcn import report_fields

    consts = {**kernel.consts, **(consts or {})}
    start = time.perf_counter()
    try:
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.experimental.gluon._runtime import GluonASTSource

        fn = load_entry(kernel, lower(kernel))
        sig: dict[str, str] = {q.name: f"*{q.dtype}" for q in kernel.ptrs}
        sig.update({s: "i32" for s in kernel.scalars})
        sig.update({c: "constexpr" for c in kernel.consts})
        src = GluonASTSource(fn, sig, constexprs={c: consts[c] for c in kernel.consts})
        compiled = triton.compile(
            src, target=GPUTarget("hip", "gfx942", 64), options={"num_warps": kernel.num_warps}
        )
        asm = compiled.asm["amdgcn"]
        fields = report_fields(asm, compiled.metadata)
    except Exception as exc:  # a compiler failure is the kernel's
        return CompileReport(
            target="hip:gfx942",
            ok=False,
            asm_kind="amdgcn",
            error=error_text(exc),
            seconds=time.perf_counter() - start,
        )
    return CompileReport(
        target="hip:gfx942",
        ok=True,
        asm_kind="amdgcn",
        asm=asm,
        seconds=time.perf_counter() - start,
        **fields,
    )


CDNA3_GLUON = GluonTarget(
    name="cdna3-gluon", imports=IMPORTS, rules=GLUON_RULES, compile=compile_explicit
)
