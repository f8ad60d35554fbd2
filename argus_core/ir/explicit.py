"""The explicit level of the IR: warps, shared memory, barriers and matrix instructions.

The tile level (`argus_core.ir.nodes`) leaves layouts, staging and scheduling to the
compiler. Here they are values the kernel names: shared buffers and rings with their
shared layout (`NVMMAShared`, the swizzle TMA writes and wgmma reads), mbarrier arrays
with explicit stage and phase expressions, TMA copies, warpgroup MMAs with an accumulator
layout (`argus_core.layout.linear.nvidia_wgmma_acc`), and warp-specialized partitions.

Scalar index expressions are `argus_core.ir.expr` expressions, so the same expression is
printed by a lowering (`to_source`) and reasoned about by the verifier (`to_z3`). Symbols:
kernel scalars (`M`, `N`, `K`, kind "shape"), constexprs (`BM`, `STAGES`, kind "const"),
loop variables (kind "loop"), the program id (`pid`, kind "pid") and the grid size
(`npid`, kind "num_pids"), and a loop's iteration counter (kind "loop"): the number of
inner iterations the partition has run before this one, across outer loops, which is what
ring stages and phases are functions of.

These nodes are not tile-level `Op`s: a backend lowers them with its Gluon rule table
(`plugins/backends/hopper/gluon.py`), the SMT verifier checks them with
`plugins/verifiers/smt/explicit_ops.py`. Every op carries `point`, the program point a
counterexample names (`<partition>/<loop path>/<index>:<op>`), set by `ExplicitKernel`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from argus_core.errors import choices_error
from argus_core.ir.expr import Expr, IntLike, Sym

SWIZZLES = (0, 32, 64, 128)

# A policy selects the explicit level with the compiler option `level: explicit`; its
# other compiler options are then the explicit kernel's build knobs (`num_warps`,
# `mma_in_flight`, ...) and its tiles the explicit kernel's constexprs (the family's
# `explicit_kernel` reads them; planners propose such policies from KB `level` actions).
LEVEL_OPTION = "level"
EXPLICIT = "explicit"


def selects_explicit(policy: Any) -> bool:
    """True when `policy` (an `argus_core.types.Policy`) asks for the explicit level."""
    return policy.compiler.get(LEVEL_OPTION) == EXPLICIT


def explicit_knobs(policy: Any) -> dict[str, Any]:
    """The explicit kernel's build knobs of `policy`: its compiler options but `level`."""
    return {k: v for k, v in policy.compiler.items() if k != LEVEL_OPTION}


DTYPES = {"bf16": 16, "fp16": 16, "fp32": 32, "fp8e4nv": 8}


class ExplicitIRError(ValueError):
    """An explicit-level kernel that is malformed before any verification (a bad name, a
    swizzle or dtype outside the valid choices, a buffer used that was never declared)."""


@dataclass(frozen=True)
class NVMMAShared:
    """The shared layout TMA writes and wgmma reads: rows of `swizzle_bytes` bytes whose
    16-byte chunks are XOR-permuted by the row index (0 = no swizzle)."""

    swizzle_bytes: int = 128
    element_bits: int = 16
    transposed: bool = False

    def __post_init__(self) -> None:
        if self.swizzle_bytes not in SWIZZLES:
            raise ExplicitIRError(choices_error("swizzle_bytes", self.swizzle_bytes, SWIZZLES))
        if self.element_bits not in (8, 16, 32):
            raise ExplicitIRError(choices_error("element_bits", self.element_bits, (8, 16, 32)))

    def gluon(self) -> str:
        return (
            f"gl.NVMMASharedLayout(swizzle_byte_width={self.swizzle_bytes}, "
            f"element_bitwidth={self.element_bits}, rank=2, transposed={self.transposed})"
        )


@dataclass(frozen=True)
class SwizzledShared:
    """A generic shared (LDS) layout: `vec`-element groups XOR-swizzled by row phase
    (`per_phase` rows per phase, `max_phase` phases), fastest along `order[0]`."""

    vec: int = 8
    per_phase: int = 1
    max_phase: int = 8
    order: tuple[int, int] = (1, 0)

    def gluon(self) -> str:
        return (
            f"gl.SwizzledSharedLayout(vec={self.vec}, per_phase={self.per_phase}, "
            f"max_phase={self.max_phase}, order={list(self.order)})"
        )


