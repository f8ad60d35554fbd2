"""The kernel IR (`nodes`) and symbolic scalar expressions (`expr`)."""

from argus_core.ir.expr import Expr, IntLike, Sym, as_expr, cdiv, emax, emin, land, lnot, to_source, to_z3
from argus_core.ir.nodes import (
    Carry,
    Cast,
    Dot,
    Elementwise,
    Full,
    KernelIR,
    Let,
    Load,
    Loop,
    Op,
    ProgramPoint,
    Reduce,
    Store,
    TensorParam,
    Value,
    View,
    Zeros,
    elem_sym,
)

__all__ = [
    "Carry", "Cast", "Dot", "Elementwise", "Expr", "Full", "IntLike", "KernelIR", "Let", "Load",
    "Loop", "Op", "ProgramPoint", "Reduce", "Store", "Sym", "TensorParam", "Value", "View",
    "Zeros", "as_expr", "cdiv", "elem_sym", "emax", "emin", "land", "lnot", "to_source", "to_z3",
]
