"""Hopper's Gluon lowering of explicit-level kernels: the op rule table and the compile.

`GLUON_RULES` maps each `argus_core.ir.explicit` op to Gluon source for sm_90 (TMA,
mbarriers, warpgroup MMA); `argus_core.lowering.gluon.lower_explicit` walks the kernel with
it. `compile_explicit` cross-compiles the source for `GPUTarget("cuda", 90, 32)` (no GPU
needed: Triton bundles ptxas and cuobjdump) and reads the SASS report from the cubin.
"""

from __future__ import annotations

import math
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
    "from triton.experimental.gluon.language.nvidia.hopper import (",
    "    fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait,",
    ")",
)


def _bar(op, k) -> str:
    return f"{op.bar}.index({expr(op.stage)})"


def _acc_layout(op: x.ZeroAcc) -> str:
    w = list(op.layout.warps)
    return f"gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta={w}, instr_shape=[16, {op.cols}, 16])"


def _layout_of(k: x.ExplicitKernel, acc: str) -> str:
    return _acc_layout(zero_acc(k, acc))


def _rows(k: x.ExplicitKernel, acc: str) -> str:
    return f"gl.SliceLayout(1, {_layout_of(k, acc)})"


def _wgmma(op: x.Wgmma, k: x.ExplicitKernel) -> list[str]:
    a = op.a if op.a_stage is None else shared_index(k, op.a, op.a_stage)
    b = shared_index(k, op.b, op.b_stage) + (".permute((1, 0))" if op.b_trans else "")
    use = "" if op.use_acc else ", use_acc=False"
    return [f"{op.acc} = warpgroup_mma({a}, {b}, {op.acc}{use}, is_async=True)"]


def _store_tile(op: x.StoreTile, k: x.ExplicitKernel) -> list[str]:
    """Masked global stores of the accumulator: cast, converted from the wgmma layout to
    rows of 8-element (16-byte) vectors, stored. No TMA box, so a tile may store fewer
    columns than it computes. (Stored straight from the wgmma layout, 2-4 byte stores, it
    ran 3-4% slower at 128x14336x4096: H100, benchmarks/overlap_probe.py, 2026-12-06.)"""
    zero = zero_acc(k, op.acc)
    cols = k.const(zero.cols)
    if cols % 8 or cols > 256:
        raise x.ExplicitIRError(
            f"{k.name}: StoreTile of {cols} columns; valid: a multiple of 8 up to 256"
        )
    warps = math.prod(zero.layout.warps)
    lay = f"gl.BlockedLayout([1, 8], [{256 // cols}, {cols // 8}], [{warps}, 1], [1, 0])"
    lines, offs, mask = store_tile_indices(op, zero.rows, zero.cols, lay)
    return [
        f"_v = gl.convert_layout({op.acc}.to({op.ptr}.dtype.element_ty), {lay})",
        *lines,
        f"gl.store({op.ptr} + {offs}, _v{'' if mask is None else f', mask={mask}'})",
    ]


def _softmax(op: x.OnlineSoftmax, k: x.ExplicitKernel) -> list[str]:
    s_rows, s_cols = _rows(k, op.s_acc), f"gl.SliceLayout(0, {_layout_of(k, op.s_acc)})"
    zero = zero_acc(k, op.s_acc)
    mask = f"_cols[None, :] < {expr(op.kv_len)}"
    # only a block that reaches past the keys (or, causal, past its first query row) is
    # masked: a uniform branch, so the inner blocks pay no compare and select per score
    edge = f"({expr(op.col0)} + {zero.cols} > {expr(op.kv_len)})"
    if op.causal:
        mask = f"({mask}) & (_cols[None, :] <= _rows[:, None])"
        edge = f"{edge} | ({expr(op.col0)} + {zero.cols} > {expr(op.row0)} + 1)"
    # the scale is folded into the exponent (one FFMA per score): max(s) * scale is the
    # scaled row max since scale > 0
    return [
        f"_qk = {op.s_acc}",
        f"if {edge}:",
        f"    _cols = {expr(op.col0)} + gl.arange(0, {zero.cols}, layout={s_cols})",
        f"    _rows = {expr(op.row0)} + gl.arange(0, {zero.rows}, layout={s_rows})",
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
        f"{op.p} = gl.convert_layout(_p.to(gl.bfloat16), gl.DotOperandLayout(operand_index=0, "
        f"parent={_layout_of(k, op.o)}, k_width=2))",
    ]