@dataclass(frozen=True)
class Blocked:
    """A blocked register layout (`argus_core.layout.linear.blocked`)."""

    size_per_thread: tuple[int, int]
    threads_per_warp: tuple[int, int]
    warps: tuple[int, int]
    order: tuple[int, int] = (1, 0)

    def gluon(self) -> str:
        return (
            f"gl.BlockedLayout({list(self.size_per_thread)}, {list(self.threads_per_warp)}, "
            f"{list(self.warps)}, {list(self.order)})"
        )


@dataclass(frozen=True)
class MfmaAcc:
    """Register layout of a CDNA3 MFMA accumulator (`amd_mfma`): instruction
    `instr` = (M, N, K), `warps` tiling the output; operands are loaded from shared memory
    in its dot-operand layouts with `k_width` consecutive K elements per lane."""

    instr: tuple[int, int, int] = (16, 16, 16)
    warps: tuple[int, int] = (2, 2)
    k_width_a: int = 4
    k_width_b: int = 4

    def gluon(self) -> str:
        return (
            f"gl.amd.AMDMFMALayout(version=3, instr_shape={list(self.instr)}, transposed=True, "
            f"warps_per_cta={list(self.warps)})"
        )


@dataclass(frozen=True)
class WgmmaAcc:
    """Register layout of a Hopper wgmma accumulator (`nvidia_wgmma_acc`): `warps` warps
    stacked on dim0, instruction m64nNk16 with N = the tile's BN."""

    warps: tuple[int, int] = (4, 1)


@dataclass(frozen=True)
class Desc:
    """A TMA tensor descriptor parameter: a global 2-D tensor, read or written in blocks of
    `block` (constexpr names) laid out in shared memory as `layout`."""

    name: str
    tensor: str
    block: tuple[str, str]
    layout: NVMMAShared
    dtype: str = "bf16"

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ExplicitIRError(choices_error("dtype", self.dtype, tuple(DTYPES)))


@dataclass(frozen=True)
class Ptr:
    """A pointer parameter to a row-major 2-D tensor (buffer loads and stores)."""

    name: str
    tensor: str
    dtype: str = "bf16"


@dataclass(frozen=True)
class Shared:
    """A shared-memory buffer of `stages` blocks of `block` (a ring when stages > 1)."""

    name: str
    block: tuple[str, str]
    stages: int | str
    layout: NVMMAShared | SwizzledShared
    dtype: str = "bf16"


@dataclass(frozen=True)
class Barriers:
    """An array of `stages` mbarriers, each completing a phase after `count` arrivals (and
    the transaction bytes its `Expect`s announced)."""

    name: str
    stages: int | str
    count: int = 1


# ------------------------------------------------------------------ operations


@dataclass(frozen=True)
class XOp:
    """Base of explicit-level operations; `point` is filled in by `ExplicitKernel`."""

    point: str = field(default="", kw_only=True, compare=False)

    def label(self) -> str:
        return type(self).__name__


@dataclass(frozen=True)
class Wait(XOp):
    """Block until barrier `bar[stage]` has completed the phase of parity `phase`."""

    bar: str
    stage: IntLike
    phase: IntLike


@dataclass(frozen=True)
class Expect(XOp):
    """Announce that the current phase of `bar[stage]` completes after the bytes of one
    block of each descriptor in `descs` have arrived (and one arrival)."""

    bar: str
    stage: IntLike
    descs: tuple[str, ...]


@dataclass(frozen=True)
class Arrive(XOp):
    """Arrive once on `bar[stage]` (a consumer releasing a stage), where `pred` holds
    (always when None)."""

    bar: str
    stage: IntLike
    pred: Expr | None = None


@dataclass(frozen=True)
class TmaLoad(XOp):
    """TMA copy of the block of `desc` at `coords` into `dst[stage]`, completing on
    `bar[stage]`."""

    desc: str
    coords: tuple[IntLike, IntLike]
    dst: str
    stage: IntLike
    bar: str


@dataclass(frozen=True)
class ZeroAcc(XOp):
    """A new fp32 accumulator `acc` of shape (`rows`, `cols`) in `layout`, all zeros."""

    acc: str
    rows: str
    cols: str
    layout: WgmmaAcc | MfmaAcc = WgmmaAcc()


