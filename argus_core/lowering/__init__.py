"""Lowering belongs to the targets: the machinery every backend lowers with.

- `rules`: `RuleTable`, lowering rules keyed by IR node type, which a target extends or
  overrides (after Helion: one codegen per op and backend), and the `Lowering` protocol.
- `triton`: the generic Triton rules, once (`TRITON_RULES`), and `TritonLowering`, a
  target's rule table run over a kernel.
- `triton_compile`: compiling lowered Triton for a target without a launch (policy
  checks, the JIT-like signature, the compile report), shared by the Triton backends.

A target's own rules live in its backend (`plugins/backends/<name>/lowering.py`).
"""
