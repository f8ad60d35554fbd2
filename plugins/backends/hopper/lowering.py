"""Hopper's Triton lowering: the generic Triton rules (`argus_core.lowering.triton`) with
three policy options of its own, which Triton's compiler never sees (`LOWERING_OPTIONS`):

- `tma`: a plain tile view's Load and Store go through a TMA tensor descriptor
  (`tl.make_tensor_descriptor`, made once per program before any loop). The pointer path is
  kept beside it and a launch-time constexpr `USE_TMA` picks one: bound to ("descriptors",
  the tensors), the launcher sets it to 0 for tensors a descriptor cannot describe
  (unaligned pitches, `argus_core.evaluate.launch.descriptors_ok`).
- `warp_specialize`: the first loop with a dot is a warp-specialized `tl.range` (producer
  warps issue the TMA loads, consumers the wgmma); Triton 3.6 needs the loop's loads on
  descriptors, so it follows `tma`.
- `persistent`: `persistent` x SMs programs loop over the grid's virtual program ids, each
  id once (the verified kernel's programs, run in sequence by fewer hardware ones).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from argus_core.ir import (
    Dot,
    Expr,
    IntLike,
    KernelIR,
    Load,
    Loop,
    Op,
    Store,
    View,
    as_expr,
    to_source,
)
from argus_core.lowering.rules import RuleTable
from argus_core.lowering.triton import (
    TRITON_RULES,
    TritonEmitter,
    TritonLowering,
    emit_loop,
    load_text,
    store_text,
    tuple_src,
)
from argus_core.target import TargetSpec
from argus_core.types import Param, Policy

# the policy options this lowering reads; Triton's compile and launch must not get them
LOWERING_OPTIONS: tuple[str, ...] = ("tma", "warp_specialize", "persistent")


class HopperEmitter(TritonEmitter):
    """The generic emitter plus the per-kernel state of the Hopper rules: the policy's
    lowering options and the TMA descriptors made so far."""

    def __init__(
        self,
        ir: KernelIR,
        rules: RuleTable,
        policy: Policy,
        constexprs: dict[str, int],
        target: TargetSpec,
        options: Mapping[str, Any],
    ):
        super().__init__(ir, rules, policy, constexprs, target, options)
        comp = policy.compiler
        self.tma = bool(comp.get("tma"))
        self.warp_specialize = bool(comp.get("warp_specialize")) and self.tma
        self.programs = int(comp.get("persistent") or 0) * target.cus
        self.descs: dict[tuple[str, tuple[str, ...]], str] = {}  # (tensor, block) -> name
        self.desc_block: dict[str, tuple[str, ...]] = {}
        self.desc_lines: list[str] = []
        self.specialized = False

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
            suffix = f".reshape({tuple_src(boxed)})"
        if order != list(range(rank)):  # back to the view's own dim order
            perm = ", ".join(str(order.index(i)) for i in range(rank))
            suffix += f".permute({perm})"
        return self.descs[key], "[" + ", ".join(starts) + "]", suffix


# --- the rules Hopper adds or overrides ------------------------------------------------------


def load(em: HopperEmitter, op: Load, ind: int) -> None:
    """The generic load, or the same tile through a TMA descriptor (zero fill = other)."""
    text = load_text(em, op)
    box = em.tma_box(op.view, op.mask) if op.other == 0 else None
    if box is None:
        em.emit(ind, text, op, op.view.desc)
        return
    desc, offsets, reshape = box
    em.emit(ind, "if USE_TMA:", op, op.view.desc)
    em.emit(ind + 1, f"{em.name(op.out)} = {desc}.load({offsets}){reshape}")
    em.emit(ind, "else:")
    em.emit(ind + 1, text)


def store(em: HopperEmitter, op: Store, ind: int) -> None:
    """The generic store, or through a TMA descriptor (TMA stores clip at the tensor's
    edges, as the mask does). Atomic adds keep the generic rule."""
    text = store_text(em, op)
    box = em.tma_box(op.view, op.mask, load=False)
    if box is None:
        em.emit(ind, text, op, op.view.desc)
        return
    desc, offsets, _ = box
    block = em.desc_block[desc]
    value = em.name(op.value)
    if len(block) != len(op.view.shape):
        value = f"{value}.reshape({tuple_src(block)})"
    em.emit(ind, "if USE_TMA:", op, op.view.desc)
    em.emit(ind + 1, f"{desc}.store({offsets}, {value})")
    em.emit(ind, "else:")
    em.emit(ind + 1, text)


def loop(em: HopperEmitter, op: Loop, ind: int) -> None:
    """The first loop with a dot is warp-specialized under warp_specialize (and USE_TMA:
    Triton 3.6 specializes only loops whose loads go through descriptors)."""
    if em.warp_specialize and _has_dot(op.body) and not em.specialized:
        em.specialized = True
        emit_loop(em, op, ind, "tl.range({}, warp_specialize=USE_TMA == 1)".format)
    else:
        emit_loop(em, op, ind)


def kernel(em: HopperEmitter, ir: KernelIR, ind: int) -> None:
    """The body, as a loop over virtual program ids when persistent (1-D grids); then the
    TMA descriptors once per program, before any loop, and the USE_TMA constexpr."""
    total = to_source(ir.grid[0], None, {"cdiv": "tl.cdiv"}) if len(ir.grid) == 1 else None
    if em.programs and total is not None:
        em.pid = "_pid"
        em.lines.append(
            "    " * ind + f"for _pid in tl.range(tl.program_id(0), {total}, tl.num_programs(0)):"
        )
        em.ops(ir.ops, ind + 1)
        grid = to_source(ir.grid[0], None, {"cdiv": "triton.cdiv"})
        em.grid = f"(min({grid}, {em.programs}),)"
    else:
        em.ops(ir.ops, ind)
    em.tma_tensors = sorted({key[0] for key in em.descs})
    if em.desc_lines:
        # the pointer path runs when USE_TMA is 0 (tensors a descriptor cannot describe)
        em.lines[0:0] = ["    " * ind + "if USE_TMA:"] + [
            "    " * (ind + 1) + line for line in em.desc_lines
        ]
        # chosen at launch: 1 when every descriptor's tensor meets the descriptor contract
        em.params.append(Param("USE_TMA", "constexpr", ("descriptors", *em.tma_tensors)))
        em.constexprs["USE_TMA"] = 1


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


HOPPER_RULES = TRITON_RULES.extended(
    "hopper", {KernelIR: kernel, Load: load, Store: store, Loop: loop}
)


def hopper_lowering(spec: TargetSpec) -> TritonLowering:
    """The Triton lowering of a Hopper part (`spec.cus` SMs for the persistent grid)."""
    return TritonLowering(HOPPER_RULES, spec, HopperEmitter)


__all__ = ["HOPPER_RULES", "LOWERING_OPTIONS", "HopperEmitter", "hopper_lowering"]
