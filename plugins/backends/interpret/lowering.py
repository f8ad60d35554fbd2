"""The interpreter's lowering rule: fp32 dot operands.

bf16 `tl.dot` gives wrong results in Triton 3.6's interpreter, so every dot the interpreter
runs takes its operands upcast to fp32 (the accumulator already is). The rule extends
whichever target's lowering the interpreter runs (`INTERPRETER_RULES`): the kernel checked
on the CPU is that target's, TMA boxes and persistent grids included, with only its dots'
operands changed.
"""

from __future__ import annotations

from argus_core.ir import Dot
from argus_core.lowering.triton import TritonEmitter, emit_dot


def dot_fp32(em: TritonEmitter, op: Dot, ind: int) -> None:
    """`tl.dot(a.to(tl.float32), b.to(tl.float32), acc)`."""
    emit_dot(em, op, ind, "{}.to(tl.float32)".format)


INTERPRETER_RULES = {Dot: dot_fp32}

__all__ = ["INTERPRETER_RULES", "dot_fp32"]