GLUON_RULES: dict[type, Any] = {
    x.Wait: lambda op, k: [f"mbarrier.wait({_bar(op, k)}, {expr(op.phase)})"],
    x.Expect: lambda op, k: [
        f"mbarrier.expect({_bar(op, k)}, {' + '.join(f'{d}.block_type.nbytes' for d in op.descs)})"
    ],
    x.Arrive: lambda op, k: [
        f"mbarrier.arrive({_bar(op, k)}, count=1"
        + ("" if op.pred is None else f", pred={expr(op.pred)}")
        + ")"
    ],
    x.TmaLoad: lambda op, k: [
        f"tma.async_copy_global_to_shared({op.desc}, [{', '.join(expr(c) for c in op.coords)}], "
        f"{_bar(op, k)}, {shared_index(k, op.dst, op.stage)})"
    ],
    x.ZeroAcc: lambda op, k: [
        f"{op.acc} = gl.zeros(({op.rows}, {op.cols}), gl.float32, {_acc_layout(op)})"
    ],
    x.Wgmma: _wgmma,
    x.SoftmaxState: lambda op, k: [
        f"{op.row_max} = gl.full([{op.rows}], float('-inf'), gl.float32, {_rows(k, op.s_acc)})",
        f"{op.row_sum} = gl.full([{op.rows}], 0.0, gl.float32, {_rows(k, op.s_acc)})",
    ],
    x.OnlineSoftmax: _softmax,
    x.NormalizeStore: lambda op, k: [
        f"{op.dst}.store(({op.o} / gl.convert_layout({op.row_sum}, {_rows(k, op.o)})[:, None]).to({op.dst}.dtype))"
    ],
    x.StoreLse: lambda op, k: [
        f"_lse_rows = {expr(op.row0)} + gl.arange(0, {zero_acc(k, op.s_acc).rows}, layout={_rows(k, op.s_acc)})",
        f"gl.store({op.ptr} + _lse_rows, ({op.row_max} + gl.log2({op.row_sum})) * 0.6931471805599453)",
    ],
    x.WgmmaWait: lambda op, k: [
        f"{', '.join((op.acc, *op.keep))} = warpgroup_mma_wait("
        f"{op.pending}, deps=({', '.join((op.acc, *op.keep))},))"
    ],
    x.RescaleAcc: lambda op, k: [f"{op.acc} = {op.acc} * {op.alpha}[:, None]"],
    x.Move: lambda op, k: [f"{op.dst} = {op.src}"],
    x.StoreShared: lambda op, k: [f"{op.dst}.store({op.acc}.to({op.dst}.dtype))"],
    x.FenceAsyncShared: lambda op, k: ["fence_async_shared()"],
    x.TmaStore: lambda op, k: [
        f"tma.async_copy_shared_to_global({op.desc}, [{', '.join(expr(c) for c in op.coords)}], {op.src})"
    ],
    x.StoreWait: lambda op, k: [f"tma.store_wait({op.pending})"],
    x.StoreTile: _store_tile,
    x.LoadScalar: lambda op, k: [f"{op.name} = gl.load({op.ptr} + {expr(op.index)})"],
    x.SiluMul: lambda op, k: [f"{op.gate} = {op.gate} / (1.0 + gl.exp(-{op.gate})) * {op.up}"],
}


def lower(kernel: x.ExplicitKernel) -> str:
    """The Gluon source of `kernel` for sm_90."""
    return lower_explicit(kernel, HOPPER_GLUON)


def nvmma_desc_type(
    dtype: str,
    rows: int,
    cols: int,
    swizzle_bytes: int = 128,
    element_bits: int = 16,
    transposed: bool = False,
) -> str:
    """The compile-time signature string of a 2-D TMA descriptor over an NVMMA-swizzled
    `rows` x `cols` block of `dtype`."""
    return (
        f"tensordesc<{dtype}[{rows}, {cols}],NVMMASharedLayout(swizzle_byte_width="
        f"{swizzle_bytes}, element_bitwidth={element_bits}, rank=2, transposed={transposed})>"
    )


def desc_type(kernel: x.ExplicitKernel, d: x.Desc, consts: dict[str, int]) -> str:
    """The compile-time signature string of a TMA descriptor parameter."""
    rows, cols = (kernel.const(b, consts) for b in d.block)
    lay = d.layout
    return nvmma_desc_type(d.dtype, rows, cols, lay.swizzle_bytes, lay.element_bits, lay.transposed)


def cross_compile(
    fn: Any,
    signature: dict[str, str],
    constexprs: dict[str, Any],
    num_warps: int,
    capability: int = 90,
) -> Any:
    """`triton.compile` of a `gluon.jit` function for sm_`capability` (no GPU needed): the
    compiled kernel (`.asm["cubin"]`, `.asm["ptx"]`, `.metadata`). Constexprs are added to
    the signature here."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    sig = {**signature, **{c: "constexpr" for c in constexprs}}
    src = GluonASTSource(fn, sig, constexprs=constexprs)
    return triton.compile(
        src, target=GPUTarget("cuda", capability, 32), options={"num_warps": num_warps}
    )


def compile_explicit(
    kernel: x.ExplicitKernel, consts: dict[str, int] | None = None, *, capability: int = 90
) -> CompileReport:
    """Cross-compile `kernel` for sm_`capability` and report from its cubin (HGMMA count,
    TMA copies, registers, spills, shared bytes). Never raises for the kernel: a compiler
    failure gives ok=False with its message."""
    from argus_plugins.backends.hopper.cubin import report_fields

    consts = {**kernel.consts, **(consts or {})}
    name = f"cuda:{capability}"
    start = time.perf_counter()
    try:
        fn = load_entry(kernel, lower(kernel))
        sig: dict[str, str] = {d.name: desc_type(kernel, d, consts) for d in kernel.descs}
        sig.update({q.name: f"*{q.dtype}" for q in kernel.ptrs})
        sig.update({s: "i32" for s in kernel.scalars})
        constexprs = {c: consts[c] for c in kernel.consts}
        compiled = cross_compile(fn, sig, constexprs, kernel.num_warps, capability)
        fields = report_fields(compiled.asm["cubin"], compiled.metadata)
    except Exception as exc:  # a compiler failure is the kernel's
        return CompileReport(
            target=name,
            ok=False,
            asm_kind="sass",
            error=error_text(exc),
            seconds=time.perf_counter() - start,
        )
    return CompileReport(
        target=name, ok=True, asm_kind="sass", seconds=time.perf_counter() - start, **fields
    )


HOPPER_GLUON = GluonTarget(
    name="hopper-gluon", imports=IMPORTS, rules=GLUON_RULES, compile=compile_explicit
)
