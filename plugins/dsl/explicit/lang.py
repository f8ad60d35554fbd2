"""The explicit-level DSL surface: a builder that records `argus_core.ir.explicit` ops.

    k = Kernel("gemm_ws", family="gemm")
    M = k.scalar("M"); BM = k.const("BM", 128); STAGES = k.const("STAGES", 4)
    a = k.desc("a_desc", "a", ("BM", "BK"))
    ring = k.shared("a_ring", ("BM", "BK"), "STAGES", like=a)
    ready = k.barriers("ready", "STAGES")
    with k.partition("load", warps=1, regs=24):
        with k.loop("tile", pid, num_tiles, npid):
            with k.loop("kk", 0, k_steps, counter="it") as (kk, it):
                k.wait(ready, it % STAGES, (it // STAGES) % 2)
                ...
    kernel = k.build()

Expressions are `argus_core.ir.expr` (Python operators on symbols build them); the same
expression is lowered to Gluon and handed to z3 by the verifier.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

from argus_core.ir import explicit as x
from argus_core.ir.expr import IntLike, Sym, cdiv, emin

__all__ = ["Kernel", "cdiv", "emin", "npid", "pid", "pid_y"]

pid = Sym("pid", "pid", 0)
npid = Sym("npid", "num_pids", 1)
pid_y = Sym("pid_y", "pid", 0)  # program id along the grid's second axis


class Kernel:
    """Records an explicit-level kernel; `build()` returns the `ExplicitKernel`."""

    def __init__(self, name: str, *, num_warps: int = 4, family: str = "") -> None:
        self.name, self.num_warps, self.family = name, num_warps, family
        self._descs: list[x.Desc] = []
        self._ptrs: list[x.Ptr] = []
        self._scalars: list[str] = []
        self._consts: dict[str, int] = {}
        self._shared: list[x.Shared] = []
        self._bars: list[x.Barriers] = []
        self._parts: list[x.Partition] = []
        self._stack: list[list[x.XOp]] = []
        self._meta: dict[str, Any] = {}

    # ---------------------------------------------------------------- declarations
    def meta(self, **facts: Any) -> None:
        """Facts about the kernel for its launcher and reports (`grid`: the launch grid as
        text, `outputs`: the tensors it writes); not part of what is lowered or proved."""
        self._meta.update(facts)

    def programs(self, *extents: Any) -> None:
        """The launch grid's extent along each axis (`pid`, then `pid_y`): an expression over
        scalars and constexprs (`S // BM`), or None for a count the kernel never sees (the
        B * H heads). The verifier's output-ownership check quantifies over two CTAs of
        this grid for the stores at a partition's top level (`meta(grid=...)` stays the
        launcher's text)."""
        self._meta["programs"] = tuple(extents)

    def require(self, pred: Any, why: str) -> None:
        """A precondition on the shapes the launcher enforces (`pred` an expression over
        scalars and constexprs, e.g. `(S % BM).eq(0)`): the verifier assumes it where it
        quantifies over shapes (output ownership), and `why` says what breaks without it."""
        self._meta.setdefault("requires", ())
        self._meta["requires"] = (*self._meta["requires"], (pred, why))

    def scalar(self, name: str) -> Sym:
        self._scalars.append(name)
        return Sym(name, "shape", 1)

    def const(self, name: str, default: int) -> Sym:
        self._consts[name] = default
        return Sym(name, "const", 1)

    def desc(
        self,
        name: str,
        tensor: str,
        block: tuple[str, str],
        swizzle: int = 128,
        dtype: str = "bf16",
    ) -> str:
        bits = x.DTYPES.get(dtype, 16)
        self._descs.append(x.Desc(name, tensor, block, x.NVMMAShared(swizzle, bits), dtype))
        return name

    def ptr(self, name: str, tensor: str, dtype: str = "bf16") -> str:
        self._ptrs.append(x.Ptr(name, tensor, dtype))
        return name

    def shared(
        self,
        name: str,
        block: tuple[str, str],
        stages: int | str = 1,
        *,
        like: str,
        swizzle: int | None = None,
        layout: x.SwizzledShared | None = None,
    ) -> str:
        """A buffer with the dtype of `like` (a descriptor or pointer) and its shared
        layout: a descriptor's NVMMA layout (or `swizzle`), else `layout`."""
        d = next((d for d in self._descs if d.name == like), None)
        if d is not None:
            lay = d.layout if swizzle is None else x.NVMMAShared(swizzle, d.layout.element_bits)
            self._shared.append(x.Shared(name, block, stages, lay, d.dtype))
            return name
        q = next(q for q in self._ptrs if q.name == like)
        self._shared.append(x.Shared(name, block, stages, layout or x.SwizzledShared(), q.dtype))
        return name

    def barriers(self, name: str, stages: int | str, count: int = 1) -> str:
        self._bars.append(x.Barriers(name, stages, count))
        return name

    # ---------------------------------------------------------------- structure
    @contextmanager
    def partition(self, name: str, *, warps: int = 4, regs: int = 0, default: bool = False):
        self._stack.append([])
        yield
        body = tuple(self._stack.pop())
        self._parts.append(x.Partition(name, body, warps, regs, default))

    @contextmanager
    def loop(self, var: str, start: IntLike, stop: IntLike, step: IntLike = 1, counter: str = ""):
        v = Sym(var, "loop", 0)
        c = Sym(counter, "loop", 0) if counter else None
        self._stack.append([])
        yield (v, c) if counter else v
        body = tuple(self._stack.pop())
        self._emit(x.Loop(v, start, stop, step, body, c))

    def _emit(self, op: x.XOp) -> None:
        if not self._stack:
            raise x.ExplicitIRError(f"{op.label()} outside a partition")
        self._stack[-1].append(op)

    # ---------------------------------------------------------------- operations
    def let(self, name: str, value: IntLike) -> Sym:
        self._emit(x.Let(name, value))
        return Sym(name, "scalar")

    def wait(self, bar: str, stage: IntLike, phase: IntLike) -> None:
        self._emit(x.Wait(bar, stage, phase))

    def expect(self, bar: str, stage: IntLike, *descs: str) -> None:
        self._emit(x.Expect(bar, stage, tuple(descs)))

    def arrive(self, bar: str, stage: IntLike, pred=None) -> None:
        self._emit(x.Arrive(bar, stage, pred))

    def tma_load(self, desc: str, coords, dst: str, stage: IntLike, bar: str) -> None:
        self._emit(x.TmaLoad(desc, tuple(coords), dst, stage, bar))

    def zero_acc(self, acc: str, rows: str, cols: str, warps=(4, 1), layout=None) -> str:
        self._emit(x.ZeroAcc(acc, rows, cols, layout or x.WgmmaAcc(tuple(warps))))
        return acc

    def load_tile(
        self, dst: str, ptr: str, coords, stride: IntLike, block, layout: x.Blocked
    ) -> str:
        self._emit(x.LoadTile(dst, ptr, tuple(coords), stride, tuple(block), layout))
        return dst

    def store_regs(self, dst: str, src: str, stage: IntLike = 0) -> None:
        self._emit(x.StoreRegs(dst, src, stage))

    def barrier(self) -> None:
        self._emit(x.Barrier())

    def mfma(
        self,
        acc: str,
        a: str,
        a_stage: IntLike | None,
        b: str,
        b_stage: IntLike,
        *,
        b_trans: bool = False,
    ) -> None:
        """acc += a @ b by MFMA; `a_stage` None takes `a` from registers (a softmax's P),
        `b_trans` reads `b`'s block transposed."""
        self._emit(x.Mfma(acc, a, a_stage, b, b_stage, b_trans))

    def silu_mul(self, gate: str, up: str, up_offset: IntLike) -> None:
        """`gate` = silu(`gate`) * `up` in registers (the gated-MLP epilogue)."""
        self._emit(x.SiluMul(gate, up, up_offset))

    def load_scalar(self, name: str, ptr: str, index: IntLike) -> Sym:
        """`name` = int32 element `index` of table `ptr` (a value the launcher computed)."""
        self._emit(x.LoadScalar(name, ptr, index))
        return Sym(name, "scalar")

    def store_tile(
        self, ptr: str, acc: str, coords, stride: IntLike, *, cols=None, limits=None
    ) -> None:
        """`acc` to the tile of `ptr` at `coords`; `cols` stores only local columns
        `[0, cols)`, `limits` (rows, cols) masks off elements past the tensor."""
        lim = None if limits is None else tuple(limits)
        self._emit(x.StoreTile(ptr, acc, tuple(coords), stride, cols, lim))

    def wgmma(
        self,
        acc: str,
        a: str,
        a_stage: IntLike | None,
        b: str,
        b_stage: IntLike,
        *,
        b_trans: bool = False,
        use_acc: bool = True,
    ) -> None:
        self._emit(x.Wgmma(acc, a, a_stage, b, b_stage, b_trans, use_acc))

    def softmax_state(self, row_max: str, row_sum: str, s_acc: str, rows: str) -> None:
        self._emit(x.SoftmaxState(row_max, row_sum, s_acc, rows))

    def online_softmax(
        self, s_acc, row_max, row_sum, o, p, scale_log2, row0, col0, kv_len, causal=False, alpha=""
    ):
        self._emit(
            x.OnlineSoftmax(
                s_acc, row_max, row_sum, o, p, scale_log2, row0, col0, kv_len, causal, alpha
            )
        )

    def rescale_acc(self, acc: str, alpha: str) -> None:
        self._emit(x.RescaleAcc(acc, alpha))

    def move(self, dst: str, src: str) -> None:
        self._emit(x.Move(dst, src))

    def normalize_store(self, dst: str, o: str, row_sum: str) -> None:
        self._emit(x.NormalizeStore(dst, o, row_sum))

    def store_lse(self, ptr: str, row_max: str, row_sum: str, s_acc: str, row0: IntLike) -> None:
        self._emit(x.StoreLse(ptr, row_max, row_sum, s_acc, row0))

    def wgmma_wait(self, acc: str, pending: int = 0, keep: tuple[str, ...] = ()) -> None:
        self._emit(x.WgmmaWait(acc, pending, tuple(keep)))

    def store_shared(self, dst: str, acc: str) -> None:
        self._emit(x.StoreShared(dst, acc))

    def fence_async_shared(self) -> None:
        self._emit(x.FenceAsyncShared())

    def tma_store(self, desc: str, coords, src: str) -> None:
        self._emit(x.TmaStore(desc, tuple(coords), src))

    def store_wait(self, pending: int = 0) -> None:
        self._emit(x.StoreWait(pending))

    def build(self) -> x.ExplicitKernel:
        return x.ExplicitKernel(
            self.name,
            tuple(self._descs),
            tuple(self._scalars),
            dict(self._consts),
            tuple(self._shared),
            tuple(self._bars),
            tuple(self._parts),
            self.num_warps,
            self.family,
            ptrs=tuple(self._ptrs),
            meta=dict(self._meta),
        )
