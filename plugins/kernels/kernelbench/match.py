"""The offline front from a task's PyTorch graph to DSL kernels: capture the task's Model
(`argus_core.frontend.capture`, on meta tensors), recognise a supported shape of program,
and emit a DSL kernel from `templates/` with every op written by the op library below
(`ELEMENTWISE`, `REDUCTIONS`, `ROW_OPS`: one entry per op, its numerical concern beside it).

Programs (each op may be a torch function, a tensor method, an F.* call or an nn layer):
  matmul   A @ B, torch.mm/matmul, nn.Linear (+ bias), then any elementwise epilogue of
           constants, [N] vectors (inputs or parameters) and library ops, fused into the GEMM
  elementwise  a chain of library ops over same-shaped inputs and constants
  softmax  softmax over the last dim;  rowreduce  sum or mean over the last dim
  rowprog  any mix of library ops, last-dim reductions (sum, mean, amax/max, amin/min,
           logsumexp, 1-/2-norms) and softmax/log_softmax over [..., N] rows, [N] vectors
           broadcast (RMS/L1/L2 norms, LayerNorm written out, softmax variants)
  program  a graph one kernel cannot hold (a pooling, a norm or a spatial reduction after a
           convolution, two GEMMs, ...): several of the above, one DSL module of kernels
           kb_k0.. with a launch plan, intermediates in launcher-allocated buffers
           (`_program`, at the end of this module)
Anything else raises NoTemplate naming the task and its ops.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from argus_core.errors import ConfigError

# Lowerings that live in modules of their own (lower_more: scans, norms, losses, batched
# products, attention): each is asked first and returns an Emission or None when the graph
# is not its shape. They register themselves on import (`register`); the package's
# __init__ imports them, so they are in place before any `match` call, and this module
# never imports them (the import graph stays one-way: lower_more -> match).
LOWERINGS: list[Callable[..., Any]] = []


# lowerings of a row program's ops that `_trail_rows` tries before `_rowprog` (lower_more's
# long rows), `f(gm, ops, inputs, result, task, names) -> Emission | None`
ROW_LOWERINGS: list[Callable[..., Any]] = []


def register(lowering: Callable[..., Any]) -> Callable[..., Any]:
    """Add a lowering `f(gm, ops, inputs, result, task, names) -> Emission | None`."""
    if lowering not in LOWERINGS:
        LOWERINGS.append(lowering)
    return lowering


def _registered(
    gm: Any, ops: list[Any], inputs: list[Any], result: Any, task: str, names: list[str]
) -> Any:
    for lowering in LOWERINGS:
        em = lowering(gm, ops, inputs, result, task, names)
        if em is not None:
            return em
    return None


TEMPLATES = Path(__file__).with_name("templates")
ENTRY = "kb_kernel"
GELU_C = 1.5957691216057308  # 2 * sqrt(2 / pi): gelu_tanh(x) = x * sigmoid(C * (x + 0.044715 x^3))


class NoTemplate(ConfigError):
    """No template matches the task's graph."""

    stage = "template"


@dataclass
class Emission:
    """A DSL kernel for a task, and how to launch it on the task's tensors."""

    template: str
    source: str
    entry: str
    tiles: dict[str, list[int]]  # constexpr -> allowed values, the default first
    binding: dict[str, dict[str, Any]]  # kernel tensor -> where it comes from (harness.dsl_runner)
    shape: dict[str, int]  # the kernel's dims, for the cost model
    ops: list[str] = field(default_factory=list)
    # a program of several kernels (`_program`): every @kernel of `source`, in launch order
    # (`entry` is the last); the launch plan is `binding[PROGRAM]`. Empty for one kernel.
    entries: tuple[str, ...] = ()
    # a program's kernels, in launch order: (template, its dims), their tiles `k<i>_`-named
    parts: tuple[tuple[str, dict[str, int]], ...] = ()
    # a whole-tensor reduction that `split_reduction` can spread over many programs: the
    # kernel's source for partial sums ("source") and what the last kernel must do besides
    # adding them up ("count": a cross entropy's mean over rows not ignored)
    split: dict[str, Any] = field(default_factory=dict)
    # kernel tensors bound to a parameter through a view with no unit stride (a conv's
    # weight): tensor name -> its extents, copied contiguous by a `relayout` kernel
    # launched before this one (`prepack`)
    prepack: dict[str, list[int]] = field(default_factory=dict)
    # a program's kernels and buffers as `_assemble` was given them (`prepack_weights`
    # assembles them again with the weight copies)
    assembled: tuple[Any, ...] = ()
    # the same kernel with its fp32 dots taken as three bf16 ones, its weight read from
    # bf16 halves (`wh`, `wl`) that a `relayout_halves` kernel makes first: what
    # `prepack_weights(halves=True)` launches (the run's kernel.fp32_dot is bf16x3)
    halves: Any = None
    # a program's part of the graph per kernel of `assembled` (launch order, weight copies
    # aside): the fx nodes its emission reads as inputs `in<i>` (graph inputs, earlier
    # kernels' results or views of them) and the node it computes; () for other emissions
    segments: tuple[tuple[tuple[Any, ...], Any], ...] = ()


@dataclass
class Op:
    kind: str
    args: list[Any]  # fx nodes or Python numbers
    node: Any
    dim: Any = None
    keepdim: bool = False
    module: Any = None  # the nn layer of a call_module
    attr: str = ""
    params: dict[str, Any] = field(default_factory=dict)  # the op library's parameters
    tuple_out: bool = False  # max/min over a dim: (values, indices)


def _np2(n: int, least: int = 16) -> int:
    p = least
    while p < n:
        p *= 2
    return p


def trace(model: Any, inputs: list[Any]) -> Any:
    """model traced by torch.fx, every node annotated with its tensor shape by running it
    once on `inputs` (ShapeProp)."""
    import torch
    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp

    gm = torch.fx.symbolic_trace(model)
    with torch.no_grad():
        ShapeProp(gm).propagate(*inputs)
    return gm


# ----------------------------------------------------------------------------- the op library
# One entry per elementwise op: its tensor operands (arity), its parameters in the order of
# the PyTorch signature (after the operands) with their defaults, and the DSL expression over
# operand names `v` and parameters `p`. The concern of each lowering sits beside it.
SQRT1_2 = 0.7071067811865476
# erf by Abramowitz-Stegun 7.1.26 (|error| < 1.5e-7): the DSL has exp, not erf
_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def _tanh(x: str) -> str:
    return f"(2.0 * al.sigmoid(2.0 * {x}) - 1.0)"  # the DSL has sigmoid, not tanh


def _softplus(x: str, beta: float = 1.0, threshold: float = 20.0) -> str:
    # linear above threshold (as PyTorch), so exp never overflows into the chosen branch
    bx = f"({beta!r} * {x})" if beta != 1.0 else x
    return f"al.where({bx} > {threshold!r}, {x}, al.log(1.0 + al.exp({bx})) / {beta!r})"


def _erf(x: str) -> str:
    z = f"al.abs({x})"
    t = f"(1.0 / (1.0 + {_ERF_P!r} * {z}))"
    a1, a2, a3, a4, a5 = _ERF_A
    poly = f"(((({a5!r} * {t} + {a4!r}) * {t} + {a3!r}) * {t} + {a2!r}) * {t} + {a1!r}) * {t}"
    y = f"(1.0 - {poly} * al.exp(-{z} * {z}))"
    return f"al.where({x} >= 0.0, {y}, -{y})"


def _gelu(x: str, approximate: str = "none") -> str:
    if approximate == "tanh":
        return f"{x} * al.sigmoid({GELU_C} * ({x} + 0.044715 * {x} * {x} * {x}))"
    if approximate != "none":
        raise NoTemplate(f"gelu approximate={approximate!r}; valid: 'none', 'tanh'")
    return f"0.5 * {x} * (1.0 + {_erf(f'({x} * {SQRT1_2!r})')})"


def _clamp(x: str, lo: Any, hi: Any) -> str:
    if lo is not None and not isinstance(lo, int | float):
        raise NoTemplate("clamp with tensor bounds is not supported")
    if hi is not None and not isinstance(hi, int | float):
        raise NoTemplate("clamp with tensor bounds is not supported")
    out = x if lo is None else f"al.maximum({x}, {float(lo)!r})"
    return out if hi is None else f"al.minimum({out}, {float(hi)!r})"


def _pow(x: str, e: Any) -> str:
    if isinstance(e, bool) or not isinstance(e, int | float):
        raise NoTemplate("pow with a tensor exponent is not supported")
    if float(e).is_integer() and 1 <= e <= 4:
        return "(" + " * ".join([x] * int(e)) + ")"
    if e == 0.5:
        return f"al.sqrt({x})"
    if e == -1:
        return f"(1.0 / {x})"
    if e == -0.5:
        return f"(1.0 / al.sqrt({x}))"
    raise NoTemplate(f"pow exponent {e!r}; valid: 1, 2, 3, 4, 0.5, -0.5, -1")


_SELU_A, _SELU_S = 1.6732632423543772, 1.0507009873554805


@dataclass(frozen=True)
class OpLowering:
    """An elementwise op of the library: `arity` tensor operands, then `params` (name,
    default) as PyTorch orders them; `expr(v, p)` is its DSL expression."""

    arity: int
    expr: Callable[[list[str], dict[str, Any]], str]
    params: tuple[tuple[str, Any], ...] = ()


ELEMENTWISE: dict[str, OpLowering] = {
    "relu": OpLowering(1, lambda v, p: f"al.maximum({v[0]}, 0.0)"),
    "relu6": OpLowering(1, lambda v, p: _clamp(v[0], 0.0, 6.0)),
    "sigmoid": OpLowering(1, lambda v, p: f"al.sigmoid({v[0]})"),
    "tanh": OpLowering(1, lambda v, p: _tanh(v[0])),
    "silu": OpLowering(1, lambda v, p: f"{v[0]} * al.sigmoid({v[0]})"),
    "gelu_tanh": OpLowering(1, lambda v, p: _gelu(v[0], "tanh")),
    "gelu": OpLowering(1, lambda v, p: _gelu(v[0], p["approximate"]), (("approximate", "none"),)),
    "mish": OpLowering(1, lambda v, p: f"{v[0]} * {_tanh(_softplus(v[0]))}"),
    "softplus": OpLowering(
        1,
        lambda v, p: _softplus(v[0], float(p["beta"]), float(p["threshold"])),
        (("beta", 1.0), ("threshold", 20.0)),
    ),  # fmt: skip
    "softsign": OpLowering(1, lambda v, p: f"{v[0]} / (1.0 + al.abs({v[0]}))"),
    "hardswish": OpLowering(
        1, lambda v, p: f"{v[0]} * {_clamp(f'({v[0]} + 3.0)', 0.0, 6.0)} / 6.0"
    ),
    "hardsigmoid": OpLowering(1, lambda v, p: _clamp(f"({v[0]} / 6.0 + 0.5)", 0.0, 1.0)),
    "hardtanh": OpLowering(
        1,
        lambda v, p: _clamp(v[0], p["min_val"], p["max_val"]),
        (("min_val", -1.0), ("max_val", 1.0)),
    ),  # fmt: skip
    "clamp": OpLowering(
        1, lambda v, p: _clamp(v[0], p["min"], p["max"]), (("min", None), ("max", None))
    ),
    "clamp_min": OpLowering(1, lambda v, p: _clamp(v[0], p["min"], None), (("min", None),)),
    "clamp_max": OpLowering(1, lambda v, p: _clamp(v[0], None, p["max"]), (("max", None),)),
    "leaky_relu": OpLowering(
        1,
        lambda v, p: f"al.where({v[0]} > 0.0, {v[0]}, {v[0]} * {float(p['negative_slope'])!r})",
        (("negative_slope", 0.01),),
    ),  # fmt: skip
    "elu": OpLowering(
        1,
        lambda v, p: (
            f"al.where({v[0]} > 0.0, {v[0]}, {float(p['alpha'])!r} * (al.exp({v[0]}) - 1.0))"
        ),
        (("alpha", 1.0),),
    ),  # fmt: skip
    "selu": OpLowering(
        1,
        lambda v, p: (
            f"{_SELU_S!r} * al.where({v[0]} > 0.0, {v[0]}, {_SELU_A!r} * (al.exp({v[0]}) - 1.0))"
        ),
    ),  # fmt: skip
    "logsigmoid": OpLowering(1, lambda v, p: f"al.log(al.sigmoid({v[0]}))"),
    "exp": OpLowering(1, lambda v, p: f"al.exp({v[0]})"),
    "log": OpLowering(1, lambda v, p: f"al.log({v[0]})"),
    "sqrt": OpLowering(1, lambda v, p: f"al.sqrt({v[0]})"),
    "rsqrt": OpLowering(1, lambda v, p: f"(1.0 / al.sqrt({v[0]}))"),
    "abs": OpLowering(1, lambda v, p: f"al.abs({v[0]})"),
    "square": OpLowering(1, lambda v, p: f"({v[0]} * {v[0]})"),
    "reciprocal": OpLowering(1, lambda v, p: f"(1.0 / {v[0]})"),
    "neg": OpLowering(1, lambda v, p: f"-{v[0]}"),
    "identity": OpLowering(1, lambda v, p: v[0]),  # Dropout in eval, Identity, contiguous
    "pow": OpLowering(1, lambda v, p: _pow(v[0], p["exponent"]), (("exponent", None),)),
    "add": OpLowering(2, lambda v, p: f"({v[0]} + {v[1]})"),
    "sub": OpLowering(2, lambda v, p: f"({v[0]} - {v[1]})"),
    "mul": OpLowering(2, lambda v, p: f"({v[0]} * {v[1]})"),
    "div": OpLowering(2, lambda v, p: f"({v[0]} / {v[1]})"),
    "maximum": OpLowering(2, lambda v, p: f"al.maximum({v[0]}, {v[1]})"),
    "minimum": OpLowering(2, lambda v, p: f"al.minimum({v[0]}, {v[1]})"),
}
# the templates' older names for the one-operand and two-operand entries
UNARY = {k: v for k, v in ELEMENTWISE.items() if v.arity == 1}
BINARY = {k: v for k, v in ELEMENTWISE.items() if v.arity == 2}

# reductions over the last dim a row program computes; `neutral` fills masked columns
REDUCTIONS: dict[str, str] = {"sum": "0.0", "mean": "0.0", "amax": 'float("-inf")',
                              "amin": 'float("inf")', "logsumexp": 'float("-inf")',
                              "norm": "0.0"}  # fmt: skip
ARG_NEUTRAL = {"argmax": 'float("-inf")', "argmin": 'float("inf")'}
ROW_OPS = ("softmax", "log_softmax")  # whole-row ops whose result has the row's shape


def _function_kinds() -> dict[Any, str]:
    import torch
    import torch.nn.functional as F

    return {
        torch.matmul: "matmul", torch.mm: "matmul", operator.matmul: "matmul",
        F.linear: "linear", operator.add: "add", torch.add: "add", operator.sub: "sub",
        torch.sub: "sub", operator.mul: "mul", torch.mul: "mul", torch.multiply: "mul", operator.truediv: "div",
        torch.div: "div", operator.neg: "neg", torch.neg: "neg", operator.pow: "pow",
        torch.pow: "pow", torch.relu: "relu", F.relu: "relu", F.relu6: "relu6",
        torch.sigmoid: "sigmoid", F.sigmoid: "sigmoid", torch.tanh: "tanh", F.tanh: "tanh",
        F.silu: "silu", F.gelu: "gelu", F.mish: "mish", F.softplus: "softplus",
        F.softsign: "softsign", F.hardswish: "hardswish", F.hardsigmoid: "hardsigmoid",
        F.hardtanh: "hardtanh", torch.clamp: "clamp", torch.clip: "clamp",
        torch.clamp_min: "clamp_min", torch.clamp_max: "clamp_max", F.leaky_relu: "leaky_relu",
        F.elu: "elu", F.selu: "selu", torch.selu: "selu", F.logsigmoid: "logsigmoid",
        torch.exp: "exp", torch.log: "log", torch.sqrt: "sqrt", torch.rsqrt: "rsqrt",
        torch.abs: "abs", torch.square: "square", torch.reciprocal: "reciprocal",
        torch.maximum: "maximum", torch.minimum: "minimum", torch.softmax: "softmax",
        F.softmax: "softmax", torch.log_softmax: "log_softmax", F.log_softmax: "log_softmax",
        torch.sum: "sum", torch.mean: "mean", torch.amax: "amax", torch.amin: "amin",
        torch.logsumexp: "logsumexp", torch.max: "max", torch.min: "min", torch.norm: "norm",
        torch.cumsum: "cumsum", operator.getitem: "getitem", torch.argmax: "argmax",
        torch.argmin: "argmin", F.adaptive_avg_pool1d: "adaptive_avg_pool",
        F.adaptive_avg_pool2d: "adaptive_avg_pool", F.adaptive_avg_pool3d: "adaptive_avg_pool",
    }  # fmt: skip


