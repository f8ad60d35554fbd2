"""Lowering explicit-level kernels (`argus_core.ir.explicit`) to Gluon source, generic part.

A Gluon target is a rule table in its backend (`plugins/backends/hopper/gluon.py`): one
function per op type giving the op's source lines. This module owns what every Gluon
target shares: expression printing, loops and iteration counters, one `@gluon.jit`
function per warp-specialized partition, and the kernel entry that allocates shared
memory and barriers and forks the partitions (`gl.warp_specialize`). The target gives
its imports, its shared-layout and barrier spelling through `GluonTarget`.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from argus_core.errors import choices_error
from argus_core.ir import explicit as x
from argus_core.ir.expr import IntLike, Sym, to_source
from argus_core.types import LoweredKernel, Param

_SYM_NAMES = {"pid": "gl.program_id(0)", "npid": "gl.num_programs(0)", "pid_y": "gl.program_id(1)"}


def expr(e: IntLike) -> str:
    """Gluon source for a scalar expression (pid/npid become program_id/num_programs)."""
    return to_source(
        e,
        name_of=lambda s: _SYM_NAMES.get(s.name, s.name),
        funcs={"cdiv": "gl.cdiv", "min": "gl.minimum", "max": "gl.maximum"},
    )


Rule = Callable[[Any, "x.ExplicitKernel"], list[str]]


@dataclass(frozen=True)
class GluonTarget:
    """What a Gluon target contributes besides its op rules: its import lines, the
    fence after barrier initialisation, its name (in errors and in `family.explicit_kernel`,
    which builds the kernel for it), and `compile(kernel, consts) -> CompileReport`, its
    cross-compile (never raising for the kernel). A backend declares its Gluon target as
    `explicit_target` (`argus_core.backend.BackendBase`)."""

    name: str
    imports: tuple[str, ...]
    rules: Mapping[type, Rule]
    init_fence: str = "fence_async_shared()"
    compile: Callable[[x.ExplicitKernel, dict[str, int]], Any] | None = None


def lowered_kernel(kernel: x.ExplicitKernel, target: GluonTarget) -> LoweredKernel:
    """`kernel` lowered for `target` as the pipeline's `LoweredKernel`: the Gluon module,
    its parameters (TMA descriptors and pointers bound to the family's tensors, the int
    scalars, the constexprs), the launch grid the kernel's builder states in `meta["grid"]`."""
    params = [Param(d.name, "ptr", ("tensor", d.tensor), d.dtype) for d in kernel.descs]
    params += [Param(q.name, "ptr", ("tensor", q.tensor), q.dtype) for q in kernel.ptrs]
    params += [Param(s, "int", ("scalar", s), "i32") for s in kernel.scalars]
    params += [Param(c, "constexpr", ("const", c)) for c in kernel.consts]
    return LoweredKernel(
        name=kernel.name,
        source=lower_explicit(kernel, target),
        params=params,
        grid=str(kernel.meta.get("grid", "")),
        outputs=list(kernel.meta.get("outputs", ())),
        constexprs=dict(kernel.consts),
        tma_tensors=[d.tensor for d in kernel.descs],
    )


def lower_explicit(kernel: x.ExplicitKernel, target: GluonTarget) -> str:
    """The Gluon module source for `kernel`: one jit function per partition, then the entry
    named `kernel.name`. Raises ExplicitIRError for an op the target has no rule for."""
    args = _partition_args(kernel)
    out = list(target.imports) + [""]
    for p in kernel.partitions:
        out += ["", "@gluon.jit", f"def _part_{p.name}({_params(kernel, inner=True)}):"]
        counters = sorted(
            {
                op.counter.name
                for op in x.walk(p.body)
                if isinstance(op, x.Loop) and op.counter is not None
            }
        )
        out += [f"    {c} = 0" for c in counters]
        out += _body(p.body, kernel, target, 1) or ["    pass"]
    out += ["", "", "@gluon.jit", f"def {kernel.name}({_params(kernel)}):"]
    for s in kernel.shared:
        d = next((d for d in kernel.descs if d.dtype == s.dtype), None)
        q = next((q for q in kernel.ptrs if q.dtype == s.dtype), None)
        dtype = f"{d.name}.dtype" if d else f"{q.name}.dtype.element_ty" if q else f"gl.{s.dtype}"
        shape = list(s.block) if s.stages == 1 else [str(s.stages), *s.block]
        out.append(
            f"    {s.name} = gl.allocate_shared_memory({dtype}, [{', '.join(shape)}], {s.layout.gluon()})"
        )
    for b in kernel.barriers:
        out.append(
            f"    {b.name} = gl.allocate_shared_memory(gl.int64, [{b.stages}, 1], mbarrier.MBarrierLayout())"
        )
    for b in kernel.barriers:  # each array over its own stages
        out.append(f"    for _i in gl.static_range({b.stages}):")
        out.append(f"        mbarrier.init({b.name}.index(_i), count={b.count})")
    if kernel.barriers:
        out.append(f"    {target.init_fence}")
    default = next(p for p in kernel.partitions if p.default)
    workers = [p for p in kernel.partitions if not p.default]
    if workers:
        parts = [default, *workers]
        out.append("    gl.warp_specialize([")
        out += [f"        (_part_{p.name}, ({args},))," for p in parts]
        out.append(f"    ], {[p.warps for p in workers]}, {[p.regs for p in workers]})")
    else:  # one partition: the kernel's warps run it in place
        out.append(f"    _part_{default.name}({args})")
    for b in kernel.barriers:
        out.append(f"    for _i in gl.static_range({b.stages}):")
        out.append(f"        mbarrier.invalidate({b.name}.index(_i))")
    return "\n".join(out) + "\n"