@dataclass(frozen=True)
class LoadTile(XOp):
    """Registers `dst` = the (`block`) tile of row-major `ptr` (row stride `stride`) at
    `coords`, by buffer loads, in register layout `layout`."""

    dst: str
    ptr: str
    coords: tuple[IntLike, IntLike]
    stride: IntLike
    block: tuple[str, str]
    layout: Blocked


@dataclass(frozen=True)
class StoreRegs(XOp):
    """Every thread writes its registers of `src` (a `LoadTile` result) into
    `dst[stage]` (generic shared-memory stores)."""

    dst: str
    src: str
    stage: IntLike = 0


@dataclass(frozen=True)
class Barrier(XOp):
    """A workgroup barrier (`s_barrier`): every thread's shared accesses before it happen
    before every thread's after it."""


@dataclass(frozen=True)
class Mfma(XOp):
    """acc += a[a_stage] @ b[b_stage]: operands read from shared memory into the MFMA
    dot-operand layouts of `acc`'s layout, then `v_mfma`. `a_stage` None: `a` is a register
    value already in the A dot-operand layout (an `OnlineSoftmax`'s P); `b_trans`: `b`'s
    block is read transposed (a permuted view: the K blocks of attention, expert weights
    stored [N, K])."""

    acc: str
    a: str
    a_stage: IntLike | None
    b: str
    b_stage: IntLike
    b_trans: bool = False


@dataclass(frozen=True)
class StoreTile(XOp):
    """The accumulator `acc`, cast to `ptr`'s dtype, to the tile of row-major `ptr`
    (row stride `stride`) at `coords`, by buffer stores (CDNA3) or masked global stores
    (Hopper). `cols`: only the tile's local columns `[0, cols)` are stored (overlapping
    column tiles, each owning the first `cols` of its `BN`); `limits`: the tensor's
    (rows, cols), elements at or past them are masked off. None: the whole tile, unmasked."""

    ptr: str
    acc: str
    coords: tuple[IntLike, IntLike]
    stride: IntLike
    cols: IntLike | None = None
    limits: tuple[IntLike, IntLike] | None = None


@dataclass(frozen=True)
class Wgmma(XOp):
    """Asynchronous warpgroup MMA: acc = a @ b (+ acc when `use_acc`). `a` is `a[a_stage]`
    in shared memory, or, when `a_stage` is None, a register value in the dot-operand
    layout of `acc` (from `OnlineSoftmax`); `b` is `b[b_stage]`, read transposed (a
    permuted view: K blocks of attention) when `b_trans`."""

    acc: str
    a: str
    a_stage: IntLike | None
    b: str
    b_stage: IntLike
    b_trans: bool = False
    use_acc: bool = True


@dataclass(frozen=True)
class SoftmaxState(XOp):
    """Running row max `row_max` (-inf) and row sum `row_sum` (0) of an online softmax over the rows of
    accumulator `s_acc` (fp32, in its row-slice layout)."""

    row_max: str
    row_sum: str
    s_acc: str
    rows: str


@dataclass(frozen=True)
class OnlineSoftmax(XOp):
    """One step of the online softmax (FlashAttention): scores `s_acc` scaled by
    `scale_log2` (softmax scale times log2 e); columns `col0 + j` at or past `kv_len`, and
    with `causal` those past the row `row0 + i`, masked to -inf; `row_max`, `row_sum` updated; `o`
    rescaled by exp2(m_old - m_new); `p` = exp2(s - row_max) in bf16, converted to the
    dot-operand layout of `o` (the A operand of the next wgmma). `p`'s column j holds the
    score of key `col0 + j`."""

    s_acc: str
    row_max: str
    row_sum: str
    o: str
    p: str
    scale_log2: float
    row0: IntLike
    col0: IntLike
    kv_len: IntLike
    causal: bool = False
    # when set, `o` is not rescaled here (a wgmma may still be adding into it): the per-row
    # factor exp2(m_old - m_new) goes to this register, in `o`'s row layout (`RescaleAcc`)
    alpha: str = ""


@dataclass(frozen=True)
class NormalizeStore(XOp):
    """`dst` = (`o` / `row_sum` per row) in `dst`'s dtype, by every thread of the partition."""

    dst: str
    o: str
    row_sum: str