# nn layer -> op; the layer's attributes of the op's parameter names are its parameters
MODULE_KINDS = {"Linear": "linear", "ReLU": "relu", "ReLU6": "relu6", "Sigmoid": "sigmoid",
                "Tanh": "tanh", "SiLU": "silu", "GELU": "gelu", "Softmax": "softmax",
                "LogSoftmax": "log_softmax", "Hardtanh": "hardtanh", "LeakyReLU": "leaky_relu",
                "ELU": "elu", "SELU": "selu", "Softplus": "softplus", "Mish": "mish",
                "Hardswish": "hardswish", "Hardsigmoid": "hardsigmoid", "Softsign": "softsign",
                "LogSigmoid": "logsigmoid", "Dropout": "identity", "Identity": "identity",
                "BatchNorm1d": "batch_norm", "BatchNorm2d": "batch_norm",
                "BatchNorm3d": "batch_norm", "GroupNorm": "group_norm",
                "Conv1d": "conv", "Conv2d": "conv", "Conv3d": "conv",
                "ConvTranspose1d": "conv_transpose", "ConvTranspose2d": "conv_transpose",
                "ConvTranspose3d": "conv_transpose", "MaxPool1d": "max_pool",
                "MaxPool2d": "max_pool", "MaxPool3d": "max_pool", "AvgPool1d": "avg_pool",
                "AvgPool2d": "avg_pool", "AvgPool3d": "avg_pool",
                "AdaptiveAvgPool1d": "adaptive_avg_pool", "AdaptiveAvgPool2d": "adaptive_avg_pool",
                "AdaptiveAvgPool3d": "adaptive_avg_pool"}  # fmt: skip
METHOD_KINDS = {m: m for m in ("relu", "sigmoid", "tanh", "softmax", "log_softmax", "sum", "mean",
                               "add", "sub", "mul", "div", "matmul", "neg", "cumsum", "clamp",
                               "clamp_min", "clamp_max", "exp", "log", "sqrt", "rsqrt", "abs",
                               "pow", "square", "amax", "amin", "logsumexp", "max", "min",
                               "norm", "reciprocal")}  # fmt: skip
METHOD_KINDS.update(
    {
        "mm": "matmul",
        "contiguous": "identity",
        "clip": "clamp",
        "clone": "identity",
        "detach": "identity",
    }
)
REDUCE_KINDS = ("sum", "mean", "amax", "amin", "logsumexp", "norm", "max", "min", "softmax",
                "log_softmax", "cumsum", "argmax", "argmin")  # fmt: skip


def _is_node(x: Any) -> bool:
    import torch.fx

    return isinstance(x, torch.fx.Node)


def _is_transpose(n: Any, args: list[Any]) -> bool:
    """`x.T`, `x.t()`, `x.transpose(0, 1)` or `torch.transpose(x, -2, -1)` of a 2-D x."""
    import builtins

    import torch

    if n.op == "call_function" and n.target is builtins.getattr:
        return len(args) == 2 and args[1] in ("T", "mT") and len(_shape(args[0])) == 2
    is_t = (n.op == "call_method" and n.target in ("t", "transpose")) or (
        n.op == "call_function" and n.target in (torch.t, torch.transpose)
    )
    dims = {d % 2 for d in args[1:3] if isinstance(d, int)} if len(args) >= 3 else {0, 1}
    return is_t and bool(args) and len(_shape(args[0])) == 2 and dims == {0, 1}


def ops_of(gm: Any) -> list[Op]:
    """The graph's compute nodes as Ops, in order (kind 'unknown:<target>' when unmapped),
    each with its dim/keepdim (reductions) and its parameters (`params`, by the op library's
    names: positional, keyword, or the nn layer's attributes)."""
    fkinds = _function_kinds()
    out = []
    for n in gm.graph.nodes:
        if n.op in ("placeholder", "output", "get_attr"):
            continue
        args, kw = list(n.args), dict(n.kwargs)
        mod = None
        if n.op == "call_function":
            kind = fkinds.get(n.target, f"unknown:{getattr(n.target, '__name__', n.target)}")
        elif n.op == "call_method":
            kind = METHOD_KINDS.get(n.target, f"unknown:.{n.target}")
        else:  # call_module
            mod = gm.get_submodule(n.target)
            kind = MODULE_KINDS.get(type(mod).__name__, f"unknown:nn.{type(mod).__name__}")
        op = Op(kind, args, n, module=mod, attr=str(n.target) if mod is not None else "")
        if _is_transpose(n, args):
            op.kind, op.args = "transpose", args[:1]
        if kind in ("max", "min"):  # max(a, b) is elementwise; max(x, dim) gives (values, indices)
            if len(args) > 1 and _is_node(args[1]):
                op.kind = "maximum" if kind == "max" else "minimum"
            elif len(args) > 1 or "dim" in kw:
                op.kind, op.tuple_out = ("amax" if kind == "max" else "amin"), True
            else:
                op.kind = f"unknown:{kind}(all)"
        if op.kind in ELEMENTWISE:
            entry = ELEMENTWISE[op.kind]
            if mod is not None:
                op.args = args[:1]
                op.params = {k: getattr(mod, k, d) for k, d in entry.params}
            else:
                op.args = args[: entry.arity]
                extra = args[entry.arity :]
                op.params = {k: (extra[i] if i < len(extra) else kw.get(k, d))
                             for i, (k, d) in enumerate(entry.params)}  # fmt: skip
                if op.kind == "pow" and "exponent" not in kw and len(args) > 1:
                    op.params["exponent"] = args[1]
            if op.kind == "gelu" and op.params.get("approximate") == "tanh":
                op.kind = "gelu_tanh"
        elif op.kind in REDUCE_KINDS:
            if mod is not None:
                op.dim = mod.dim
            else:
                rest = args[1:]
                if op.kind == "norm":
                    op.params = {"p": rest[0] if rest else kw.get("p", "fro")}
                    rest = rest[1:]
                op.dim = rest[0] if rest else kw.get("dim")
                op.keepdim = bool(rest[1] if len(rest) > 1 else kw.get("keepdim", False))
            if isinstance(op.dim, list | tuple) and len(op.dim) == 1:
                op.dim = op.dim[0]
            op.args = args[:1]
        elif op.kind in ("batch_norm", "group_norm", "conv", "conv_transpose", "max_pool",
                         "avg_pool"):  # fmt: skip
            op.args = args[:1]
        elif op.kind == "getitem":
            op.params = {"index": args[1] if len(args) > 1 else None}
            op.args = args[:1]
        elif op.kind == "unknown:getattr" and args[1:2] in (["values"], ["indices"]):
            # `torch.max(x, dim).values`: the named field of (values, indices)
            op.kind, op.params, op.args = "getitem", {"index": int(args[1] == "indices")}, args[:1]
        elif op.kind == "adaptive_avg_pool":  # to one element per channel: a spatial mean
            size = mod.output_size if mod is not None else (args[1:2] or [kw.get("output_size")])[0]
            sizes = size if isinstance(size, list | tuple) else [size]
            rank = len(_shape(args[0])) if args else 0
            if rank >= 3 and all(v == 1 for v in sizes):
                op.kind, op.dim, op.keepdim = "mean", tuple(range(2, rank)), True
            op.args = args[:1]
        out.append(op)
    return out


_VIRTUAL: dict[Any, tuple[int, ...]] = {}  # node -> the shape a lowering sees (`_virtual`)


def _shape(node: Any) -> tuple[int, ...]:
    if _VIRTUAL and _is_node(node) and node in _VIRTUAL:
        return _VIRTUAL[node]
    meta = node.meta.get("tensor_meta") if _is_node(node) else None
    return tuple(meta.shape) if meta is not None and hasattr(meta, "shape") else ()


def _is_last_dim(dim: Any, rank: int) -> bool:
    return isinstance(dim, int) and dim in (-1, rank - 1)


def _const(a: Any) -> str | None:
    if isinstance(a, int | float) and not isinstance(a, bool):
        return repr(float(a))
    return None


def _elementwise_expr(op: Op, vals: list[str]) -> str:
    """The op library's DSL expression for an elementwise `op` over operand names `vals`."""
    entry = ELEMENTWISE.get(op.kind)
    if entry is None or len(vals) != entry.arity:
        raise NoTemplate(f"{op.kind} with {len(vals)} operands is not elementwise here")
    return entry.expr(vals, op.params)


def _batch_norm(op: Op, x: str, vector: Any) -> str:
    """BatchNorm over the features (the last dim, [N] statistics) with eval semantics: the
    running statistics, then the affine weight and bias. `vector(binding)` names an [N]
    vector of the layer."""
    mod = op.module
    if mod is None or getattr(mod, "running_mean", None) is None or mod.training:
        raise NoTemplate("batch_norm needs a BatchNorm layer in eval with running statistics")
    mean, var = (
        vector({"from": "param", "attr": f"{op.attr}.{b}"}) for b in ("running_mean", "running_var")
    )
    out = f"(({x} - {mean}) / al.sqrt({var} + {float(mod.eps)!r}))"
    if mod.affine:
        w, b = (vector({"from": "param", "attr": f"{op.attr}.{b}"}) for b in ("weight", "bias"))
        out = f"({out} * {w} + {b})"
    return out


def _chain(ops: list[Op], env: dict[Any, str], operand: Any, vector: Any = None) -> list[str]:
    """DSL lines computing each elementwise op into `e<i>`, `env` mapping nodes to names;
    `operand(node)` names an operand that is not an earlier op (or raises NoTemplate);
    `vector(binding)`, where given, names an [N] vector of a layer (BatchNorm's statistics)."""
    lines = []
    for i, op in enumerate(ops):
        if op.kind == "batch_norm" and vector is not None:
            x = env[op.args[0]] if op.args[0] in env else operand(op.args[0])
            env[op.node] = f"e{i}"
            lines.append(f"    e{i} = {_batch_norm(op, x, vector)}\n")
            continue
        vals = []
        for a in op.args:
            c = _const(a)
            vals.append(c if c is not None else env[a] if a in env else operand(a))
        env[op.node] = f"e{i}"
        lines.append(f"    e{i} = {_elementwise_expr(op, vals)}\n")
    return lines


def _param_binding(gm: Any, node: Any) -> dict[str, Any] | None:
    """{"from": "param", ...} for a get_attr node naming a parameter or buffer, else None."""
    if _is_node(node) and node.op == "call_method" and node.target in RESHAPES and node.args:
        return _param_binding(gm, node.args[0])  # `self.bias.view(1, -1, 1, 1)`: the same data
    if _is_node(node) and node.op == "get_attr":
        # a parameter or buffer of the Model (the launcher passes those); not a tensor fx
        # made while tracing (`torch.tensor(c)` of a Model attribute: `_tensor_constant0`)
        names = {k for k, _ in gm.named_parameters()} | {k for k, _ in gm.named_buffers()}
        if str(node.target) in names and not str(node.target).startswith("_tensor_constant"):
            return {"from": "param", "attr": str(node.target)}
    return None


def _group_norm(op: Op, x: str, out: str, n: int, vector: Any) -> list[str]:
    """GroupNorm of [M, N] rows (N channels in G contiguous groups of N/G): each group's mean
    and biased variance over its live columns, broadcast back by a chain of selects, then the
    per-channel affine weight and bias (`vector(binding)` names an [N] vector)."""
    mod = op.module
    g = int(mod.num_groups)
    if mod.num_channels != n or n % g or g > 32:
        raise NoTemplate(f"group_norm of {n} channels in {g} groups (at most 32 groups)")
    cg = n // g

    def in_group(j: int, v: str) -> str:
        return f"al.where(col >= {j * cg}, al.where(col < {(j + 1) * cg}, {v}, 0.0), 0.0)"

    def spread(stat: str) -> str:
        expr = f"{stat}{g - 1}[:, None]"
        for j in range(g - 2, -1, -1):
            expr = f"al.where(col < {(j + 1) * cg}, {stat}{j}[:, None], {expr})"
        return expr

    lines = [f"    {out}_m{j} = al.sum({in_group(j, x)}, 1) / {float(cg)!r}\n" for j in range(g)]
    lines.append(f"    {out}_d = {x} - {spread(f'{out}_m')}\n")
    lines += [
        f"    {out}_v{j} = al.sum({in_group(j, f'{out}_d * {out}_d')}, 1) / {float(cg)!r}\n"
        for j in range(g)
    ]
    y = f"{out}_d / al.sqrt({spread(f'{out}_v')} + {float(mod.eps)!r})"
    if mod.affine:
        w, b = (vector({"from": "param", "attr": f"{op.attr}.{k}"}) for k in ("weight", "bias"))
        y = f"{y} * {w} + {b}"
    return [*lines, f"    {out} = {y}\n"]


def _row_lines(
    ops: list[Op],
    env: dict[Any, tuple[str, str]],
    operand: Any,
    full: tuple[int, ...],
    vector: Any = None,
) -> list[str]:
    """DSL lines of a row program's ops over [..., N] rows `full` (`env`: node -> (name,
    "full" | "row"), filled as ops compute; `operand(node)` names any other operand;
    `vector(binding)`, where given, names an [N] vector of a layer)."""
    rank, n = len(full), full[-1]
    row_shapes = {full[:-1], full[:-1] + (1,)}
    lines: list[str] = []
    for i, op in enumerate(ops):
        if op.kind in ("group_norm", "batch_norm") and vector is not None and rank == 2:
            x, kind = operand(op.args[0])
            if kind != "full":
                raise NoTemplate(f"{op.kind} of reduced rows")
            if op.kind == "group_norm":
                lines += _group_norm(op, x, f"e{i}", n, vector)
            else:
                lines.append(f"    e{i} = {_batch_norm(op, x, vector)}\n")
            env[op.node] = (f"e{i}", "full")
            continue
        out = f"e{i}"
        if op.kind == "getitem":
            if op.args[0] not in env or op.params.get("index") != 0:
                raise NoTemplate("only the values ([0]) of max/min over a dim are supported")
            env[op.node] = env[op.args[0]]
            continue
        if op.kind in REDUCTIONS or op.kind in ROW_OPS:
            x, kind = operand(op.args[0])
            if kind != "full" or not _is_last_dim(op.dim, rank):
                raise NoTemplate(
                    f"{op.kind} must reduce the last dim of [..., {n}] rows (dim={op.dim})"
                )
            live = lambda e, neutral: f"al.where(live, {e}, {neutral})"  # noqa: E731
            if op.kind in ("sum", "mean"):  # the row length from the tensors (`ncols`)
                expr = f"al.sum({live(x, '0.0')}, 1)" + (" / ncols" if op.kind == "mean" else "")
            elif op.kind == "amax":
                expr = f"al.max({live(x, REDUCTIONS['amax'])}, 1)"
            elif op.kind == "amin":
                expr = f"al.min({live(x, REDUCTIONS['amin'])}, 1)"
            elif op.kind == "norm":
                p = op.params.get("p", "fro")
                if p in (2, 2.0, "fro"):
                    expr = f"al.sqrt(al.sum({live(f'{x} * {x}', '0.0')}, 1))"
                elif p in (1, 1.0):
                    expr = f"al.sum({live(f'al.abs({x})', '0.0')}, 1)"
                else:
                    raise NoTemplate(f"norm p={p!r}; valid: 1, 2, 'fro'")
            else:  # logsumexp, softmax, log_softmax: the row max first, for range
                lines.append(f"    {out}_m = al.max({live(x, REDUCTIONS['amax'])}, 1)\n")
                lines.append(
                    f"    {out}_s = al.sum({live(f'al.exp({x} - {out}_m[:, None])', '0.0')}, 1)\n"
                )
                expr = {
                    "logsumexp": f"{out}_m + al.log({out}_s)",
                    "softmax": f"al.exp({x} - {out}_m[:, None]) / {out}_s[:, None]",
                    "log_softmax": f"{x} - {out}_m[:, None] - al.log({out}_s)[:, None]",
                }[op.kind]
            shape = "full" if op.kind in ROW_OPS else "row"
            if shape == "row" and not op.tuple_out and _shape(op.node) not in row_shapes:
                raise NoTemplate(f"{op.kind} gives shape {_shape(op.node)}, not rows of {full}")
        elif op.kind in ELEMENTWISE:
            vals = [operand(a) for a in op.args]
            kinds = {k for _, k in vals}
            shape = "full" if "full" in kinds else "row" if "row" in kinds else "const"
            if shape == "const":
                raise NoTemplate(f"{op.kind} of constants only")
            names_ = []
            for (v, k), a in zip(vals, op.args):
                if k == "row" and shape == "full":
                    if _shape(a) != full[:-1] + (1,):  # PyTorch broadcasts [M] along N
                        raise NoTemplate(f"{op.kind} broadcasts {_shape(a)} against {full}")
                    v = f"{v}[:, None]"
                names_.append(v)
            expr = _elementwise_expr(op, names_)
            if _shape(op.node) not in ({full} if shape == "full" else row_shapes):
                raise NoTemplate(f"{op.kind} gives shape {_shape(op.node)}, not {full} rows")
        else:
            raise NoTemplate(f"{op.kind} is not a row-program op")
        lines.append(f"    {out} = {expr}\n")
        env[op.node] = (out, shape)
    return lines