def _params(kernel: x.ExplicitKernel, inner: bool = False) -> str:
    names = [d.name for d in kernel.descs] + [q.name for q in kernel.ptrs] + list(kernel.scalars)
    if inner:
        names += [s.name for s in kernel.shared] + [b.name for b in kernel.barriers]
    names += [f"{c}: gl.constexpr" for c in kernel.consts]
    return ", ".join(names)


def _partition_args(kernel: x.ExplicitKernel) -> str:
    names = [d.name for d in kernel.descs] + [q.name for q in kernel.ptrs] + list(kernel.scalars)
    names += [s.name for s in kernel.shared] + [b.name for b in kernel.barriers]
    return ", ".join(names + list(kernel.consts))
    return ", ".join(names)


def _body(
    body: tuple[x.XOp, ...], kernel: x.ExplicitKernel, target: GluonTarget, depth: int
) -> list[str]:
    pad = "    " * depth
    out: list[str] = []
    for op in body:
        if isinstance(op, x.Loop):
            out.append(
                f"{pad}for {op.var.name} in range({expr(op.start)}, {expr(op.stop)}, {expr(op.step)}):"
            )
            out += _body(op.body, kernel, target, depth + 1)
            if op.counter is not None:
                out.append(f"{pad}    {op.counter.name} += 1")
            continue
        if isinstance(op, x.Let):
            out.append(f"{pad}{op.name} = {expr(op.value)}")
            continue
        rule = target.rules.get(type(op))
        if rule is None:
            raise x.ExplicitIRError(
                f"{target.name}: {choices_error('explicit op', op.label(), [t.__name__ for t in target.rules])}"
            )
        out += [pad + line for line in rule(op, kernel)]
    return out


def shared_index(kernel: x.ExplicitKernel, name: str, stage: IntLike) -> str:
    """`name.index(stage)` for a ring, `name` for a single buffer."""
    return name if kernel.buffer(name).stages == 1 else f"{name}.index({expr(stage)})"


def zero_acc(kernel: x.ExplicitKernel, acc: str) -> x.ZeroAcc:
    """The `ZeroAcc` declaring accumulator `acc` (its shape and layout); ExplicitIRError
    naming the kernel and the accumulator where there is none."""
    zero = kernel.acc_decl(acc)
    if zero is None:
        raise x.ExplicitIRError(f"{kernel.name}: accumulator {acc!r} has no ZeroAcc")
    return zero


def store_tile_indices(op: x.StoreTile, rows: int | str, cols: int | str, layout: str):
    """(lines, offsets, mask) of a `StoreTile` in register `layout`: the lines define `_r`
    (global rows), `_c` (the tile's local columns) and `_cc` (global columns); `offsets`
    the element offsets into `op.ptr`; `mask` None when the whole tile is stored, else its
    `cols` and `limits` terms."""
    lines = [
        f"_r = {expr(op.coords[0])} + gl.arange(0, {rows}, layout=gl.SliceLayout(1, {layout}))",
        f"_c = gl.arange(0, {cols}, layout=gl.SliceLayout(0, {layout}))",
        f"_cc = {expr(op.coords[1])} + _c",
    ]
    terms = []
    if op.limits is not None:
        terms += [f"(_r[:, None] < {expr(op.limits[0])})", f"(_cc[None, :] < {expr(op.limits[1])})"]
    if op.cols is not None:
        terms.append(f"(_c[None, :] < {expr(op.cols)})")
    offsets = f"_r[:, None] * {expr(op.stride)} + _cc[None, :]"
    return lines, offsets, " & ".join(terms) or None


def load_entry(kernel: x.ExplicitKernel, source: str, workdir: str | None = None):
    """Import the lowered module from a file (Gluon's jit reads the function's source
    file) and return its entry function. The source is ours, generated from the IR."""
    folder = Path(workdir or tempfile.mkdtemp(prefix="argus_gluon_"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{kernel.name}.py"
    path.write_text(source)
    mod_name = f"argus_gluon_{kernel.name}_{abs(hash(source))}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    spec.loader.exec_module(module)
    return module.__dict__[kernel.name]


def block_shape(
    kernel: x.ExplicitKernel, block: tuple[str, str], consts: Mapping[str, int]
) -> list[int]:
    return [kernel.const(b, dict(consts)) for b in block]


__all__ = [
    "GluonTarget",
    "Sym",
    "block_shape",
    "expr",
    "load_entry",
    "lower_explicit",
    "lowered_kernel",
    "shared_index",
    "store_tile_indices",
    "zero_acc",
]