@dataclass(frozen=True)
class StoreLse(XOp):
    """The natural log-sum-exp of each row of the online softmax over `s_acc`
    (`(row_max + log2(row_sum)) * ln 2`: the state is in base 2) stored to the fp32 rows
    `row0 + i` of the flat pointer `ptr`, by every thread of the partition."""

    ptr: str
    row_max: str
    row_sum: str
    s_acc: str
    row0: IntLike


@dataclass(frozen=True)
class WgmmaWait(XOp):
    """Wait until at most `pending` warpgroup MMAs are in flight (the partition's, in issue
    order; `acc` names the result this wait hands on). `keep`: register operands of the
    MMAs it retires, kept alive (not reused) until then."""

    acc: str
    pending: int = 0
    keep: tuple[str, ...] = ()


@dataclass(frozen=True)
class RescaleAcc(XOp):
    """`acc` *= `alpha` per row (the deferred online-softmax rescale of `OnlineSoftmax`)."""

    acc: str
    alpha: str


@dataclass(frozen=True)
class Move(XOp):
    """Register `dst` takes the value of register `src` (a loop-carried operand: the P of
    this iteration becomes the A operand of the next iteration's wgmma)."""

    dst: str
    src: str


@dataclass(frozen=True)
class StoreShared(XOp):
    """Every thread of the partition writes its registers of `acc` (converted to the
    buffer's dtype) into `dst` (stage 0)."""

    dst: str
    acc: str


@dataclass(frozen=True)
class FenceAsyncShared(XOp):
    """Order the partition's generic shared-memory writes before later async-proxy (TMA,
    wgmma) accesses."""


@dataclass(frozen=True)
class TmaStore(XOp):
    """TMA copy of `src` (stage 0) to the block of `desc` at `coords`."""

    desc: str
    coords: tuple[IntLike, IntLike]
    src: str


@dataclass(frozen=True)
class StoreWait(XOp):
    """Wait until at most `pending` TMA stores of this thread are still reading shared."""

    pending: int = 0


@dataclass(frozen=True)
class SiluMul(XOp):
    """`gate` = silu(`gate`) * `up`, elementwise, in place (fp32 accumulators of one
    layout): the gated-MLP epilogue. `up_offset`: the column offset of `up`'s weight rows
    from `gate`'s (the up half of stacked [gate; up] weights), which the verifier checks."""

    gate: str
    up: str
    up_offset: IntLike


@dataclass(frozen=True)
class LoadScalar(XOp):
    """Bind scalar `name` to the int32 element `index` of the flat pointer `ptr` (a table
    the launcher fills, e.g. the expert of each row block of a grouped GEMM); the verifier
    treats its value as unknown (any int >= 0)."""

    name: str
    ptr: str
    index: IntLike


@dataclass(frozen=True)
class Let(XOp):
    """Bind scalar `name` to `value` (printed once, used by later expressions)."""

    name: str
    value: IntLike


@dataclass(frozen=True)
class Loop(XOp):
    """`for var in range(start, stop, step)`. `counter` names the iteration counter of an
    inner loop (a Sym of kind "loop"): its value is the count of earlier iterations of this
    loop across all enclosing iterations, and it increases by one after each body."""

    var: Sym
    start: IntLike
    stop: IntLike
    step: IntLike
    body: tuple[XOp, ...]
    counter: Sym | None = None

    def label(self) -> str:
        return f"Loop({self.var.name})"


@dataclass(frozen=True)
class Partition:
    """A warp-specialized partition: `default` runs in the kernel's `num_warps` warps, the
    others in `warps` extra warps with `regs` registers per thread."""

    name: str
    body: tuple[XOp, ...]
    warps: int = 4
    regs: int = 0
    default: bool = False