def _rowprog(gm, ops, inputs, result, task, names) -> Emission:
    """A row program: elementwise ops, reductions over the last dim (sum, mean, amax, amin,
    logsumexp, p-norms) and whole-row ops (softmax, log_softmax) over [M, N] rows, one
    program holding ROWS whole rows (BN >= N), reduced values broadcast back as [ROWS, 1]."""
    first = ops[0].args[0] if ops[0].args else None
    full = _shape(first) if _is_node(first) else ()
    if not full:
        raise NoTemplate("a row program starts from a tensor operand")
    if full[-1] == 1:  # per-row values ([M, 1], a reduced buffer) broadcast over wider rows
        wider = [_shape(a) for o in ops for a in o.args
                 if _is_node(a) and _shape(a)[:-1] == full[:-1] and _shape(a)[-1] > 1]  # fmt: skip
        full = wider[0] if wider else full
    rank, n = len(full), full[-1]
    rows = math.prod(full[:-1])
    env: dict[Any, tuple[str, str]] = {}  # node -> (name, "full" | "row")
    params: list[str] = []
    binding: dict[str, dict[str, Any]] = {}
    loads: list[str] = []

    def operand(node: Any) -> tuple[str, str]:
        c = _const(node)
        if c is not None:
            return c, "const"
        if node in env:
            return env[node]
        shape = _shape(node)
        src = (
            {"from": "input", "index": inputs.index(node)}
            if node in inputs
            else _param_binding(gm, node)
        )
        if src is None:
            raise NoTemplate(f"operand {node} is not a forward input, a parameter or a constant")
        if shape == full:
            name = f"x{len(params)}"
            params.append(f'{name}: al.Tensor["M", "N"]')
            binding[name] = {**src, "view": "2d"}
            loads.append(f"    {name}_t = al.load({name}.tile(ROWS, BN)[pm, 0]).to(al.f32)\n")
            env[node] = (f"{name}_t", "full")
        elif shape in ((n,), (1, n)) or (
            len(shape) == rank and shape[-1] == n and math.prod(shape) == n
        ):
            name = f"vec{len(params)}"
            params.append(f'{name}: al.Tensor["N"]')
            binding[name] = {**src, "view": "1d"}
            loads.append(f"    {name}_t = al.load({name}.tile(BN)[0]).to(al.f32)[None, :]\n")
            env[node] = (f"{name}_t", "full")
        elif n > 1 and shape == full[:-1] + (1,):  # one value per row
            name = f"rv{len(params)}"
            params.append(f'{name}: al.Tensor["M"]')
            binding[name] = {**src, "view": "1d"}
            loads.append(f"    {name}_t = al.load({name}.tile(ROWS)[pm]).to(al.f32)\n")
            env[node] = (f"{name}_t", "row")
        elif math.prod(shape) == 1:  # a one-element parameter (`nn.Parameter(torch.tensor(c))`)
            name = f"sc{len(params)}"
            params.append(f'{name}: al.Tensor["S{len(params)}"]')
            binding[name] = {**src, "view": "1d"}
            loads.append(f"    {name}_t = al.load_scalar({name}, 0)\n")
            env[node] = (f"{name}_t", "const")
        else:
            raise NoTemplate(
                f"operand {node} of shape {shape} is neither [..., {n}] rows nor an [{n}] vector"
            )
        return env[node]

    lines = _row_lines(ops, env, operand, full)
    if result not in env or env[result][1] == "const":
        raise NoTemplate("the forward's result is not computed by the row program")
    res, kind = env[result]
    binding["y"] = {"from": "output", "view": "2d" if kind == "full" else "1d"}
    if kind == "full":
        y_param, y_view, value = 'y: al.Tensor["M", "N"]', "y.tile(ROWS, BN)[pm, 0]", res
    else:
        y_param, y_view, value = 'y: al.Tensor["M"]', "y.tile(ROWS)[pm]", res
    x0 = next((p.split(":")[0] for p in params if p.startswith("x")), None)
    if x0 is None:
        raise NoTemplate("a row program needs one forward input of the rows' shape")
    body = "".join(loads) + "".join(lines)
    source = _fill(
        "rowprog", TASK=task, WHAT=" -> ".join(names), ENTRY=ENTRY,
        PARAMS=", ".join(params), Y_PARAM=y_param, X0=x0, BODY=body,
        OUT=f"{value}", Y_VIEW=y_view,
    )  # fmt: skip
    bn = _np2(n)
    tiles = {"ROWS": [r for r in (4, 1, 2, 8) if r * bn <= 65536] or [1], "BN": [bn]}
    return Emission("rowprog", source, ENTRY, tiles, binding, {"M": rows, "N": n}, names)


def match(gm: Any, task: str) -> Emission:
    """The Emission for a traced task graph (`trace`), or NoTemplate naming its ops."""
    ops = ops_of(gm)
    names = [o.kind for o in ops]
    inputs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    output = next(n for n in gm.graph.nodes if n.op == "output")
    result = output.args[0]
    # identities (clone, detach, contiguous, Dropout and Identity in eval) are aliases
    alias: dict[Any, Any] = {}
    # a one-element tensor made while tracing (`torch.tensor(self.c)`: a `_tensor_constant`
    # attribute of the traced module) is its number
    for n in gm.graph.nodes:
        if n.op == "get_attr" and str(n.target).startswith("_tensor_constant"):
            t = getattr(gm, str(n.target), None)
            if getattr(t, "numel", lambda: 0)() == 1 and t.device.type != "meta":
                alias[n] = float(t.reshape(()).item())
    tuples: set[Any] = set()
    meta: set[Any] = set()
    kept = []
    for o in ops:
        o.args = [alias.get(a, a) if _is_node(a) else a for a in o.args]
        if o.kind == "unknown:getattr" and o.args[1:2] in (["device"], ["dtype"], ["shape"]):
            meta.add(o.node)  # `x.device`, `x.shape`: metadata (a view's extents), no data
            continue
        if o.kind == "unknown:.size" or (o.kind == "getitem" and o.node.args[0] in meta):
            meta.add(o.node)  # `b, c, d, h, w = x.shape`
            continue
        if o.kind == "unknown:tensor" and o.args and _const(o.args[0]) is not None:
            alias[o.node] = float(o.args[0])  # `torch.tensor(0.5, device=...)`: a constant
            continue
        if _is_reshape(o) and _param_binding(gm, o.node) is not None:
            continue  # a view of a parameter: an operand read through the parameter's data
        if o.kind == "identity" and o.args and _is_node(o.args[0]):
            alias[o.node] = o.args[0]
        elif _reduces_ones(o):  # a keepdim reduction over extents of 1 changes nothing
            alias[o.node] = o.args[0]
            if o.tuple_out:  # its (values, indices)[0] is the values
                tuples.add(o.node)
        elif o.kind == "getitem" and o.node.args[0] in tuples and o.params.get("index") == 0:
            alias[o.node] = o.args[0]
        else:
            kept.append(o)
    ops = kept
    result = alias.get(result, result) if _is_node(result) else result
    why = ""
    try:
        # lowerings kept in their own modules (scans, norms, losses, batched products, ...)
        more = _registered(gm, ops, inputs, result, task, names)
        if more is not None:
            return more
        return _one_kernel(gm, ops, inputs, result, task, names)
    except NoTemplate as exc:
        why = f" ({exc})"
    # one kernel cannot hold the graph: a program of several, cut where fusion stops
    if _cuts(ops) or any(_is_reshape(o) for o in ops):
        try:
            return _program(gm, ops, inputs, result, task, names)
        except NoTemplate as exc:
            why = f"{why[:-1]}; as a program of kernels: {exc})"
    raise NoTemplate(
        f"no template matches task {task} (ops: {', '.join(names) or 'none'}){why}; give "
        "kernel.source=FILE or use an LLM (planner.options.llm=true)"
    )


def prepack_weights(em: Emission, task: str, gm: Any, halves: bool = False) -> Emission:
    """`em` with each parameter a kernel reads through a strided view (a convolution's
    weight, `Emission.prepack`) copied contiguous first: a `relayout` kernel launched
    before the kernel, which then reads the copy (`kernel.options.prepack_weights`, on by
    default). A one-kernel emission becomes a program. Returned as it is where nothing is
    to copy, or where the task's result is not floating point (a program's buffers take
    the output's dtype). With `halves` (the run's fp32 dots are bf16x3) a kernel that has
    an `Emission.halves` form runs that, its weight split into two bf16 buffers by a
    `relayout_halves` kernel."""
    output = next((n for n in gm.graph.nodes if n.op == "output"), None)
    if output is None or not _float_result(output.args[0]):
        return em
    if em.entries:
        if not em.assembled or not any(k[0].prepack for k in em.assembled[0]):
            return em
        kernels, buffers = em.assembled
        program = _assemble(task, list(em.ops), kernels, buffers, prepack=True, halves=halves)
        program.segments = em.segments
        return program
    if not em.prepack:
        return em
    return _assemble(task, list(em.ops), [(em, em.binding, "the output")], {}, prepack=True,
                     halves=halves)  # fmt: skip


def _float_result(result: Any) -> bool:
    """Whether the traced result is a floating-point tensor (its fx metadata)."""
    meta = result.meta.get("tensor_meta") if _is_node(result) else None
    dtype = getattr(meta, "dtype", None)
    return bool(getattr(dtype, "is_floating_point", False))


def _relayout(task: str, what: str, g: int, extents: list[int], halves: bool = False) -> Emission:
    """The `relayout` kernel: a parameter seen [taps, G, C/G, OC/G] copied contiguous; with
    `halves` the `relayout_halves` kernel: its bf16 halves, two contiguous copies."""
    template = "relayout_halves" if halves else "relayout"
    source = _fill(template, TASK=task, WHAT=what, ENTRY=ENTRY, G=str(g))
    tiles = {"BK": [min(_np2(extents[2]), 32)], "BC": [min(_np2(extents[3]), 128)]}
    return Emission(template, source, ENTRY, tiles, {}, {"N": math.prod(extents)}, [what])


def _reduces_ones(op: Op) -> bool:
    """A keepdim sum, mean, max, min or logsumexp over dims that all have extent 1."""
    if op.kind not in ("sum", "mean", "amax", "amin", "logsumexp") or not op.keepdim:
        return False
    if not op.args or not _is_node(op.args[0]):
        return False
    shape = _shape(op.args[0])
    return bool(shape) and all(shape[d] == 1 for d in _dims_of(op, len(shape)))


def _one_kernel(gm, ops, inputs, result, task, names) -> Emission:
    """The one-kernel Emission of `ops` (graph inputs `inputs`, value `result`) from this
    module's templates, or NoTemplate saying why none fits."""
    if ops and not isinstance(result, tuple | list):
        first = ops[0].kind
        if first in ("conv", "conv_transpose"):
            return _conv(gm, ops, inputs, result, task, names)
        if first in ("max_pool", "avg_pool"):
            return _pool(gm, ops, inputs, result, task, names)
        if first in ("matmul", "linear") or (
            first == "transpose" and any(o.kind in ("matmul", "linear") for o in ops)
        ):
            return _matmul(gm, ops, inputs, result, task, names)
        x0 = ops[0].args[0] if ops[0].args else None
        if (first in ("softmax", "sum", "mean") and len(ops) == 1 and x0 in inputs
                and _is_last_dim(ops[0].dim, len(_shape(x0))) and not ops[0].keepdim):  # fmt: skip
            return _rowwise(ops[0], inputs, task, names)
        if len(ops) <= 2 and first in ("sum", "mean", "amax", "amin", "argmax", "argmin") \
                and ops[0].dim in (1, -2) \
                and len(_shape(ops[0].args[0])) == 3:  # fmt: skip
            if len(ops) == 1 or (ops[1].kind == "getitem" and ops[1].params.get("index") == 0):
                return _midreduce(ops[0], inputs, task, names)
        x0_ = ops[0].args[0] if ops[0].args else None
        if len(_shape(x0_)) >= 3 and any(
            (o.kind in REDUCTIONS or o.kind in ROW_OPS) and o.dim in (1, 1 - len(_shape(x0_)))
            or (o.kind == "batch_norm" and o.module is not None
                and type(o.module).__name__ != "BatchNorm1d")
            for o in ops
        ):  # fmt: skip
            return _chanprog(gm, ops, inputs, result, task, names)
        if ops[-1].kind in ("sum", "mean") and ops[-1].dim is None and result is ops[-1].node \
                and all(o.kind in ELEMENTWISE for o in ops[:-1]):  # fmt: skip
            return _fullreduce(ops, inputs, result, task, names)
        if all(o.kind in ELEMENTWISE for o in ops):
            return _elementwise(ops, inputs, result, task, names)
        if all(o.kind in ELEMENTWISE or o.kind in REDUCTIONS or o.kind in ROW_OPS
               or o.kind == "getitem" for o in ops):  # fmt: skip
            return _rowprog(gm, ops, inputs, result, task, names)
    raise NoTemplate("no one-kernel template fits these ops")


def _fill(name: str, **parts: str) -> str:
    text = (TEMPLATES / f"{name}.py.tmpl").read_text()
    for key, value in parts.items():
        text = text.replace(f"@@{key}@@", value)
    if "@@" in text:
        raise NoTemplate(f"template {name} has unfilled parts")
    bad = library_calls(text)  # each generated kernel, checked statically
    if bad:
        raise NoTemplate(f"template {name} emitted calls outside the DSL: {'; '.join(bad)}")
    return text


