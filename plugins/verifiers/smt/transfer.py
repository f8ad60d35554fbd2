"""The transfer function of every IR op type, in one table.

`TRANSFER[type(op)]` is the rule the interpreter runs for `op` (exact type: `AtomicAdd`,
a `Store` subclass, is listed too). A new IR op needs its rule here; without one the
interpreter stops with an error naming the op.
"""

from __future__ import annotations

from argus_core.ir import (
    Cast,
    Dot,
    Elementwise,
    ExpandDims,
    Full,
    Let,
    Load,
    Loop,
    Op,
    Reduce,
    Store,
    Zeros,
)
from argus_core.ir.nodes import AtomicAdd, LoadScalar, Scan
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
from argus_plugins.verifiers.smt import data_ops, explicit_spec, loop_ops, tag_ops, tile_ops
from argus_plugins.verifiers.smt.interpreter import Rule

TRANSFER: dict[type[Op], Rule] = {
    # scalars and control
    Let: tile_ops.let,
    Loop: loop_ops.loop,
    # tiles
    Zeros: tile_ops.zeros,
    Full: tile_ops.full,
    Cast: tile_ops.cast,
    Load: tile_ops.load,
    Store: tile_ops.store,
    AtomicAdd: tile_ops.store,
    Elementwise: tile_ops.elementwise,
    ExpandDims: tile_ops.expand_dims,
    Reduce: tile_ops.reduce,
    Dot: tile_ops.dot,
    # tags and assertions
    Tag: tag_ops.tag,
    Requires: tag_ops.requires,
    AssertTagEq: tag_ops.assert_tag_eq,
    AssertTag: tag_ops.assert_tag,
    AssertContraction: tag_ops.assert_contraction,
    # data-dependent values
    LoadScalar: data_ops.load_scalar,
    Scan: data_ops.scan,
    Contract: data_ops.contract,
    Summand: data_ops.summand,
    RowsFor: data_ops.rows_for,
}

# explicit-level kernels (argus_core.ir.explicit) are checked as a whole: ring stage/phase
# protocol, fragment tags per wgmma, swizzles and shared-memory races (explicit_ops.py)
EXPLICIT_LEVEL = explicit_spec.verify  # explicit_ops.verify_explicit + an attached spec

__all__ = ["EXPLICIT_LEVEL", "TRANSFER"]