@dataclass(frozen=True)
class ExplicitKernel:
    """A kernel at the explicit level. `scalars` are int parameters, `consts` constexprs
    with default values (a policy's tiles override them)."""

    name: str
    descs: tuple[Desc, ...]
    scalars: tuple[str, ...]
    consts: dict[str, int]
    shared: tuple[Shared, ...]
    barriers: tuple[Barriers, ...]
    partitions: tuple[Partition, ...]
    num_warps: int = 4
    family: str = ""
    meta: dict[str, Any] = field(default_factory=dict, compare=False)
    ptrs: tuple[Ptr, ...] = ()

    def __post_init__(self) -> None:
        if sum(p.default for p in self.partitions) != 1:
            raise ExplicitIRError(f"{self.name}: exactly one partition must be the default")
        names = [d.name for d in self.descs] + [p.name for p in self.ptrs]
        names += [s.name for s in self.shared]
        names += [b.name for b in self.barriers] + list(self.scalars) + list(self.consts)
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ExplicitIRError(f"{self.name}: names declared twice: {sorted(dup)}")
        parts = tuple(replace(p, body=_number(p.body, p.name)) for p in self.partitions)
        object.__setattr__(self, "partitions", parts)

    def desc(self, name: str) -> Desc:
        return _find(self.descs, name, "descriptor")

    def ptr(self, name: str) -> Ptr:
        return _find(self.ptrs, name, "pointer")

    def buffer(self, name: str) -> Shared:
        return _find(self.shared, name, "shared buffer")

    def acc_decl(self, acc: str) -> ZeroAcc | None:
        """The `ZeroAcc` declaring accumulator `acc` (its shape and layout), None if none."""
        return next((o for _, o in self.ops() if isinstance(o, ZeroAcc) and o.acc == acc), None)

    def barrier(self, name: str) -> Barriers:
        return _find(self.barriers, name, "barrier array")

    def const(self, v: int | str, consts: dict[str, int] | None = None) -> int:
        if isinstance(v, int):
            return v
        table = {**self.consts, **(consts or {})}
        if v not in table:
            raise ExplicitIRError(choices_error("constexpr", v, tuple(table)))
        return int(table[v])

    def with_consts(self, **consts: int) -> ExplicitKernel:
        unknown = set(consts) - set(self.consts)
        if unknown:
            raise ExplicitIRError(
                choices_error("constexpr", sorted(unknown)[0], tuple(self.consts))
            )
        return replace(self, consts={**self.consts, **consts})

    def ops(self):
        """Every op with its partition, depth first."""
        for p in self.partitions:
            yield from ((p, op) for op in walk(p.body))

    def shared_bytes(self, consts: dict[str, int] | None = None) -> int:
        total = 0
        for s in self.shared:
            rows, cols = (self.const(x, consts) for x in s.block)
            total += self.const(s.stages, consts) * rows * cols * DTYPES[s.dtype] // 8
        return total + sum(8 * self.const(b.stages, consts) for b in self.barriers)


def walk(body: tuple[XOp, ...]):
    for op in body:
        yield op
        if isinstance(op, Loop):
            yield from walk(op.body)


def replace_op(kernel: ExplicitKernel, point: str, new: XOp | None) -> ExplicitKernel:
    """`kernel` with the op at `point` replaced by `new` (None deletes it): the mutation
    a planted bug makes."""
    found = []

    def go(body: tuple[XOp, ...]) -> tuple[XOp, ...]:
        out: list[XOp] = []
        for op in body:
            if op.point == point:
                found.append(op)
                if new is not None:
                    out.append(new)
                continue
            if isinstance(op, Loop):
                op = replace(op, body=go(op.body))
            out.append(op)
        return tuple(out)

    parts = tuple(replace(p, body=go(p.body)) for p in kernel.partitions)
    if not found:
        points = [op.point for _, op in kernel.ops()]
        raise ExplicitIRError(choices_error("program point", point, points))
    return replace(kernel, partitions=parts)


def _number(body: tuple[XOp, ...], prefix: str) -> tuple[XOp, ...]:
    out = []
    for i, op in enumerate(body):
        point = f"{prefix}/{i}:{op.label()}"
        if isinstance(op, Loop):
            op = replace(op, body=_number(op.body, f"{prefix}/{op.var.name}"))
        out.append(_with_point(op, point))
    return tuple(out)


def _with_point(op: XOp, point: str) -> XOp:
    kwargs = {f.name: getattr(op, f.name) for f in fields(op) if f.name != "point"}
    return type(op)(**kwargs, point=point)


def _find(items, name: str, what: str):
    for it in items:
        if it.name == name:
            return it
    raise ExplicitIRError(choices_error(what, name, tuple(i.name for i in items)))


def expr_syms(e: IntLike) -> set[Sym]:
    return e.symbols() if isinstance(e, Expr) else set()