def _matmul(gm, ops, inputs, result, task, names) -> Emission:
    # transposes of forward inputs (`A.T`, `B.t()`) before the product are read as permuted views
    lead = 0
    transposed: dict[Any, Any] = {}
    while ops[lead].kind == "transpose":
        src = ops[lead].args[0]
        if (src not in inputs and _param_binding(gm, src) is None) or len(_shape(src)) != 2:
            raise NoTemplate("only transposes of 2-D forward inputs or parameters feed the matmul")
        transposed[ops[lead].node] = src
        lead += 1
    core, rest = ops[lead], ops[lead + 1 :]
    if core.kind not in ("matmul", "linear"):
        raise NoTemplate(f"a transpose feeds {core.kind}, not a matmul")
    binding: dict[str, dict[str, Any]] = {}
    a_node = core.args[0]
    a_src = transposed.get(a_node, a_node)
    if a_src not in inputs or len(_shape(a_node)) < 2:
        raise NoTemplate("the matmul's left operand must be a forward input of >= 2 dims")
    if a_node in transposed:
        k, m = _shape(a_src)
        a_param, a_view, k_dim = (
            'a: al.Tensor["K", "M"],',
            "al.permute(a.tile(BK, BM)[k, pm], (1, 0))",
            "a.shape[0]",
        )
        binding["a"] = {"from": "input", "index": inputs.index(a_src)}
    else:
        *lead_dims, k = _shape(a_node)
        m = math.prod(lead_dims)
        a_param, a_view, k_dim = 'a: al.Tensor["M", "K"],', "a.tile(BM, BK)[pm, k]", "a.shape[1]"
        binding["a"] = {"from": "input", "index": inputs.index(a_node)}
        if len(lead_dims) > 1:  # [..., K] rows: the row-major [rows, K] view, C likewise
            binding["a"]["view"] = "2d"
    vectors: list[str] = []
    if core.kind == "matmul":
        b_node = core.args[1]
        b_src = transposed.get(b_node, b_node)
        b_bind = (
            {"from": "input", "index": inputs.index(b_src)}
            if b_src in inputs
            else _param_binding(gm, b_src)  # `x @ self.weight.T`
        )
        if b_bind is None or len(_shape(b_node)) != 2:
            raise NoTemplate("the matmul's right operand must be a 2-D forward input or parameter")
        binding["b"] = b_bind
        n = _shape(b_node)[1]
        if b_node in transposed:
            b_param, b_view = 'b: al.Tensor["N", "K"],', "al.permute(b.tile(BN, BK)[pn, k], (1, 0))"
        else:
            b_param, b_view = 'b: al.Tensor["K", "N"],', "b.tile(BK, BN)[k, pn]"
    else:  # nn.Linear: y = x @ W^T + bias, W is [N, K]
        mod = core.module
        if mod is None:
            raise NoTemplate("F.linear with tensor arguments is not supported; use nn.Linear")
        n = mod.out_features
        binding["w"] = {"from": "param", "attr": f"{core.attr}.weight"}
        b_param, b_view = 'w: al.Tensor["N", "K"],', "al.permute(w.tile(BN, BK)[pn, k], (1, 0))"
        if mod.bias is not None:
            binding["vec0"] = {"from": "param", "attr": f"{core.attr}.bias"}
            vectors.append("vec0")
    if any(o.kind in REDUCTIONS or o.kind in ROW_OPS or o.kind in ("getitem", "group_norm")
           for o in rest):  # fmt: skip
        a_dims = (a_node in transposed, "a.shape[1]" if a_node in transposed else "a.shape[0]")
        if core.kind == "linear":
            n_dim = "w.shape[0]"
        else:
            n_dim = "b.shape[0]" if core.args[1] in transposed else "b.shape[1]"
        return _matmul_rows(
            gm, core, rest, inputs, result, task, names, binding, vectors,
            dict(A_PARAM=a_param, A_VIEW=a_view, K_DIM=k_dim, B_PARAM=b_param, B_VIEW=b_view,
                 M_DIM=a_dims[1], N_DIM=n_dim),
            (m, n, k),
        )  # fmt: skip
    env: dict[Any, str] = {core.node: "acc"}
    lines = [f"    r{j} = al.load({v}.tile(BN)[pn])[None, :]\n" for j, v in enumerate(vectors)]
    if vectors:  # the Linear's bias, added before its epilogue
        lines.append("    acc = acc + r0\n")

    def vector(src: dict[str, Any]) -> str:
        name = f"vec{len(vectors)}"
        vectors.append(name)
        binding[name] = {**src, "view": "1d"}
        lines.append(f"    r{len(vectors) - 1} = al.load({name}.tile(BN)[pn])[None, :]\n")
        return f"r{len(vectors) - 1}"

    def operand(node: Any) -> str:
        src = {"from": "input", "index": inputs.index(node)} if node in inputs else None
        src = src or _param_binding(gm, node)
        if src is not None and _shape(node) in ((n,), (1, n)):
            return vector(src)
        if src is not None and _shape(node) in ((), (1,), (1, 1)):
            return scalar(src)
        raise NoTemplate(f"epilogue operand {node} is neither a constant nor an [N] vector")

    def scalar(src: dict[str, Any]) -> str:
        name = f"sc{len(scalars)}"
        scalars.append(name)
        binding[name] = {**src, "view": "1d"}
        lines.append(f"    {name}_t = al.load_scalar({name}, 0)\n")
        return f"{name}_t"

    scalars: list[str] = []
    lines += _chain(rest, env, operand, vector)
    lines.append(f"    out = {env[result]}\n")
    binding["c"] = {"from": "output"}
    if binding["a"].get("view") == "2d":
        binding["c"]["view"] = "2d"
    vec_params = "".join(f' {v}: al.Tensor["N"],' for v in vectors)
    vec_params += "".join(f' {v}: al.Tensor["S{j}"],' for j, v in enumerate(scalars))
    source = _fill(
        "matmul", TASK=task, WHAT=" -> ".join(names), ENTRY=ENTRY, A_PARAM=a_param,
        A_VIEW=a_view, K_DIM=k_dim, B_PARAM=b_param, BIAS_PARAM=vec_params, B_VIEW=b_view,
        EPILOGUE="".join(lines),
    )  # fmt: skip
    tile = lambda d: [t for t in (32, 16, 64) if t <= _np2(d)]  # noqa: E731
    tiles = {
        "BM": tile(m),
        "BN": tile(n),
        "BK": [t for t in (16, 32) if t <= _np2(k)],
        "GROUP": [4],
    }
    return Emission("matmul", source, ENTRY, tiles, binding, {"M": m, "N": n, "K": k}, names)


def _rowwise(op: Op, inputs, task, names) -> Emission:
    x = op.args[0]
    shape = _shape(x)
    if x not in inputs or len(shape) < 1 or not _is_last_dim(op.dim, len(shape)) or op.keepdim:
        raise NoTemplate(f"{op.kind} must be over the last dim of a forward input, keepdim off")
    n = shape[-1]
    rows = 1
    for s in shape[:-1]:
        rows *= s
    binding = {"x": {"from": "input", "index": inputs.index(x), "view": "2d"}}
    if op.kind == "softmax":
        source = _fill("softmax", TASK=task, WHAT="softmax(x, dim=-1)", ENTRY=ENTRY)
        binding["y"] = {"from": "output", "view": "2d"}
    else:
        expr = "al.sum(t, 1)" + (" / x.shape[1]" if op.kind == "mean" else "")
        source = _fill("rowreduce", TASK=task, WHAT=f"{op.kind}(x, dim=-1)", ENTRY=ENTRY,
                       REDUCE=op.kind, EXPR=expr)  # fmt: skip
        binding["y"] = {"from": "output", "view": "1d"}
    tiles = {"ROWS": [4, 1, 2, 8], "BN": [_np2(n)]}
    return Emission(op.kind if op.kind == "softmax" else "rowreduce", source, ENTRY, tiles,
                    binding, {"M": rows, "N": n}, names)  # fmt: skip


def _elementwise(ops, inputs, result, task, names) -> Emission:
    out_shape = _shape(result)
    used = [n for n in inputs if any(n in o.args for o in ops)]
    if not out_shape or any(_shape(n) != out_shape for n in used):
        raise NoTemplate(f"elementwise inputs must all have the output's shape {out_shape}")
    env = {n: f"v{i}" for i, n in enumerate(used)}

    def operand(node: Any) -> str:
        raise NoTemplate(f"operand {node} is not a forward input or a constant")

    lines = [
        f"    v{i} = al.load(x{i}.tile(BR, BC)[pr, pc]).to(al.f32)\n" for i in range(len(used))
    ]
    lines += _chain(ops, env, operand)
    lines.append(f"    out = {env[result]}\n")
    binding = {
        f"x{i}": {"from": "input", "index": inputs.index(n), "view": "2d"}
        for i, n in enumerate(used)
    }
    binding["y"] = {"from": "output", "view": "2d"}
    params = ", ".join(f'x{i}: al.Tensor["R", "C"]' for i in range(len(used)))
    source = _fill("elementwise", TASK=task, WHAT=" -> ".join(names), ENTRY=ENTRY, PARAMS=params,
                   BODY="".join(lines))  # fmt: skip
    c = out_shape[-1]
    r = 1
    for s in out_shape[:-1]:
        r *= s
    tiles = {"BR": [16, 32], "BC": [t for t in (32, 64, 16) if t <= _np2(c)]}
    return Emission("elementwise", source, ENTRY, tiles, binding, {"R": r, "C": c}, names)


def _midreduce(op: Op, inputs, task, names) -> Emission:
    """sum, mean, amax or amin of a 3-D forward input over its middle dim (keepdim either)."""
    x = op.args[0]
    shape = _shape(x)
    if x not in inputs or len(shape) != 3 or op.dim not in (1, -2):
        raise NoTemplate(f"{op.kind} over dim {op.dim} of {shape}: only the middle dim of 3-D")
    a, r, c = shape
    # each step's 1 x BR x BC tile reduced over BR and folded into a running 1 x BC result
    # (the verifier's tags let values of one column combine only through a reduction; at
    # the GPU's BC = 512 on 4 warps (`family.gpu_midreduce_tiles`) a thread holds all BR
    # rows of its columns and the reduction stays in its registers)
    folds = {"sum": ("al.zeros((1, BC), al.f32)", "acc + al.sum(t, 1)", "acc"),
             "mean": ("al.zeros((1, BC), al.f32)", "acc + al.sum(t, 1)", "acc / x.shape[1]"),
             "amax": ('al.full((1, BC), float("-inf"), al.f32)', "al.maximum(acc, al.max(t, 1))",
                      "acc"),
             "amin": ('al.full((1, BC), float("inf"), al.f32)', "al.minimum(acc, al.min(t, 1))",
                      "acc")}  # fmt: skip
    if op.kind in folds:
        init, fold, out = folds[op.kind]
        init_lines = f"    acc = {init}\n"
        step = f"        acc = {fold}\n"
    elif op.kind in ("argmax", "argmin"):
        # the first index holding the extreme value (as PyTorch): a step's candidate is its
        # first row holding the step's extreme (rows past R read the neutral value and
        # carry index R, so they never win), kept only where it beats the running best
        # strictly (an earlier step's equal value has the lower index)
        ext, beats = ("max", ">") if op.kind == "argmax" else ("min", "<")
        init_lines = (f"    best = al.full((1, BC), {ARG_NEUTRAL[op.kind]}, al.f32)\n"
                      "    idx = al.zeros((1, BC), al.i32)\n")  # fmt: skip
        step = (
            f"        m = al.{ext}(t, 1)\n"
            "        r = al.zeros((1, BR, BC), al.i32) + (al.zeros((1, BR), al.i32) + rb * BR"
            " + al.indices((1, BR))[1])[:, :, None]\n"
            "        at = al.min(al.where(t.eq(m[:, None, :]), r, x.shape[1]), 1)\n"
            f"        win = m {beats} best\n"
            "        idx = al.where(win, at, idx)\n"
            "        best = al.where(win, m, best)\n"
        )
        out = "idx"
    else:
        raise NoTemplate(
            f"{op.kind} over a middle dim; valid: sum, mean, amax, amin, argmax, argmin"
        )
    # keepdim's [A, 1, C] output is passed as its [A, C] row-major view
    y_param, y_view = 'y: al.Tensor["A", "C"]', "y.tile(1, BC)[pa, pc]"
    source = _fill(
        "midreduce", TASK=task, WHAT=f"{op.kind}(x, dim=1, keepdim={op.keepdim})", ENTRY=ENTRY,
        Y_PARAM=y_param, NEUTRAL={**REDUCTIONS, **ARG_NEUTRAL}[op.kind], REDUCE=op.kind,
        INIT=init_lines, STEP=step, OUT=out, Y_VIEW=y_view,
    )  # fmt: skip
    binding = {"x": {"from": "input", "index": inputs.index(x)}, "y": {"from": "output"}}
    if op.keepdim:
        binding["y"]["view"] = "2d"
    # the interpreter's cost is per step: the whole R in one step first (its old tile)
    br = _np2(r)
    tiles = {"BR": [br, *[t for t in (64, 32, 16) if t < br]],
             "BC": [t for t in (32, 16, 64, 128) if t * br <= 16384] or [16]}  # fmt: skip
    return Emission("midreduce", source, ENTRY, tiles, binding, {"M": a * c, "N": r, "C": c},
                    names)  # fmt: skip


# The longest row (its power-of-two tile BN) a GEMM with a row epilogue holds whole in one
# program (`matmul_rows`). From the target's shared memory (an sm_90 block: 227 KB): the
# operand tiles a pipelined loop keeps, (BM + BN) * BK * 2 bytes per buffered stage
# (`lds_bytes_estimate`; at BM = BK = 16, num_stages 3: 129 KB at BN = 2048, 258 KB at 4096),
# and the BM = 16 whole fp32 rows the epilogue reduces (BN * 64 bytes: 128 KB at 2048, 256 KB
# at 4096) both fit at 2048 and neither at 4096. A longer row is a program: the GEMM (with
# the elementwise ops before the first row op as its epilogue) writes a buffer, the row ops
# are a second kernel over it (`_row_epilogue_cuts`).
WHOLE_ROW_MAX_N = 2048


def _matmul_rows(gm, core, rest, inputs, result, task, names, binding, vectors, parts, mnk):
    """A GEMM whose epilogue is a row program over the product's [M, N] rows (`_row_lines`):
    each program holds BM whole rows, BN >= N (at most `WHOLE_ROW_MAX_N`)."""
    m, n, k = mnk
    if binding["a"].get("view"):
        raise NoTemplate("a row epilogue needs a 2-D left operand")
    if _np2(n) > WHOLE_ROW_MAX_N:
        raise NoTemplate(
            f"a GEMM's row epilogue over rows of {n} columns: whole rows (BN = {_np2(n)}) do "
            f"not fit one program's shared memory (at most BN = {WHOLE_ROW_MAX_N})"
        )
    full = (m, n)
    scalars: list[str] = []
    env: dict[Any, tuple[str, str]] = {core.node: ("acc", "full")}
    loads = [f"    {v}_t = al.load({v}.tile(BN)[0]).to(al.f32)[None, :]\n" for v in vectors]
    if vectors:  # the Linear's bias, added before its epilogue
        loads.append("    acc = acc + vec0_t\n")

    def operand(node: Any) -> tuple[str, str]:
        c = _const(node)
        if c is not None:
            return c, "const"
        if node in env:
            return env[node]
        src = {"from": "input", "index": inputs.index(node)} if node in inputs else None
        src = src or _param_binding(gm, node)
        if src is not None and _shape(node) in ((), (1,), (1, 1)):
            name = f"sc{len(scalars)}"
            scalars.append(name)
            binding[name] = {**src, "view": "1d"}
            loads.append(f"    {name}_t = al.load_scalar({name}, 0)\n")
            env[node] = (f"{name}_t", "const")  # broadcasts against rows and row values
            return env[node]
        if src is None or _shape(node) not in ((n,), (1, n)):
            raise NoTemplate(f"epilogue operand {node} is neither a constant nor an [N] vector")
        name = f"vec{len(vectors)}"
        vectors.append(name)
        binding[name] = {**src, "view": "1d"}
        loads.append(f"    {name}_t = al.load({name}.tile(BN)[0]).to(al.f32)[None, :]\n")
        env[node] = (f"{name}_t", "full")
        return env[node]

    def vector(src: dict[str, Any]) -> str:
        name = f"vec{len(vectors)}"
        vectors.append(name)
        binding[name] = {**src, "view": "1d"}
        loads.append(f"    {name}_t = al.load({name}.tile(BN)[0]).to(al.f32)[None, :]\n")
        return f"{name}_t"

    lines = _row_lines(rest, env, operand, full, vector)
    if result not in env:
        raise NoTemplate("the forward's result is not computed by the epilogue")
    res, kind = env[result]
    if kind == "full":
        c_param, c_view, view = 'c: al.Tensor["M", "N"]', "c.tile(BM, BN)[pm, 0]", "2d"
    else:
        c_param, c_view, view = 'c: al.Tensor["M"]', "c.tile(BM)[pm]", "1d"
    binding["c"] = {"from": "output", "view": view}
    vec_params = "".join(f' {v}: al.Tensor["N"],' for v in vectors)
    vec_params += "".join(f' {v}: al.Tensor["S{j}"],' for j, v in enumerate(scalars))
    parts = {key: val.replace("[pn,", "[0,").replace(", pn]", ", 0]") for key, val in parts.items()}
    source = _fill(
        "matmul_rows", TASK=task, WHAT=" -> ".join(names), ENTRY=ENTRY, BIAS_PARAM=vec_params,
        C_PARAM=c_param, C_VIEW=c_view, EPILOGUE="".join(loads + lines), OUT=res, **parts,
    )  # fmt: skip
    bn = _np2(n)
    tiles = {
        "BM": [t for t in (16, 32) if t * bn <= 32768] or [16],
        "BN": [bn],
        "BK": [t for t in (16, 32) if t <= _np2(k)],
    }
    return Emission("matmul_rows", source, ENTRY, tiles, binding, {"M": m, "N": n, "K": k}, names)


# what an emitted kernel may call: the DSL (`al.*`), tile/view methods, and float() for
# constants; anything else (torch.*, F.*, a library) is compute outside the DSL
KERNEL_METHODS = frozenset({"tile", "to", "rows", "eq"})
KERNEL_BUILTINS = frozenset({"float"})


def library_calls(source: str) -> list[str]:
    """Every call in an emitted kernel module that is not the DSL's: a call `al.<op>`, a
    tile method (`.tile`, `.to`, `.rows`, `.eq`) or `float(...)` is allowed; anything else is listed as it
    is written (`torch.matmul`, `F.gelu`), with its line."""
    import ast

    tree = ast.parse(source)
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names]
            mod = node.module if isinstance(node, ast.ImportFrom) else None
            if not (mod == "argus_plugins.dsl.tile" and names == ["lang"]):
                bad.append(f"line {node.lineno}: import {mod or ', '.join(names)}")
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "al":
            continue
        if isinstance(f, ast.Attribute) and f.attr in KERNEL_METHODS:
            continue
        if isinstance(f, ast.Name) and f.id in KERNEL_BUILTINS:
            continue
        bad.append(f"line {node.lineno}: {ast.unparse(f)}")
    return bad


# ----------------------------------------------------------------------------- convolutions
def _pow2_divisor(n: int, cap: int) -> int:
    """The largest power of two dividing n, at most cap."""
    d = 1
    while d * 2 <= cap and n % (d * 2) == 0:
        d *= 2
    return d


# position blocks past a GPU's (1024) that only the CPU interpreter takes: its cost is per
# program and per op, so a scaled convolution runs fastest in few programs (level1/72 at
# --scale 0.005, one trial: 190 s in blocks of 1024, 36 s in 8192); a block holds at most
# INTERP_BLOCK elements. `family.gpu_conv_tiles` drops them for a full-size task.
INTERP_BP = (2048, 4096, 8192, 16384)
INTERP_BLOCK = 1 << 18


def _conv_bp(p: int, bc: int, gpu: tuple[int, ...]) -> list[int]:
    """A convolution's BP list over `p` output positions a sample, BC `bc`: the GPU's
    blocks `gpu` (the first its first policy), then the interpreter's (`INTERP_BP`)."""
    cpu = [t for t in INTERP_BP if t <= _np2(p) and t * bc <= INTERP_BLOCK]
    return ([t for t in gpu if t <= _np2(p)] or [16]) + cpu


def _conv_geometry(
    nd: int,
    ks: list[int],
    st: list[int],
    pd: list[int],
    dl: list[int],
    ins: list[str],
    outs: list[str],
    transposed: bool,
    kch: int,
    chunks: bool = True,
) -> tuple[list[str], list[str], str, str]:
    """A convolution's position arithmetic: the output coordinates of each position p
    (`coords`), and the head of its one loop over (kernel tap, channel chunk) pairs
    (`lines`: the tap's coordinates, the input position `src` of each output position and
    its mask `ok`; `chunks`: the channel chunk `k` too); with the tap's index expression and
    the input position as a function of an output position q (the gather's ghost)."""
    coords = []  # output coordinates of each position p (row-major over the spatial dims)
    for j in range(nd):
        inner = " * ".join(outs[j + 1 :])
        e = f"p // ({inner})" if inner else "p"
        coords.append(f"    o{j} = {e} % {outs[j]}\n" if j else f"    o{j} = {e}\n")
    # one loop over (kernel tap, channel chunk) pairs: nested loops would carry acc twice
    ind = "        "
    lines = [f"    for kk in al.range({math.prod(ks) * kch}):\n"]
    tap = f"kk // {kch}" if kch > 1 else "kk"
    if chunks:
        lines.append(f"{ind}k = kk % {kch}\n" if kch > 1 else f"{ind}k = 0\n")
    for j in range(nd):
        inner_k = math.prod(ks[j + 1 :])
        e = f"({tap}) // {inner_k}" if inner_k > 1 else f"({tap})"
        lines.append(f"{ind}t{j} = {e} % {ks[j]}\n" if j else f"{ind}t{j} = {e}\n")
    ok = ["inrow"]
    srcq = []  # the same input position as a function of an output position q (ghost)
    for j in range(nd):
        inner = " * ".join(outs[j + 1 :])
        oq = f"(q // ({inner}))" if inner else "q"
        oq = f"({oq} % {outs[j]})" if j else oq
        if not transposed:
            lines.append(f"{ind}s{j} = o{j} * {st[j]} + (t{j} * {dl[j]} - {pd[j]})\n")
            ok += [f"(s{j} >= 0)", f"(s{j} < {ins[j]})"]
            srcq.append(f"({oq} * {st[j]} + (t{j} * {dl[j]} - {pd[j]}))")
        else:  # output o receives input i where o = i * stride - pad + t * dil
            lines.append(f"{ind}q{j} = o{j} + ({pd[j]} - t{j} * {dl[j]})\n")
            lines.append(f"{ind}s{j} = q{j} // {st[j]}\n" if st[j] > 1 else f"{ind}s{j} = q{j}\n")
            ok += [f"(q{j} >= 0)", f"(s{j} < {ins[j]})"]
            if st[j] > 1:
                ok.append(f"((q{j} % {st[j]}).eq(0))")
            srcq.append(f"(({oq} + ({pd[j]} - t{j} * {dl[j]})) // {st[j]})")
    src, source_q = "s0", srcq[0]
    for j in range(1, nd):
        src = f"({src}) * {ins[j]} + s{j}"
        source_q = f"({source_q}) * {ins[j]} + {srcq[j]}"
    lines.append(f"{ind}ok = {' & '.join(ok)}\n")
    lines.append(f"{ind}src = {src}\n")
    return coords, lines, tap, source_q


def _conv(gm, ops, inputs, result, task, names) -> Emission:
    """nn.Conv{1,2,3}d / nn.ConvTranspose{1,2,3}d of a forward input (stride, padding,
    dilation, groups, output_padding), then an elementwise epilogue of constants, per-channel
    vectors ([OC], [OC, 1, ...] parameters or inputs), scalars and BatchNorm in eval."""
    core, rest = ops[0], ops[1:]
    mod = core.module
    x_node = core.args[0]
    if x_node not in inputs:
        raise NoTemplate("the convolution's input must be a forward input")
    transposed = core.kind == "conv_transpose"
    if getattr(mod, "padding_mode", "zeros") != "zeros" or isinstance(mod.padding, str):
        raise NoTemplate(f"conv padding {mod.padding!r} / mode {mod.padding_mode!r}: only "
                         "explicit zero padding")  # fmt: skip
    xs, ys = _shape(x_node), _shape(core.node)
    nd = len(xs) - 2
    if nd not in (1, 2, 3) or len(ys) != nd + 2:
        raise NoTemplate(f"conv of a {len(xs)}-D input: only batched 1-3-D convolutions")
    cin, cout, groups = mod.in_channels, mod.out_channels, mod.groups
    icg, ocg = cin // groups, cout // groups
    # spatial extents are read from the tensors (a trial may change them); the channels,
    # kernel, stride, padding, dilation and groups are the Model's (its weights fix them)
    ins = [f"xs.shape[{2 + j}]" for j in range(nd)]
    outs = [f"ys.shape[{2 + j}]" for j in range(nd)]
    ks, st, pd, dl = (
        list(getattr(mod, a)) for a in ("kernel_size", "stride", "padding", "dilation")
    )
    if groups == cin == cout and cin > 1 and not transposed and not _chan_reduces(rest, len(ys)):
        return _dwconv(gm, ops, inputs, result, task, names, (ks, st, pd, dl, ins, outs))
    # 128 output channels a block where there are that many: 128 x 128 at 8 warps, as the
    # matmul template (2x the 128 x 64 block's speed, benchmarks/conv_lab.py)
    bc = min(_np2(ocg), 128)
    if _chan_reduces(rest, len(ys)):  # one block spans every channel
        if groups != 1 or cout > 256:
            raise NoTemplate(f"a reduction over the channels of a conv of {cout} channels in "
                             f"{groups} groups: only ungrouped, at most 256 channels")  # fmt: skip
        bc = _np2(cout)
    bk = min(_np2(icg), 32)
    kch = -(-icg // bk)
    g = groups
    binding: dict[str, dict[str, Any]] = {
        "x": {"from": "input", "index": inputs.index(x_node), "view": f"ngsc:{g}"},
        "w": {"from": "param", "attr": f"{core.attr}.weight",
              "view": f"w_convT:{g}" if transposed else f"w_conv:{g}"},
    }  # fmt: skip
    coords, lines, tap, source_q = _conv_geometry(nd, ks, st, pd, dl, ins, outs, transposed, kch)
    ind = "        "
    # ghost: row r of the gathered block is the input row of output position p[r] at this
    # tap; the verifier checks that and relabels the row p[r], so every tap's product
    # accumulates into the output element it is for
    # (the gathered block keeps the compiler's own layout, channels fastest: a block laid
    # out along the positions, coalesced as it is, costs the dot a transpose per step that
    # measured 1.8x slower on the H200, benchmarks/conv_lab.py)
    lines.append(f"{ind}a = al.rows_for(al.load(x[pz // {g}, pz % {g}].rows(src).tile(BK)[k], "
                 f"mask=ok), p, lambda q: {source_q}).to(al.f32)\n")  # fmt: skip
    # the same loop with each fp32 product taken as three bf16 ones (`Emission.halves`):
    # a_hi*b_hi + a_hi*b_lo + a_lo*b_hi, the weight's halves read from bf16 copies
    halves = lines + [
        f"{ind}ah = a.to(al.bf16)\n",
        f"{ind}alo = (a - ah.to(al.f32)).to(al.bf16)\n",
        f"{ind}bh = al.load(wh[{tap}, pz % {g}].tile(BK, BC)[k, pc]).to(al.bf16)\n",
        f"{ind}bl = al.load(wl[{tap}, pz % {g}].tile(BK, BC)[k, pc]).to(al.bf16)\n",
        f"{ind}acc = al.dot(alo, bh, acc)\n",
        f"{ind}acc = al.dot(ah, bl, acc)\n",
        f"{ind}acc = al.dot(ah, bh, acc)\n",
    ]
    lines.append(f"{ind}b = al.load(w[{tap}, pz % {g}].tile(BK, BC)[k, pc])\n")
    lines.append(f"{ind}acc = al.dot(a, b.to(al.f32), acc)\n")

    epilogue, more, y_param, y_view, vec_params, kind = _chan_epilogue(
        gm,
        core.node,
        rest,
        inputs,
        result,
        ys,
        cout,
        g,
        binding,
        f"{core.attr}.bias" if mod.bias is not None else None,
    )
    binding["xs"] = {"from": "input", "index": inputs.index(x_node)}  # its extents only
    geometry = ", ".join(f"k{ks[j]} s{st[j]} p{pd[j]} d{dl[j]}" for j in range(nd))
    p = math.prod(ys[2:])
    tiles = {"BP": _conv_bp(p, bc, (128, 64, 256, 32, 512, 1024)), "BC": [bc], "BK": [bk]}
    shape = {"M": ys[0] * p, "N": cout, "K": icg * math.prod(ks)}
    extents = [math.prod(ks), g, icg, ocg]
    w_type = 'al.Tensor["T", "G", "CG", "OCG"]'

    def emit(weights: tuple[str, ...], loops: list[str], note: str) -> str:
        # the Model's channels and kernel fix these extents (the weights have them)
        facts = [f"x.shape[1].eq({g})", f"x.shape[3].eq({icg})", f"xs.shape[1].eq({cin})",
                 f"ys.shape[1].eq({cout})"]  # fmt: skip
        for wn in weights:
            facts += [f"{wn}.shape[0].eq({extents[0]})", f"{wn}.shape[1].eq({g})",
                      f"{wn}.shape[2].eq({icg})", f"{wn}.shape[3].eq({ocg})"]  # fmt: skip
        return _fill(
            "conv", TASK=task, WHAT=" -> ".join(names), KIND=type(mod).__name__, ENTRY=ENTRY,
            GEOMETRY=f"{geometry}, groups {groups}",
            STRIDED=", or a stride the tap does not land on" if transposed else "",
            W_PARAMS=", ".join(f"{wn}: {w_type}" for wn in weights), HALVES=note,
            VEC_PARAMS=vec_params, XS=", ".join(f'"I{j}"' for j in range(nd)),
            YS=", ".join(f'"O{j}"' for j in range(nd)),
            COORDS="".join([f"    al.requires({f})\n" for f in facts] + more + coords),
            LOOPS="".join(loops), EPILOGUE="".join(epilogue), G=str(g), Y_PARAM=y_param,
            Y_VIEW=y_view, P=" * ".join(outs), OCG=str(ocg),
        )  # fmt: skip

    source = emit(("w",), lines, "")
    note = (" Each fp32 product is taken as three bf16 ones, a_hi*b_hi + a_hi*b_lo +\n"
            "a_lo*b_hi (the input's halves split per step, the weight's `wh` and `wl` made once\n"
            "per call by a `relayout_halves` kernel before this one), accumulated in fp32.")  # fmt: skip
    split = {k: v for k, v in binding.items() if k != "w"}
    split.update({"wh": dict(binding["w"]), "wl": dict(binding["w"])})
    halves = Emission("conv", emit(("wh", "wl"), halves, note), ENTRY, tiles, split, shape,
                      names, prepack={"wh": extents, "wl": extents})  # fmt: skip
    return Emission("conv", source, ENTRY, tiles, binding, shape, names,
                    prepack={"w": extents}, halves=halves)  # fmt: skip


def _dwconv(gm, ops, inputs, result, task, names, geometry_of: tuple) -> Emission:
    """A depthwise nn.Conv{1,2,3}d (groups = in = out channels) and its elementwise
    epilogue: the `dwconv` template, a direct convolution over [BP, BC] blocks of positions
    x channels (each tap's gathered input block times the tap's weight per channel).
    `geometry_of`: `_conv`'s (kernel, stride, padding, dilation, input and output extents)."""
    core, rest = ops[0], ops[1:]
    mod = core.module
    x_node = core.args[0]
    xs, ys = _shape(x_node), _shape(core.node)
    nd = len(xs) - 2
    c = mod.in_channels
    ks, st, pd, dl, ins, outs = geometry_of
    coords, lines, tap, source_q = _conv_geometry(
        nd, ks, st, pd, dl, ins, outs, False, 1, chunks=False
    )
    ind = "        "
    # ghost, as the conv template's: row r of the gathered block is the input row of output
    # position p[r] at this tap, so each tap's product adds into the element it is for
    lines.append(f"{ind}a = al.rows_for(al.load(x[pz, 0].rows(src).tile(BC)[pc], mask=ok, along=0), p, "
                 f"lambda q: {source_q})\n")  # fmt: skip
    lines.append(f"{ind}b = al.load(w[{tap}].tile(BC)[pc]).to(al.f32)\n")
    lines.append(f"{ind}acc = acc + a.to(al.f32) * b[None, :]\n")
    binding: dict[str, dict[str, Any]] = {
        "x": {"from": "input", "index": inputs.index(x_node), "view": "ngsc:1"},
        "w": {"from": "param", "attr": f"{core.attr}.weight", "view": "w_dw"},
    }
    epilogue, more, y_param, y_view, vec_params, _ = _chan_epilogue(
        gm, core.node, rest, inputs, result, ys, c, 1, binding,
        f"{core.attr}.bias" if mod.bias is not None else None,
    )  # fmt: skip
    facts = ["x.shape[1].eq(1)", f"x.shape[3].eq({c})", f"xs.shape[1].eq({c})",
             f"ys.shape[1].eq({c})", f"w.shape[0].eq({math.prod(ks)})", f"w.shape[1].eq({c})"]  # fmt: skip
    coords = [f"    al.requires({f})\n" for f in facts] + more + coords
    binding["xs"] = {"from": "input", "index": inputs.index(x_node)}  # its extents only
    geometry = ", ".join(f"k{ks[j]} s{st[j]} p{pd[j]} d{dl[j]}" for j in range(nd))
    source = _fill(
        "dwconv", TASK=task, WHAT=" -> ".join(names), KIND=type(mod).__name__, ENTRY=ENTRY,
        GEOMETRY=geometry, VEC_PARAMS=vec_params, XS=", ".join(f'"I{j}"' for j in range(nd)),
        YS=", ".join(f'"O{j}"' for j in range(nd)), COORDS="".join(coords), C=str(c),
        LOOPS="".join(lines), EPILOGUE="".join(epilogue), Y_PARAM=y_param, Y_VIEW=y_view,
        P=" * ".join(outs),
    )  # fmt: skip
    p = math.prod(ys[2:])
    bcs = [t for t in (16, 32, 64) if t <= _np2(c)] or [16]
    tiles = {"BP": _conv_bp(p, bcs[-1], (128, 64, 256, 32, 512)), "BC": bcs}
    shape = {"M": ys[0] * p, "N": c, "K": math.prod(ks)}
    return Emission("dwconv", source, ENTRY, tiles, binding, shape, names)


def _chan_reduces(ops: list[Op], rank: int) -> bool:
    """Whether `ops` reduce over dim 1 (the channels) of a [N, C, *S] result."""
    return any(o.kind in REDUCTIONS or o.kind in ROW_OPS for o in ops)


def _chan_lines(ops, start, acc, operand, vector, full, channels):
    """DSL lines of a channels-last epilogue over a [BP, BC] block of [N, C, *S] results
    `full` (rows: positions, columns: channels): elementwise ops, BatchNorm in eval, and
    reductions or softmax over dim 1 (the block's columns; `clive` masks the columns past
    `channels`). Returns (lines, env): env maps each computed node to (name, kind), kind
    "full" or "row" (one value per position: [N, 1, *S] with keepdim, or [N, *S])."""
    rank = len(full)
    keep = full[:1] + (1,) + full[2:]
    rows = {keep, full[:1] + full[2:]}
    env: dict[Any, tuple[str, str]] = {start: (acc, "full")}
    lines: list[str] = []

    def value(a: Any) -> tuple[str, str]:
        c = _const(a)
        if c is not None:
            return c, "const"
        if a in env:
            return env[a]
        name = operand(a)
        return name, "const" if name.startswith("sc") else "full"  # a scalar broadcasts

    for i, op in enumerate(ops):
        out = f"e{i}"
        if op.kind == "getitem":
            if op.args[0] not in env or op.params.get("index") != 0:
                raise NoTemplate("only the values ([0]) of max/min over a dim are supported")
            if _shape(op.node) not in rows:
                raise NoTemplate(f"max/min over the channels gives {_shape(op.node)}")
            env[op.node] = env[op.args[0]]
            continue
        if op.kind == "batch_norm":
            x, kind = value(op.args[0])
            mod = op.module
            if kind != "full" or mod is None or getattr(mod, "num_features", None) != channels:
                raise NoTemplate("batch_norm after a conv must normalize its channels")
            lines.append(f"    {out} = {_batch_norm(op, x, vector)}\n")
            env[op.node] = (out, "full")
            continue
        if op.kind in REDUCTIONS or op.kind in ROW_OPS:
            x, kind = value(op.args[0])
            if kind != "full" or op.dim not in (1, 1 - rank):
                raise NoTemplate(f"{op.kind} over dim {op.dim} after a conv: only over the "
                                 "channels (dim 1)")  # fmt: skip
            live = lambda e, neutral: f"al.where(clive, {e}, {neutral})"  # noqa: E731
            if op.kind in ("sum", "mean"):
                expr = f"al.sum({live(x, '0.0')}, 1)" + (
                    f" / {float(channels)!r}" if op.kind == "mean" else ""
                )
            elif op.kind in ("amax", "amin"):
                fn = "max" if op.kind == "amax" else "min"
                expr = f"al.{fn}({live(x, REDUCTIONS[op.kind])}, 1)"
            elif op.kind == "norm":
                raise NoTemplate("norm over the channels of a conv is not supported")
            else:
                lines.append(f"    {out}_m = al.max({live(x, REDUCTIONS['amax'])}, 1)\n")
                lines.append(
                    f"    {out}_s = al.sum({live(f'al.exp({x} - {out}_m[:, None])', '0.0')}, 1)\n"
                )
                expr = {
                    "logsumexp": f"{out}_m + al.log({out}_s)",
                    "softmax": f"al.exp({x} - {out}_m[:, None]) / {out}_s[:, None]",
                    "log_softmax": f"{x} - {out}_m[:, None] - al.log({out}_s)[:, None]",
                }[op.kind]
            shape = "full" if op.kind in ROW_OPS else "row"
            want = {full} if shape == "full" else rows
        elif op.kind in ELEMENTWISE:
            vals = [value(a) for a in op.args]
            kinds = {k for _, k in vals}
            shape = "full" if "full" in kinds else "row" if "row" in kinds else "const"
            if shape == "const":
                raise NoTemplate(f"{op.kind} of constants only")
            names_ = []
            for (v, k), a in zip(vals, op.args):
                if k == "row" and shape == "full":
                    if _shape(a) != keep:  # PyTorch broadcasts [N, 1, *S] along the channels
                        raise NoTemplate(f"{op.kind} broadcasts {_shape(a)} against {full}")
                    v = f"{v}[:, None]"
                names_.append(v)
            expr = _elementwise_expr(op, names_)
            want = {full} if shape == "full" else rows
        else:
            raise NoTemplate(f"{op.kind} after a convolution is not fused yet (elementwise "
                             "epilogues, BatchNorm in eval and reductions over the channels are)")  # fmt: skip
        if not op.tuple_out and _shape(op.node) not in want:
            raise NoTemplate(f"{op.kind} gives shape {_shape(op.node)}, not {full} or its rows")
        lines.append(f"    {out} = {expr}\n")
        env[op.node] = (out, shape)
    return lines, env


def _chan_epilogue(gm, start, rest, inputs, result, ys, cout, g, binding, bias=None):
    """The fused channels-last epilogue of a [BP, BC] block `acc` of the [N, C, *S] result
    `start` (`_chan_lines`): operands are constants, scalars, per-channel vectors ([C],
    [C, 1, ...]: the [G, C/G] view) and tensors of the output's shape (its channels-last
    view); `bias` names a parameter added first. Returns (epilogue lines, coordinate lines
    (the output's facts, `clive`), y parameter, y view, vector parameters, kind)."""
    ocg = cout // g
    # the fused epilogue over the [BP, BC] block: channel vectors broadcast along positions
    vectors: list[str] = []
    scalars: list[str] = []
    fulls: list[str] = []
    loads: list[str] = []

    def vector(src_: dict[str, Any]) -> str:
        name = f"vec{len(vectors)}"
        vectors.append(name)
        binding[name] = {**src_, "view": f"go:{g}"}
        loads.append(f"    {name}_t = al.load({name}[pz % {g}].tile(BC)[pc]).to(al.f32)[None, :]\n")
        return f"{name}_t"

    def channel_vector(shape: tuple[int, ...]) -> bool:
        full = (1,) * (len(ys) - len(shape)) + tuple(shape)
        return len(full) == len(ys) and all(
            s == 1 or (d == 1 and s == cout) for d, s in enumerate(full)
        ) and math.prod(shape) == cout  # fmt: skip

    def operand(node: Any) -> str:
        src_ = {"from": "input", "index": inputs.index(node)} if node in inputs else None
        src_ = src_ or _param_binding(gm, node)
        shape = _shape(node)
        if src_ is not None and math.prod(shape) == 1:  # a one-element (or 0-d) tensor
            name = f"sc{len(scalars)}"
            scalars.append(name)
            binding[name] = {**src_, "view": "1d"}
            loads.append(f"    {name}_t = al.load_scalar({name}, 0)\n")
            return f"{name}_t"
        if src_ is not None and channel_vector(shape):
            return vector(src_)
        if src_ is not None and shape == ys:  # a tensor of the output's shape, same view
            name = f"full{len(fulls)}"
            fulls.append(name)
            binding[name] = {**src_, "view": f"ngsc:{g}"}
            loads.append(f"    {name}_t = al.load({name}[pz // {g}, pz % {g}]"
                         ".tile(BP, BC)[pp, pc]).to(al.f32)\n")  # fmt: skip
            return f"{name}_t"
        raise NoTemplate(f"epilogue operand {node} of shape {shape} is neither a constant, a "
                         f"scalar, a per-channel vector of {cout} nor of the output's shape")  # fmt: skip

    if bias is not None:
        vector({"from": "param", "attr": bias})
        loads.append("    acc = acc + vec0_t\n")
    chain, env = _chan_lines(rest, start, "acc", operand, vector, ys, cout)
    if result not in env or env[result][1] == "const":
        raise NoTemplate("the forward's result is not computed by the channel program")
    res, kind = env[result]
    epilogue = loads + chain + [f"    out = {res}\n"]
    facts = (
        [f"y.shape[1].eq({g})", f"y.shape[3].eq({ocg})", "y.shape[2].eq(P)"]
        if kind == "full"
        else ["y.shape[1].eq(1)", "y.shape[2].eq(P)"]
    )
    facts.append("y.shape[0].eq(ys.shape[0])")  # fmt: skip
    coords = [f"    al.requires({f})\n" for f in facts]
    if _chan_reduces(rest, len(ys)):
        coords.append("    _, col = al.indices((BP, BC))\n")
        coords.append(f"    clive = col < {cout}\n")
    if kind == "full":
        binding["y"] = {"from": "output", "view": f"ngsc:{g}"}
        y_param, y_view = (
            'y: al.Tensor["N", "G", "P", "OCG"]',
            f"y[pz // {g}, pz % {g}].tile(BP, BC)[pp, pc]",
        )
    else:  # reduced over the channels: [N, 1, P]
        binding["y"] = {"from": "output", "view": "n1s"}
        y_param, y_view = 'y: al.Tensor["N", "ONE", "P"]', "y[pz, 0].tile(BP)[pp]"
    binding["ys"] = {"from": "output"}
    vec_params = "".join(f' {v}: al.Tensor["G", "OCG"],' for v in vectors)
    vec_params += "".join(f' {v}: al.Tensor["S{j}"],' for j, v in enumerate(scalars))
    vec_params += "".join(f' {v}: al.Tensor["N", "G", "P", "OCG"],' for v in fulls)
    return epilogue, coords, y_param, y_view, vec_params, kind


def _chanprog(gm, ops, inputs, result, task, names) -> Emission:
    """A channel program over an [N, C, *S] forward input: ops that reduce over its channels
    (dim 1), BatchNorm2d/3d in eval, and elementwise ops (`_chan_lines`)."""
    x_node = ops[0].args[0]
    xs = _shape(x_node)
    if x_node not in inputs or len(xs) < 3:
        raise NoTemplate("a channel program starts from an [N, C, *S] forward input")
    cout = xs[1]
    if cout > 256:
        raise NoTemplate(f"a channel program over {cout} channels: at most 256")
    binding: dict[str, dict[str, Any]] = {
        "x": {"from": "input", "index": inputs.index(x_node), "view": "ngsc:1"}
    }
    start = x_node
    epilogue, more, y_param, y_view, vec_params, _ = _chan_epilogue(
        gm, start, ops, inputs, result, xs, cout, 1, binding
    )
    facts = ["x.shape[1].eq(1)", f"x.shape[3].eq({cout})", f"ys.shape[1].eq({cout})",
             "x.shape[0].eq(ys.shape[0])", "x.shape[2].eq(P)"]  # fmt: skip
    coords = [f"    al.requires({f})\n" for f in facts] + more
    binding["ys"] = {"from": "input", "index": inputs.index(x_node)}  # its extents only
    nd = len(xs) - 2
    source = _fill(
        "chanprog", TASK=task, WHAT=" -> ".join(names), ENTRY=ENTRY, VEC_PARAMS=vec_params,
        Y_PARAM=y_param, YS=", ".join(f'"O{j}"' for j in range(nd)),
        P=" * ".join(f"ys.shape[{2 + j}]" for j in range(nd)), OCG=str(cout),
        COORDS="".join(coords), EPILOGUE="".join(epilogue), Y_VIEW=y_view,
    )  # fmt: skip
    bc = _np2(cout)
    p = math.prod(xs[2:])
    tiles = {"BP": [t for t in (64, 128, 32, 256, 16) if t <= _np2(p) and t * bc <= 32768] or [16],
             "BC": [bc]}  # fmt: skip
    return Emission("chanprog", source, ENTRY, tiles, binding, {"M": xs[0] * p, "N": cout}, names)


def _pool(gm, ops, inputs, result, task, names) -> Emission:
    """nn.MaxPool{1,2,3}d / nn.AvgPool{1,2,3}d of a forward input (kernel, stride, padding,
    dilation, ceil_mode for max; count_include_pad and divisor_override for avg), then the
    channels-last epilogue (`_chan_epilogue`)."""
    core, rest = ops[0], ops[1:]
    mod = core.module
    x_node = core.args[0]
    xs, ys = _shape(x_node), _shape(core.node)
    nd = len(xs) - 2
    if x_node not in inputs or nd not in (1, 2, 3) or len(ys) != len(xs):
        raise NoTemplate("pooling of a batched [N, C, *S] forward input (1-3 spatial dims)")
    is_max = core.kind == "max_pool"

    def per_dim(v: Any) -> list[int]:
        return list(v) if isinstance(v, list | tuple) else [int(v)] * nd

    ks = per_dim(mod.kernel_size)
    st = per_dim(mod.stride if mod.stride is not None else mod.kernel_size)
    pd = per_dim(mod.padding)
    dl = per_dim(getattr(mod, "dilation", 1))
    if is_max and getattr(mod, "return_indices", False):
        raise NoTemplate("max pooling with return_indices")
    divisor = float(math.prod(ks))
    if not is_max:
        if mod.ceil_mode or not mod.count_include_pad:
            raise NoTemplate("avg pooling with ceil_mode or count_include_pad=False")
        if getattr(mod, "divisor_override", None):  # AvgPool1d has none
            divisor = float(mod.divisor_override)
    cout = xs[1]
    bc = min(_np2(cout), 64)
    if _chan_reduces(rest, len(ys)):
        if cout > 256:
            raise NoTemplate(f"a reduction over {cout} channels: at most 256")
        bc = _np2(cout)
    ins = [f"xs.shape[{2 + j}]" for j in range(nd)]
    outs = [f"ys.shape[{2 + j}]" for j in range(nd)]
    coords, lines, _, source_q = _conv_geometry(
        nd, ks, st, pd, dl, ins, outs, False, 1, chunks=False
    )
    ind = "        "
    neutral = 'float("-inf")' if is_max else "0.0"
    lines.append(f"{ind}a = al.rows_for(al.load(x[pz, 0].rows(src).tile(BC)[pc], mask=ok, "
                 f"other={neutral}, along=0).to(al.f32), p, lambda q: {source_q})\n")  # fmt: skip
    lines.append(f"{ind}acc = " + ("al.maximum(acc, a)\n" if is_max else "acc + a\n"))
    if not is_max:
        lines.append(f"    acc = acc / {divisor!r}\n")
    binding: dict[str, dict[str, Any]] = {
        "x": {"from": "input", "index": inputs.index(x_node), "view": "ngsc:1"},
        "xs": {"from": "input", "index": inputs.index(x_node)},  # its extents only
    }
    epilogue, more, y_param, y_view, vec_params, _ = _chan_epilogue(
        gm, core.node, rest, inputs, result, ys, cout, 1, binding
    )
    facts = ["x.shape[1].eq(1)", f"x.shape[3].eq({cout})", f"xs.shape[1].eq({cout})",
             f"ys.shape[1].eq({cout})", "x.shape[0].eq(ys.shape[0])"]  # fmt: skip
    coords = [f"    al.requires({f})\n" for f in facts] + more + coords
    geometry = ", ".join(f"k{ks[j]} s{st[j]} p{pd[j]} d{dl[j]}" for j in range(nd))
    source = _fill(
        "pool", TASK=task, WHAT=" -> ".join(names), KIND=type(mod).__name__, ENTRY=ENTRY,
        GEOMETRY=geometry, NEUTRAL_NAME="-inf" if is_max else "0 (counted, as PyTorch's "
        "count_include_pad)", VEC_PARAMS=vec_params, Y_PARAM=y_param,
        XS=", ".join(f'"I{j}"' for j in range(nd)), YS=", ".join(f'"O{j}"' for j in range(nd)),
        P=" * ".join(outs), OCG=str(cout), COORDS="".join(coords), INIT=neutral,
        LOOPS="".join(lines), EPILOGUE="".join(epilogue), Y_VIEW=y_view,
    )  # fmt: skip
    p = math.prod(ys[2:])
    tiles = {"BP": [t for t in (64, 128, 32, 256, 16) if t <= _np2(p) and t * bc <= 32768] or [16],
             "BC": [bc]}  # fmt: skip
    return Emission("pool", source, ENTRY, tiles, binding, {"M": xs[0] * p, "N": cout}, names)


def _fullreduce_tiles(c: int) -> dict[str, list[int]]:
    """`fullreduce`'s tiles for rows of c: the interpreter's first (its cost is per step: a
    whole row a step, as many rows as 2^16 elements hold), then the rest (a GPU's first is
    `family.gpu_reduce_tiles`')."""
    bc = min(_np2(c), 65536)
    rows = [r for r in (4, 1, 2, 8, 16) if r * bc <= 65536] or [1]
    return {"ROWS": rows + [r for r in (16, 8, 4, 2, 1) if r not in rows],
            "BC": [bc, *[t for t in (256, 128, 1024) if t < bc]]}  # fmt: skip


def _fullreduce(ops, inputs, result, task, names) -> Emission:
    """sum or mean over every element of an elementwise chain of same-shaped forward inputs
    (`torch.mean((a - b) ** 2)`, a hinge loss): running totals of a flat loop over (row block,
    column tile) pairs; one program, or many writing partial sums (`split_reduction`)."""
    red, chain = ops[-1], ops[:-1]
    x = red.args[0]
    shape = _shape(x)
    used = [n for n in inputs if any(n in o.args for o in ops)]
    if not shape or any(_shape(n) != shape for n in used) or not used:
        raise NoTemplate(f"a whole-tensor {red.kind} needs inputs of one shape {shape}")
    env = {n: f"v{i}" for i, n in enumerate(used)}

    def operand(node: Any) -> str:
        raise NoTemplate(f"operand {node} is not a forward input or a constant")

    body = [
        f"        v{i} = al.load(x{i}.tile(ROWS, BC)[r, c]).to(al.f32)\n" for i in range(len(used))
    ]
    body += ["    " + ln for ln in _chain(chain, env, operand)]
    binding = {
        f"x{i}": {"from": "input", "index": inputs.index(n), "view": "2d"}
        for i, n in enumerate(used)
    }
    binding["y"] = {"from": "output", "view": "1d"}
    params = ", ".join(f'x{i}: al.Tensor["R", "C"]' for i in range(len(used)))
    scale = " / (x0.shape[0] * x0.shape[1])" if red.kind == "mean" else ""
    source = _fill(
        "fullreduce", TASK=task, WHAT=" -> ".join(names), ENTRY=ENTRY, PARAMS=params, X0="x0",
        BODY="".join(body), VALUE=env[x], SCALE=scale,
    )  # fmt: skip
    c = shape[-1] if len(shape) > 1 else shape[0]
    rows = math.prod(shape[:-1]) if len(shape) > 1 else 1
    # the interpreter's cost is per step: a whole row a step first, up to 2^16 elements
    tiles = _fullreduce_tiles(c)
    # its mean's scale is linear: each partial sum carries it
    return Emission("fullreduce", source, ENTRY, tiles, binding, {"M": rows, "N": c}, names,
                    split={"source": source, "count": None})  # fmt: skip


# ----------------------------------------------------------------------------- split reductions
# A whole-tensor reduction (`fullreduce`, `lossreduce`) in one program leaves every SM but
# one idle: on the H200, level1/94 (an MSE over 2^30 elements) took 214 ms, eager 5.9
# (2026-12-02). Split, PARTIALS programs each sum a contiguous run of row blocks into a
# buffer and a last one-program kernel (`partials`) adds the PARTIALS sums up: about four
# programs an SM of the H200's 132, two of MI300X's 304 CUs, in a fixed order (the result
# does not depend on scheduling, as an atomic add's would).
PARTIALS = 512


def split_reduction(em: Emission, task: str, partials: int = PARTIALS) -> Emission:
    """`em` (a whole-tensor reduction with `split` info) as a program of two kernels: its
    template over `partials` programs writing partial sums into a buffer, and `partials`
    adding them up (a cross entropy's mean divided there by the rows it counted). Any
    other emission is returned as it is."""
    if not em.split:
        return em
    if em.split.get("frob"):
        return _split_frob(em, task, partials)
    first = Emission(em.template, em.split["source"], ENTRY, em.tiles, em.binding, em.shape,
                     em.ops)  # fmt: skip
    b0 = {t: dict(v) for t, v in em.binding.items()}
    b0["y"] = {"from": "buffer", "name": "t0", "view": "1d"}
    b1: dict[str, dict[str, Any]] = {"p": {"from": "buffer", "name": "t0", "view": "1d"}}
    params = count = scale = how = ""
    counted = em.split.get("count")
    if counted:
        ig = int(counted["ignore"])
        params = ' tg: al.Tensor["R"],'
        b1["tg"] = dict(counted["binding"])
        count = (
            "    cnt = al.zeros((1,), al.f32)  # rows whose target is not ignore_index\n"
            "    for j in al.range(al.cdiv(tg.shape[0], BP)):\n"
            f"        tgt = al.load(tg.tile(BP)[j], other={ig})\n"
            f"        cnt = cnt + al.sum(al.where(tgt.eq({ig}), 0.0, al.full((BP,), 1.0)), 0)\n"
        )
        scale = " / cnt"
        how = ", divided by the count of rows whose target is not ignore_index"
    b1["y"] = {"from": "output", "view": "1d"}
    src = _fill("partials", TASK=task, WHAT=f"the sum of {partials} partial sums", ENTRY=ENTRY,
                PARAMS=params, COUNT=count, SCALE=scale, HOW=how)  # fmt: skip
    last = Emission("partials", src, ENTRY, {"BP": [min(1024, _np2(partials))]}, b1,
                    {"M": partials, "N": 1}, em.ops)  # fmt: skip
    kernels = [(first, b0, "buffer t0"), (last, b1, "the output")]
    return _assemble(task, list(em.ops), kernels, {"t0": [int(partials)]})


def _split_frob(em: Emission, task: str, partials: int) -> Emission:
    """x / ||x||_F (then an epilogue of constants) as three kernels: the sum of squares of x
    over `partials` programs (`fullreduce`), their sum's square root (`partials`) into a
    one-element buffer, and the division of every element by it (`normscale`)."""
    info = em.split
    rows, cols = int(info["rows"]), int(info["cols"])
    x = dict(info["x"])
    squares = _fill(
        "fullreduce", TASK=task, WHAT="the sum of squares of x, partial sums", ENTRY=ENTRY,
        PARAMS='x0: al.Tensor["R", "C"]', X0="x0", VALUE="v0 * v0", SCALE="",
        BODY="        v0 = al.load(x0.tile(ROWS, BC)[r, c]).to(al.f32)\n",
    )  # fmt: skip
    k0 = Emission("fullreduce", squares, ENTRY, _fullreduce_tiles(cols), {},
                  {"M": rows, "N": cols}, em.ops)  # fmt: skip
    b0 = {"x0": x, "y": {"from": "buffer", "name": "t0", "view": "1d"}}
    root = _fill("partials", TASK=task, WHAT=f"the square root of the sum of {partials} partial "
                 "sums", ENTRY=ENTRY, PARAMS="", COUNT="", SCALE="", HOW=", its square root")  # fmt: skip
    root = root.replace("    out = total\n", "    out = al.sqrt(total)\n")
    k1 = Emission("partials", root, ENTRY, {"BP": [min(1024, _np2(partials))]}, {},
                  {"M": partials, "N": 1}, em.ops)  # fmt: skip
    b1 = {"p": {"from": "buffer", "name": "t0", "view": "1d"},
          "y": {"from": "buffer", "name": "t1", "view": "1d"}}  # fmt: skip
    scaled = _fill("normscale", TASK=task, WHAT="x / ||x||_F", ENTRY=ENTRY,
                   EPILOGUE=info["epilogue"])  # fmt: skip
    k2 = Emission("normscale", scaled, ENTRY,
                  {"BR": [16, 32], "BC": [t for t in (32, 64, 16) if t <= _np2(cols)] or [16]},
                  {}, {"R": rows, "C": cols}, em.ops)  # fmt: skip
    b2 = {"n": {"from": "buffer", "name": "t1", "view": "1d"}, "x": x,
          "y": {"from": "output", "view": "2d"}}  # fmt: skip
    kernels = [(k0, b0, "buffer t0"), (k1, b1, "buffer t1"), (k2, b2, "the output")]
    return _assemble(task, list(em.ops), kernels, {"t0": [int(partials)], "t1": [1]})


# ----------------------------------------------------------------------------- programs
# A graph one kernel cannot hold (a pooling, a second convolution or linear, a reduction over
# spatial dims after a convolution: each needs the whole output of what precedes it) is
# lowered to a program of several kernels: the op chain is cut into segments, each segment
# lowered by the templates above as if the values it reads from earlier segments were graph
# inputs, and those values materialized in buffers the launcher allocates. The kernels share
# one DSL module (entries `kb_k0`, `kb_k1`, ...; the pipeline parses, verifies, lowers and
# compiles each), their tile constants are namespaced per kernel (`k0_BP`, `k1_BP`) so the
# planner tunes each, and `binding[PROGRAM]` is the launch plan `harness.dsl_runner` runs.
PROGRAM = "@program"
PROGRAM_ENTRY = "kb_k{}"
MAX_KERNELS = 6


def _dims_of(op: Op, rank: int) -> tuple[int, ...]:
    """The dims a reduction op reduces (every dim for dim=None), normalized, sorted."""
    if op.dim is None:
        return tuple(range(rank))
    dims = op.dim if isinstance(op.dim, list | tuple) else (op.dim,)
    return tuple(sorted(int(d) % rank for d in dims)) if rank else ()


def _starts_kernel(op: Op) -> bool:
    """Whether a program may start a new kernel at `op`: ops that read the whole output of
    what precedes them (a window, a product, statistics over spatial dims)."""
    if op.kind in ("conv", "conv_transpose", "max_pool", "avg_pool", "linear", "matmul"):
        return True
    rank = len(_shape(op.args[0])) if op.args else 0
    if (op.kind == "group_norm" or "Norm" in op.kind) and rank >= 3:  # statistics over S
        return True
    return op.kind in REDUCTIONS and rank >= 3 and _dims_of(op, rank) != (1,)


def _row_epilogue_cuts(ops: list[Op]) -> list[int]:
    """Cuts of a GEMM's row epilogue that one program cannot hold (rows longer than
    `WHOLE_ROW_MAX_N`, a GroupNorm of more than 32 groups): before the first row op after a
    GEMM (a reduction, softmax, GroupNorm: the GEMM keeps the elementwise ops before it as
    its epilogue and writes a buffer, the row ops read it), and after a GroupNorm of its
    [M, N] rows (the norm's kernel takes constants only; what follows is another kernel).
    Fewest kernels first (`_program`): a row epilogue one program holds stays fused."""
    cuts = []
    for i, o in enumerate(ops):
        if o.kind not in ("linear", "matmul"):
            continue
        for j in range(i + 1, len(ops)):
            k = ops[j].kind
            if k in ("linear", "matmul", "conv", "conv_transpose"):
                break
            if k in REDUCTIONS or k in ROW_OPS or k == "group_norm":
                cuts += [j, j + 1] if k == "group_norm" else [j]
                break
    return [c for c in cuts if c < len(ops)]


def _cuts(ops: list[Op]) -> list[int]:
    """Where a program may start a kernel (never at the first op, nor after a transpose that
    feeds the product): before an op that reads the whole of what precedes it, and after
    any reduction or norm (its value may be broadcast against a tensor of another width);
    and in a GEMM's row epilogue (`_row_epilogue_cuts`)."""
    return (
        [
            i
            for i, o in enumerate(ops)
            if i > 0 and _starts_kernel(o) and ops[i - 1].kind != "transpose"
        ]
        + [
            i + (2 if o.tuple_out and ops[i + 1].kind == "getitem" else 1)  # after (values, _)[0]
            for i, o in enumerate(ops[:-1])
            if o.kind in REDUCTIONS or (_starts_kernel(o) and "norm" in o.kind.lower())
        ]
        + _row_epilogue_cuts(ops)
    )


def _reads(op: Op) -> list[Any]:
    return [a for a in op.args if _is_node(a)]


def _segment_result_ok(ops: list[Op], a: int, b: int, result: Any) -> bool:
    """Whether ops[a:b] has one value the rest of the program reads: no later op (nor the
    forward's result) reads a value of the segment other than its last."""
    inner = {o.node for o in ops[a : b - 1]}
    return result not in inner and not any(n in inner for o in ops[b:] for n in _reads(o))


def _lower_segment(gm, seg, inputs, result, task) -> Emission:
    """One kernel for a segment: the front end's lowerings, then the templates, then a
    channel program of the segment (elementwise ops over an [N, C, *S] buffer)."""
    names = [o.kind for o in seg]
    more = _registered(gm, seg, inputs, result, task, names)
    if more is not None:
        return more
    try:
        return _one_kernel(gm, seg, inputs, result, task, names)
    except NoTemplate:
        x0 = seg[0].args[0] if seg[0].args else None
        if seg[0].kind in (*REDUCTIONS, "argmax", "argmin") and len(_shape(x0)) >= 3:
            rank = len(_shape(x0))
            dims = _dims_of(seg[0], rank)
            if dims and dims[-1] == rank - 1:
                return _trail_rows(gm, seg, inputs, result, task)
            return _mid_rows(gm, seg, inputs, result, task)
        if len(_shape(x0)) >= 3 and all(
            o.kind in ELEMENTWISE or o.kind == "batch_norm" for o in seg
        ):
            return _chanprog(gm, seg, inputs, result, task, names)
        if len(_shape(x0)) == 2 and all(o.kind in ELEMENTWISE for o in seg):
            # elementwise ops of [M, N] rows with [N] vectors (after a GroupNorm's kernel)
            return _rowprog(gm, seg, inputs, result, task, names)
        raise


def _trail_rows(gm, seg, inputs, result, task) -> Emission:
    """A reduction over the trailing dims a.. of an [N, C, *S] tensor x (a spatial mean,
    sum or max; `adaptive_avg_pool(x, 1)`), then elementwise ops of its value, of x and of
    scalars: a row program (`_rowprog`) over x seen as [prod(shape[:a]), prod(shape[a:])]
    rows (the view "rows:<rank - a>", no copy)."""
    red = seg[0]
    x = red.args[0] if red.args else None
    xs = _shape(x)
    rank = len(xs)
    if red.kind not in REDUCTIONS or rank < 3 or x not in inputs:
        raise NoTemplate("a trailing reduction of an [N, C, *S] tensor starts the kernel")
    dims = _dims_of(red, rank)
    a = dims[0]
    if a < 1 or dims != tuple(range(a, rank)):
        raise NoTemplate(f"{red.kind} over dims {dims} of {xs}: only trailing dims after the batch")
    rows, n = math.prod(xs[:a]), math.prod(xs[a:])
    reduced = {xs[:a], xs[:a] + (1,) * (rank - a)}
    virtual: dict[Any, tuple[int, ...]] = {}
    vops = []
    for o in seg:
        for node in [o.node, *_reads(o)]:
            shape = _shape(node)
            if shape == xs:
                virtual[node] = (rows, n)
            elif shape in reduced:
                virtual[node] = (rows, 1) if len(shape) > a else (rows,)
            elif node is o.node or math.prod(shape) != 1:
                raise NoTemplate(f"{o.kind} of shape {shape} is neither x's {xs} nor its rows")
        if o.kind in REDUCTIONS or o.kind in ROW_OPS:
            if _dims_of(o, len(_shape(o.args[0]))) != dims:
                raise NoTemplate(f"{o.kind} over other dims than {dims}")
            o = Op(o.kind, o.args, o.node, -1, o.keepdim, o.module, o.attr, o.params, o.tuple_out)
        vops.append(o)
    _VIRTUAL.update(virtual)
    try:
        # rows past lower_more's LONG_ROW (a spatial mean over 2^17 positions): its long-row
        # lowering walks them in column tiles (registered there: no import of it here)
        em = None
        for lowering in ROW_LOWERINGS:
            em = em or lowering(gm, vops, inputs, result, task, [o.kind for o in seg])
        if em is None:
            em = _rowprog(gm, vops, inputs, result, task, [o.kind for o in seg])
    finally:
        for node in virtual:
            _VIRTUAL.pop(node, None)
    for b in em.binding.values():
        if b.get("view") == "2d":
            b["view"] = f"rows:{rank - a}"  # the last rank - a dims as one row
    return em


def _mid_rows(gm, seg, inputs, result, task) -> Emission:
    """A reduction over one middle dim d of a tensor x (`torch.min(x, dim=2)[0]`, a mean over
    the depth of [N, C, D, H, W]): the `midreduce` template over x seen as [prod(shape[:d]),
    shape[d], prod(shape[d + 1:])] (the view "mid:d", no copy)."""
    red = seg[0]
    x = red.args[0] if red.args else None
    xs = _shape(x)
    rank = len(xs)
    kinds = ("sum", "mean", "amax", "amin", "argmax", "argmin")
    if red.kind not in kinds or rank < 3 or x not in inputs:
        raise NoTemplate("a middle-dim reduction of a tensor starts the kernel")
    dims = _dims_of(red, rank)
    if len(dims) != 1 or dims[0] in (0, rank - 1):
        raise NoTemplate(f"{red.kind} over dims {dims} of {xs}: one middle dim")
    if len(seg) > 2 or (
        len(seg) == 2 and (seg[1].kind != "getitem" or seg[1].params.get("index") != 0)
    ):
        raise NoTemplate("a middle-dim reduction is a kernel of its own")
    d = dims[0]
    virtual = {x: (math.prod(xs[:d]), xs[d], math.prod(xs[d + 1 :]))}
    vop = Op(red.kind, red.args, red.node, 1, red.keepdim, red.module, red.attr, red.params,
             red.tuple_out)  # fmt: skip
    _VIRTUAL.update(virtual)
    try:
        em = _midreduce(vop, inputs, task, [o.kind for o in seg])
    finally:
        _VIRTUAL.pop(x, None)
    em.binding["x"]["view"] = f"mid:{d}"
    em.binding["y"]["view"] = f"rows:{rank - d - 1}"  # [A, C]: its last dims as one row
    return em


def _shape_expr(node: Any, inputs: list[Any], known: dict[Any, list[Any]]) -> list[Any]:
    """The extents of `node` as expressions over the graph inputs' shapes (`s[i][d]`), so a
    buffer is sized for the inputs of each call (a trial at other sizes): through the
    windows of convolutions and poolings, kept by elementwise ops; literal where unknown."""
    if node in known:
        return known[node]
    shape = _shape(node)
    if node in inputs:
        i = inputs.index(node)
        return [f"s[{i}][{d}]" for d in range(len(shape))]
    if node.op == "call_module" and node.args and _is_node(node.args[0]):
        mod = node.graph.owning_module.get_submodule(node.target)
        kind = MODULE_KINDS.get(type(mod).__name__, "")
        src = _shape_expr(node.args[0], inputs, known)
        nd = len(shape) - 2
        if kind in ("conv", "conv_transpose", "max_pool", "avg_pool") and len(src) == len(shape):

            def per_dim(v: Any) -> list[int]:
                return list(v) if isinstance(v, list | tuple) else [int(v)] * nd

            k = per_dim(mod.kernel_size)
            s = per_dim(mod.stride if mod.stride is not None else mod.kernel_size)
            p = per_dim(mod.padding) if not isinstance(mod.padding, str) else None
            d = per_dim(getattr(mod, "dilation", 1))
            if p is not None and not getattr(mod, "ceil_mode", False):
                out = [src[0], shape[1]]
                for j in range(nd):
                    i_ = src[2 + j]
                    if kind == "conv_transpose":
                        op_ = per_dim(mod.output_padding)[j]
                        e = f"(({i_}) - 1) * {s[j]} - {2 * p[j]} + {d[j] * (k[j] - 1) + op_ + 1}"
                    else:
                        e = f"(({i_}) + {2 * p[j] - d[j] * (k[j] - 1) - 1}) // {s[j]} + 1"
                    out.append(e)
                known[node] = out
                return out
        if kind == "linear" and len(src) == len(shape):  # [..., K] -> [..., out_features]
            known[node] = [*src[:-1], shape[-1]]
            return known[node]
    x = node.args[0] if node.args and _is_node(node.args[0]) else None
    if _is_node(x) and node.op == "call_function" and node.target in _function_kinds():
        kind = _function_kinds()[node.target]
        if kind in ("matmul", "linear"):
            known[node] = [*_shape_expr(x, inputs, known)[:-1], shape[-1]]
            return known[node]
        if kind in ELEMENTWISE:  # the shape of an operand of its shape
            for a in node.args:
                if _is_node(a) and _shape(a) == shape:
                    known[node] = _shape_expr(a, inputs, known)
                    return known[node]
    if node.op == "call_module" and x is not None:  # a layer that keeps its input's shape
        mod = node.graph.owning_module.get_submodule(node.target)
        kind = MODULE_KINDS.get(type(mod).__name__, "")
        if (kind in ELEMENTWISE or "norm" in kind or "Norm" in type(mod).__name__) and _shape(
            x
        ) == shape:
            known[node] = _shape_expr(x, inputs, known)
            return known[node]
    red = node
    if node.target is operator.getitem and _is_node(x):
        red = x  # (values, indices)[0] of a reduction: the reduction's operand and dims
    rx = red.args[0] if red.args and _is_node(red.args[0]) else None
    if rx is not None:  # a reduction (or a pool to one element): its operand's extents
        sa = _shape(rx) if rx is not None else ()
        dims = red.args[1] if len(red.args) > 1 else red.kwargs.get("dim")
        dims = (
            [dims]
            if isinstance(dims, int)
            else list(dims)
            if isinstance(dims, list | tuple)
            else []
        )
        src = _shape_expr(rx, inputs, known) if rx is not None else []
        if sa and len(sa) == len(shape) and all(x_ == y or x_ == 1 for x_, y in zip(shape, sa)):
            known[node] = [e if x_ == y else 1 for e, x_, y in zip(src, shape, sa)]  # keepdim
            return known[node]
        if sa and dims and len(sa) - len(dims) == len(shape):  # the reduced dims dropped
            drop = {int(d) % len(sa) for d in dims if isinstance(d, int)}
            known[node] = [e for j, e in enumerate(src) if j not in drop]
            return known[node]
    known[node] = list(shape)
    return known[node]


def _check_shape_expr(expr: list[Any], node: Any, inputs: list[Any]) -> list[Any]:
    """`expr` where it gives the node's shape on the graph's own inputs, else the literal
    shape."""
    s = [list(_shape(n)) for n in inputs]
    try:
        got = [eval(e, {"__builtins__": {}}, {"s": s}) if isinstance(e, str) else e for e in expr]  # noqa: S307
    except Exception:
        got = None
    return expr if got == list(_shape(node)) else list(_shape(node))


def _namespaced(source: str, entry: str, tiles: dict[str, list[int]], k: int) -> str:
    """A kernel's source with its entry renamed and its tile constants prefixed `k<k>_`."""
    import re

    text = source.replace(f"def {ENTRY}(", f"def {entry}(")
    for name in sorted(tiles, key=len, reverse=True):
        text = re.sub(rf"\b{name}\b", f"k{k}_{name}", text)
    return text


RESHAPES = ("unsqueeze", "squeeze", "view", "reshape", "flatten")


def _is_reshape(op: Op) -> bool:
    """A view of a contiguous tensor with as many elements (`x.unsqueeze(1)`, `.squeeze(-1)`,
    `.view(n, -1)`, `torch.flatten(x, 1)`): between kernels a buffer seen with another shape."""
    name = op.kind.removeprefix("unknown:").lstrip(".")
    if name not in RESHAPES or not op.args or not _is_node(op.args[0]):
        return False
    return math.prod(_shape(op.node)) == math.prod(_shape(op.args[0])) and bool(_shape(op.node))


def _size_expr(a: Any, extent_of: Callable[[Any], list[Any]] | None) -> Any:
    """The extent expression of a view's argument `a`: an int as it is; `t.shape[i]` or
    `t.size(i)` of a traced tensor t as t's extent i (`extent_of(t)`); None otherwise."""
    if isinstance(a, int) and not isinstance(a, bool):
        return a
    if extent_of is None or not _is_node(a):
        return None
    t, i = None, None
    if a.op == "call_function" and a.target is operator.getitem and len(a.args) == 2:
        base, i = a.args
        if _is_node(base) and (
            (base.op == "call_function" and base.target is getattr and base.args[1:] == ("shape",))
            or (base.op == "call_method" and base.target == "size" and len(base.args) == 1)
        ):
            t = base.args[0]
    elif a.op == "call_method" and a.target == "size" and len(a.args) == 2:
        t, i = a.args
    if t is None or not isinstance(i, int) or not _is_node(t):
        return None
    ext = extent_of(t)
    return ext[i % len(ext)] if ext else None


def _view_shape_expr(
    node: Any, src: list[Any], extent_of: Callable[[Any], list[Any]] | None = None
) -> list[Any]:
    """The extents of a reshape `node` of a tensor of extents `src` (expressions):
    unsqueeze/squeeze of a dim and flatten follow them; a view/reshape whose sizes are
    ints, -1 or extents of traced tensors (`b, c = x.shape[:2]; y.view(b, c, -1)`: through
    `extent_of`) follows those; others are literal."""
    shape = list(_shape(node))
    name = str(node.target).removeprefix(".")
    name = getattr(node.target, "__name__", name)
    dims = [a for a in node.args[1:] if isinstance(a, int)]
    rank = len(src)
    if name in ("view", "reshape") and len(node.args) > 1:
        args = node.args[1:]
        if len(args) == 1 and isinstance(args[0], tuple | list):
            args = tuple(args[0])
        sizes = [_size_expr(a, extent_of) for a in args]
        if len(sizes) == len(shape) and all(e is not None for e in sizes):
            if sizes.count(-1) == 1:  # the rest of the elements
                whole = " * ".join(f"({e})" for e in src) or "1"
                rest = " * ".join(f"({e})" for e in sizes if e != -1) or "1"
                sizes[sizes.index(-1)] = f"({whole}) // ({rest})"
            if -1 not in sizes:
                return sizes
    if name == "unsqueeze" and len(dims) == 1:
        d = dims[0] % (rank + 1)
        return [*src[:d], 1, *src[d:]]
    if name == "squeeze" and len(dims) == 1 and rank and _shape(node.args[0])[dims[0] % rank] == 1:
        d = dims[0] % rank
        return [*src[:d], *src[d + 1 :]]
    if name == "flatten" and rank:
        lo = dims[0] % rank if dims else 0
        hi = dims[1] % rank if len(dims) > 1 else rank - 1
        mid = " * ".join(f"({e})" for e in src[lo : hi + 1])
        return [*src[:lo], mid, *src[hi + 1 :]]
    return shape


def _program(gm, ops, inputs, result, task, names) -> Emission:
    """A program of kernels for `ops`: segments cut at `_cuts`, fewest kernels first (each
    segment the longest prefix of the rest that one kernel holds). A reshape between
    kernels is no kernel: the next reads the buffer with the reshape's extents; a reshape
    of the last kernel's result is the output seen with the kernel's extents."""
    if isinstance(result, tuple | list) or not ops:
        raise NoTemplate("a program computes one tensor")
    views = [i for i, o in enumerate(ops) if _is_reshape(o)]
    cuts = sorted(set(_cuts(ops) + views + [i + 1 for i in views]) - {0})
    bounds = [*cuts, len(ops)]
    n_in = len(inputs)
    seg_inputs = list(inputs)  # graph inputs, then each earlier kernel's result or a view
    held: list[tuple[int, Any]] = []  # per seg_inputs[n_in:]: (kernel whose buffer, node)
    segments: list[tuple[int, int, Emission]] = []
    read: list[tuple[Any, ...]] = []  # per segment: seg_inputs when it was lowered
    known: dict[Any, list[Any]] = {}
    a, why = 0, ""
    while a < len(ops):
        if a in views:  # a view of an earlier kernel's result
            src = ops[a].args[0]
            if src not in seg_inputs[n_in:]:
                raise NoTemplate(f"{ops[a].kind} of a value that no earlier kernel stored")
            k_src = held[seg_inputs[n_in:].index(src)][0]
            known[ops[a].node] = _view_shape_expr(
                ops[a].node,
                _shape_expr(src, inputs, known),
                lambda t: _shape_expr(t, inputs, known),
            )
            seg_inputs.append(ops[a].node)
            held.append((k_src, ops[a].node))
            a += 1
            continue
        found = None
        for b in sorted((b for b in bounds if b > a), reverse=True):
            seg_result = ops[b - 1].node
            if not _segment_result_ok(ops, a, b, result):
                continue
            try:
                em = _lower_segment(gm, ops[a:b], seg_inputs, seg_result, task)
            except NoTemplate as exc:
                why = f"{' -> '.join(o.kind for o in ops[a:b])}: {exc}"  # the shortest's
                continue
            if em.entries:
                continue  # a segment is one kernel
            found = (b, em)
            break
        if found is None:
            raise NoTemplate(
                f"no kernel holds the ops from {ops[a].kind} on" + (f" ({why})" if why else "")
            )
        b, em = found
        read.append(tuple(seg_inputs))  # what the segment's emission reads as inputs
        held.append((len(segments), ops[b - 1].node))
        segments.append((a, b, em))
        seg_inputs.append(ops[b - 1].node)
        a = b
        if len(segments) > MAX_KERNELS:
            raise NoTemplate(f"a program of more than {MAX_KERNELS} kernels")
    if result not in seg_inputs[n_in:]:
        raise NoTemplate("the forward's result is not a kernel's (or a view of one)")
    k_out, _ = held[seg_inputs[n_in:].index(result)]

    def extents(node: Any) -> list[Any]:
        return _check_shape_expr(_shape_expr(node, inputs, known), node, inputs)

    buffers: dict[str, list[Any]] = {}
    kernels: list[tuple[Emission, dict[str, dict[str, Any]], str]] = []
    for k, (_, b, em) in enumerate(segments):
        binding: dict[str, dict[str, Any]] = {}
        for tname, src in em.binding.items():
            src = dict(src)
            node = None
            if src["from"] == "input" and src["index"] >= n_in:
                k_src, node = held[src.pop("index") - n_in]  # kernel k_src's result, or a view
            elif src["from"] == "output":
                k_src, node = k, ops[b - 1].node
            else:
                binding[tname] = src
                continue
            if k_src == k_out:  # the output itself, seen with this node's extents
                src = {**src, "from": "output"}
                if node is not result:
                    src["shape"] = extents(node)
            else:
                src = {**src, "from": "buffer", "name": f"t{k_src}"}
                if node is not ops[segments[k_src][1] - 1].node:  # a view of the buffer
                    src["shape"] = extents(node)
            binding[tname] = src
        if k != k_out:
            buffers[f"t{k}"] = extents(ops[b - 1].node)
        kernels.append((em, binding, f"buffer t{k}" if k != k_out else "the output"))
    program = _assemble(task, names, kernels, buffers)
    program.segments = tuple(zip(read, (ops[b - 1].node for _, b, _ in segments), strict=True))
    return program


def _weight_buffer(buffers: dict[str, list[Any]], extents: list[Any]) -> str:
    """A new buffer `w<i>` of `extents` in `buffers` (a weight's copy), its name."""
    name = f"w{len(buffers)}"
    while name in buffers:
        name += "_"
    buffers[name] = list(extents)
    return name


def _assemble(
    task: str,
    names: list[str],
    kernels: list[tuple[Emission, dict[str, dict[str, Any]], str]],
    buffers: dict[str, list[Any]],
    prepack: bool = False,
    halves: bool = False,
) -> Emission:
    """The program of `kernels` (each an emission, its binding to the task's inputs, the
    buffers `t<k>` and the output, and what it writes, in words), launched in order: one
    DSL module, entries `kb_k<i>`, tile constants `k<i>_`-named."""
    given = (list(kernels), dict(buffers))
    # with `prepack`, a parameter a kernel reads through a strided view (`Emission.prepack`):
    # a `relayout` kernel before it copies it into a contiguous buffer `w<i>`, read instead;
    # with `halves` too, a kernel with an `Emission.halves` form runs that, its weight split
    # by a `relayout_halves` kernel into two bf16 buffers (the plan's "dtypes" names them)
    expanded: list[tuple[Emission, dict[str, dict[str, Any]], str]] = []
    buffers = dict(buffers)
    dtypes: dict[str, str] = {}
    for em, binding, store in kernels:
        src = dict(binding.get("w") or {})
        view = str(src.get("view") or "")
        if (prepack and halves and em.halves is not None and src.get("from") == "param"
                and view.startswith(("w_conv:", "w_convT:"))):  # fmt: skip
            names_ = [_weight_buffer(buffers, em.halves.prepack[t]) for t in ("wh", "wl")]
            dtypes.update({name: "bf16" for name in names_})
            split = _relayout(task, str(src["attr"]), int(view.partition(":")[2]),
                              list(em.halves.prepack["wh"]), halves=True)  # fmt: skip
            expanded.append((split, {"w": src, "yh": {"from": "buffer", "name": names_[0]},
                                     "yl": {"from": "buffer", "name": names_[1]}},
                             f"buffers {names_[0]}, {names_[1]} (the weight {src['attr']}'s "
                             "bf16 halves)"))  # fmt: skip
            binding = {k: v for k, v in binding.items() if k != "w"}
            binding.update({"wh": {"from": "buffer", "name": names_[0]},
                            "wl": {"from": "buffer", "name": names_[1]}})  # fmt: skip
            expanded.append((em.halves, binding, store))
            continue
        for tname, extents in em.prepack.items() if prepack else ():
            src = binding.get(tname, {})
            view = str(src.get("view") or "")
            if src.get("from") != "param" or not view.startswith(("w_conv:", "w_convT:")):
                continue
            name = _weight_buffer(buffers, extents)
            copy = _relayout(task, str(src["attr"]), int(view.partition(":")[2]), extents)
            expanded.append((copy, {"w": dict(src), "y": {"from": "buffer", "name": name}},
                             f"buffer {name} (the weight {src['attr']}, contiguous)"))  # fmt: skip
            binding = {**binding, tname: {"from": "buffer", "name": name}}
        expanded.append((em, binding, store))
    kernels = expanded
    launches: list[dict[str, Any]] = []
    parts: list[str] = []
    tiles: dict[str, list[int]] = {}
    entries: list[str] = []
    for k, (em, binding, store) in enumerate(kernels):
        entry = PROGRAM_ENTRY.format(k)
        launches.append({"entry": entry, "binding": binding})
        text = _namespaced(em.source, entry, em.tiles, k)
        head, _, kernel = text.partition("@al.kernel\n")
        doc = head.split("from argus_plugins.dsl.tile import lang as al")[0].strip().strip('"')
        comment = "".join(f"# {ln}".rstrip() + "\n" for ln in doc.splitlines())
        parts.append(f"# ---- kernel {entry} (template `{em.template}`), writes {store}\n"
                     f"{comment}@al.kernel\n{kernel.rstrip()}\n")  # fmt: skip
        tiles.update({f"k{k}_{t}": v for t, v in em.tiles.items()})
        entries.append(entry)
    plan = " -> ".join(f"{e} ({em.template})" for e, (em, _, _) in zip(entries, kernels))
    source = (
        f'"""KernelBench task {task}: {" -> ".join(names)} as a program of {len(entries)} '
        "kernel(s) (emitted by argus).\n\n"
        f"{plan}. Each kernel reads the task's inputs and parameters and the buffers earlier "
        "kernels wrote (the launcher allocates them, poisoned, between guard regions), and "
        "is verified on its own; its tile constants carry its index. A reshape between "
        "kernels is the same buffer seen with other extents.\n"
        '"""\n\nfrom argus_plugins.dsl.tile import lang as al\n\n\n' + "\n\n".join(parts)
    )
    bad = library_calls(source)
    if bad:
        raise NoTemplate(f"the program calls outside the DSL: {'; '.join(bad)}")
    plan_binding: dict[str, Any] = {PROGRAM: {"launches": launches, "buffers": buffers}}
    if dtypes:  # buffers of another dtype than the output's
        plan_binding[PROGRAM]["dtypes"] = dtypes
    # the program's dims (the cost model's) are its first kernel's besides weight copies
    first = next((em for em, _, _ in kernels if not em.template.startswith("relayout")),
                 kernels[0][0])  # fmt: skip
    parts_ = tuple((em.template, dict(em.shape)) for em, _, _ in kernels)
    return Emission("program", source, entries[-1], tiles, plan_binding, dict(first.shape),
                    names, tuple(entries), parts_, assembled=given)  # fmt: skip
