"""Derive a `Spec` from a torch.fx graph, node by node.

Each node gets a *dependence*: the reads (input tensor, index over the node's own output
coordinates `o0..` and bound variables) that one of its elements depends on, and its shape
(symbolic: input dims are symbols, a dim of size 1 stays the literal 1 so broadcasting is
visible). A node's dependence is its operands' dependences with their coordinates replaced
by the index the node reads them at: `a + b` reads both at o, `a @ b` reads a at (o0, k) and
b at (k, o1) with k contracted, `x.sum(-1)` reads x at (o0, r) with r reduced, `softmax`
reads the row (r reduced) and the element itself, `repeat_interleave(G, dim=1)` reads
o1 // G. An op without a rule raises `CannotDerive` naming it and the supported ops.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Sequence
from typing import Any

from argus_core.errors import ConfigError
from argus_core.ir.expr import BoolOp, Const, Expr, IntLike, Sym, as_expr, land, lnot
from argus_core.spec.model import Bound, OutputSpec, Read, Spec, out_sym, value_sym


class CannotDerive(ConfigError):
    """The graph has an op the specification rules do not cover."""

    stage = "spec"


# ops that read their tensor operands at the output element (with broadcasting)
POINTWISE = {
    "add",
    "sub",
    "mul",
    "div",
    "truediv",
    "true_divide",
    "neg",
    "abs",
    "relu",
    "relu6",
    "sigmoid",
    "tanh",
    "exp",
    "exp2",
    "log",
    "log2",
    "log1p",
    "expm1",
    "sqrt",
    "rsqrt",
    "gelu",
    "silu",
    "elu",
    "selu",
    "leaky_relu",
    "hardtanh",
    "hardsigmoid",
    "hardswish",
    "softplus",
    "softsign",
    "mish",
    "clamp",
    "clip",
    "pow",
    "maximum",
    "minimum",
    "where",
    "sin",
    "cos",
    "erf",
    "reciprocal",
    "square",
    "sign",
    "floor",
    "ceil",
    "round",
    "float",
    "half",
    "bfloat16",
    "to",
    "type",
    "contiguous",
    "clone",
    "masked_fill",
    "mul_",
    "add_",
    "dropout",
    "identity",
    "logsigmoid",
    "floordiv",
    "mod",
    "celu",
    "tanhshrink",
    "hardshrink",
    "softshrink",
    "threshold",
    "gt",
    "lt",
    "ge",
    "le",
    "eq",
    "detach",
}
REDUCTIONS = {
    "sum",
    "mean",
    "amax",
    "amin",
    "max",
    "min",
    "logsumexp",
    "norm",
    "prod",
    "var",
    "std",
    "argmin",
    "argmax",
}
ROW_OPS = {"softmax", "log_softmax"}
MATMULS = {"matmul", "mm", "bmm", "linear", "scaled_dot_product_attention", "einsum"}
LAYOUT = {
    "transpose",
    "permute",
    "t",
    "unsqueeze",
    "expand",
    "repeat_interleave",
    "view",
    "reshape",
    "squeeze",
    "flatten",
    "getitem",
    "index_select",
    "flip",
}
# ops whose output reads a row by rank (the k largest): like a reduction over the dim
SELECTIONS = {"topk", "sort", "argsort"}
SCANS = {"cumsum", "cumprod"}  # element i reads the row's elements r <= i
CONVS = {f"{c}{d}d" for c in ("Conv", "ConvTranspose") for d in (1, 2, 3)}
POOLS = {f"{p}{d}d" for p in ("MaxPool", "AvgPool") for d in (1, 2, 3)}
ADAPTIVE = {f"Adaptive{p}{d}d" for p in ("MaxPool", "AvgPool") for d in (1, 2, 3)}
LOSSES = {"mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div", "soft_margin_loss"}
# index-valued ops (positions, not data): they read no input element, their values are known
# (`arange(n)`: [0, n); `full_like(x, c)`: c; `scatter(d, idx, src)`: self's or src's)
INDEX_VALUED = {"arange", "full", "full_like", "scatter"}
SUPPORTED = sorted(
    INDEX_VALUED
    | POINTWISE
    | REDUCTIONS
    | ROW_OPS
    | MATMULS
    | LAYOUT
    | SELECTIONS
    | SCANS
    | LOSSES
    | CONVS
    | POOLS
    | {"TripletMarginLoss", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "cross_entropy"}
    | {"cat", "concat", "concatenate", "narrow", "select", "zeros", "zeros_like"}
)

_OPERATORS = {
    operator.add: "add",
    operator.sub: "sub",
    operator.mul: "mul",
    operator.truediv: "div",
    operator.neg: "neg",
    operator.matmul: "matmul",
    operator.floordiv: "floordiv",
    operator.mod: "mod",
    operator.pow: "pow",
    operator.gt: "gt",
    operator.lt: "lt",
    operator.ge: "ge",
    operator.le: "le",
    operator.eq: "eq",
}
_MODULES = {
    "Linear": "linear",
    "ReLU": "relu",
    "Sigmoid": "sigmoid",
    "Tanh": "tanh",
    "GELU": "gelu",
    "SiLU": "silu",
    "Softmax": "softmax",
    "LogSoftmax": "log_softmax",
    "Identity": "identity",
    "Dropout": "dropout",
    "ELU": "elu",
    "LeakyReLU": "leaky_relu",
    "Hardtanh": "hardtanh",
    "Softplus": "softplus",
    "Mish": "mish",
    "Hardswish": "hardswish",
    "Hardsigmoid": "hardsigmoid",
}


class _Dep:
    """A node's dependence: reads over its coordinates o0..o{rank-1}, and its shape."""

    def __init__(
        self,
        reads: list[Read],
        shape: tuple[IntLike, ...],
        pred: Expr | None = None,
        values: Expr | None = None,
    ):
        self.reads, self.shape = reads, shape
        self.pred = pred  # a boolean mask made in the graph (ones().tril()): true where it is
        # an index-valued node (`INDEX_VALUED`): the values its elements may hold, over
        # `value_sym()`; None for data (any value)
        self.values = values

    def at(self, index: Sequence[IntLike], guard: Expr | None = None) -> list[Read]:
        """The reads of the element at `index` (expressions over the caller's coordinates),
        each only where `guard` (over the caller's coordinates) also holds."""
        m = {out_sym(d): e for d, e in enumerate(index)}
        out = []
        for r in self.reads:
            g = r.guard.subs(m) if r.guard is not None else None
            g = (
                land(g, guard)
                if g is not None and guard is not None
                else (g if g is not None else guard)
            )
            out.append(Read(r.tensor, tuple(_subs(e, m) for e in r.index), guard_of(g)))
        return out

    def pred_at(self, index: Sequence[IntLike]) -> Expr | None:
        if self.pred is None:
            return None
        return self.pred.subs({out_sym(d): e for d, e in enumerate(index)})


def guard_of(g: Any) -> Expr | None:
    """None for a guard that always holds (a mask of ones)."""
    if g is None or isinstance(g, bool | int) or isinstance(g, Const):
        if g is None or (g.value if isinstance(g, Const) else g):
            return None
        return as_expr(g)
    return g


def _subs(e: IntLike, m: dict[Sym, IntLike]) -> IntLike:
    return e.subs(m) if isinstance(e, Expr) else e


def _dedup(reads: list[Read]) -> list[Read]:
    seen: dict[str, Read] = {}
    for r in reads:
        seen.setdefault(r.key(), r)
    return list(seen.values())


def _kind(node: Any) -> str:
    """The op name of an fx node (`call_function` target, method name, module class)."""
    if node.op == "call_function":
        t = node.target
        if t in _OPERATORS:
            return _OPERATORS[t]
        return getattr(t, "__name__", str(t)).split(".")[-1]
    if node.op == "call_method":
        return str(node.target)
    if node.op == "call_module":
        mod = node.graph.owning_module.get_submodule(node.target)
        return _MODULES.get(type(mod).__name__, type(mod).__name__)
    return node.op


def _dim(d: Any, rank: int, kind: str) -> int:
    if not isinstance(d, int):
        raise CannotDerive(f"{kind}: dim {d!r} is not a single int")
    return d % rank


def spec_of_graph(
    gm: Any,
    inputs: Sequence[str] | None = None,
    outputs: Sequence[str] | None = None,
    dims: dict[str, Sequence[IntLike]] | None = None,
) -> Spec:
    """The specification of fx graph `gm` (shape-propagated: `meta["tensor_meta"]`).
    `inputs` renames the placeholders in order (default: their names), `outputs` names the
    outputs (default `out0`, ...), `dims` gives an input's dim symbols (default `<name>_<d>`;
    a dim of concrete size 1 is the literal 1 unless `dims` names it)."""
    ph = [n for n in gm.graph.nodes if n.op == "placeholder"]
    names = list(inputs) if inputs is not None else [n.name for n in ph]
    if len(names) != len(ph):
        raise CannotDerive(f"{len(names)} input names {names} for {len(ph)} placeholders")
    dims = dict(dims or {})
    deps: dict[Any, _Dep] = {}
    ints: dict[Any, IntLike] = {}
    bounds: dict[Sym, Bound] = {}
    fresh = itertools.count()
    all_dims: dict[str, tuple[IntLike, ...]] = {}

    def leaf(node: Any, name: str) -> _Dep:
        if "tensor_meta" not in node.meta:  # a number argument: one element
            all_dims[name] = ()
            return _Dep([Read(name, ())], ())
        shape = tuple(node.meta["tensor_meta"].shape)
        given = dims.get(name)
        sym = tuple(
            given[d] if given is not None else (1 if s == 1 else Sym(f"{name}_{d}", "shape"))
            for d, s in enumerate(shape)
        )
        all_dims[name] = sym
        return _Dep([Read(name, tuple(out_sym(d) for d in range(len(shape))))], sym)

    def bound(kind: str, extent: IntLike, op: str) -> Sym:
        s = Sym(f"{'k' if kind == 'contract' else 'r'}{next(fresh)}", "spec")
        bounds[s] = Bound(s, kind, extent, op)
        return s

    for node, name in zip(ph, names):
        deps[node] = leaf(node, name)
    result: list[Any] = []
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            continue
        if node.op == "get_attr":
            deps[node] = leaf(node, str(node.target))
            continue
        if node.op == "output":
            out = node.args[0]
            result = list(out) if isinstance(out, tuple | list) else [out]
            continue
        if "tensor_meta" not in node.meta and not _tuple_reduction(node):
            ints[node] = _int_rule(node, deps, ints)
            continue
        deps[node] = _rule(node, deps, bound, gm, ints)
    onames = list(outputs) if outputs is not None else [f"out{i}" for i in range(len(result))]
    if len(onames) != len(result):
        raise CannotDerive(f"{len(onames)} output names {onames} for {len(result)} outputs")
    specs = {}
    for oname, node in zip(onames, result):
        d = deps[node]
        used = set()
        for r in d.reads:
            used |= r.bound_syms(bounds)
        specs[oname] = OutputSpec(
            oname, d.shape, _dedup(d.reads), {s: bounds[s] for s in used}, d.values
        )
    params, sizes = _params(gm, specs, all_dims)
    return Spec(specs, all_dims, params=params, sizes=sizes)


def segment_graph(gm: Any, inputs: Sequence[Any], result: Any) -> Any:
    """The part of fx graph `gm` that computes node `result` from nodes `inputs` (a
    program's kernel: graph inputs and earlier kernels' results): a GraphModule whose
    placeholders are `inputs` in order (their metadata kept: an earlier kernel's buffer
    is an input of its node's shape), then the nodes between (parameters' `get_attr`s and
    modules kept), its output `result`. CannotDerive where `result` reads a graph input
    that is not among `inputs`."""
    import torch.fx

    given = {n: i for i, n in enumerate(inputs)}
    need: set[Any] = set()
    stack = [result]
    while stack:
        n = stack.pop()
        if n in need or n in given:
            continue
        if n.op == "placeholder":
            raise CannotDerive(f"{result.name} reads graph input {n.name}, not the kernel's")
        need.add(n)
        stack.extend(n.all_input_nodes)
    g = torch.fx.Graph()
    env: dict[Any, Any] = {}
    for i, n in enumerate(inputs):
        env[n] = g.placeholder(f"in{i}")
        env[n].meta = dict(n.meta)
    for n in gm.graph.nodes:
        if n in need:
            env[n] = g.node_copy(n, lambda a: env[a])
            env[n].meta = dict(n.meta)
    g.output(env[result])
    return torch.fx.GraphModule(gm, g)


def _params(
    gm: Any, specs: dict[str, OutputSpec], all_dims: dict[str, tuple[IntLike, ...]]
) -> tuple[dict[str, tuple[IntLike, ...]], dict[Sym, int]]:
    """The dims of the module parameters the reads name (`conv.weight`: `_param`'s
    symbols) and each symbol's size (the parameter's shape)."""
    params: dict[str, tuple[IntLike, ...]] = {}
    sizes: dict[Sym, int] = {}
    for o in specs.values():
        for r in o.reads:
            if r.tensor in all_dims or r.tensor in params:
                continue
            mod, _, attr = r.tensor.rpartition(".")
            try:
                p = getattr(gm.get_submodule(mod), attr, None)
            except AttributeError:
                continue
            shape = getattr(p, "shape", None)
            if shape is None or len(shape) != len(r.index):
                continue
            syms = tuple(
                1 if s == 1 else Sym(f"{r.tensor}_{d}", "shape") for d, s in enumerate(shape)
            )
            params[r.tensor] = syms
            sizes.update({x: int(s) for x, s in zip(syms, shape) if isinstance(x, Sym)})
    return params, sizes


def _broadcast(shapes: list[tuple[IntLike, ...]]) -> tuple[IntLike, ...]:
    rank = max(len(s) for s in shapes)
    out: list[IntLike] = []
    for d in range(rank):
        got: IntLike = 1
        for s in shapes:
            k = d - (rank - len(s))
            if k >= 0 and not (isinstance(s[k], int) and s[k] == 1):
                got = s[k]
        out.append(got)
    return tuple(out)


_INT_OPS = {
    operator.add: lambda a, b: a + b,
    operator.sub: lambda a, b: a - b,
    operator.mul: lambda a, b: a * b,
    operator.floordiv: lambda a, b: a // b,
    operator.neg: lambda a: -a,
}


def _int_rule(node: Any, deps: dict[Any, _Dep], ints: dict[Any, IntLike]) -> Any:
    """An integer computed from shapes (`q.size(2)`, `k.shape[2] - q.shape[2]`), symbolic."""

    def val(a: Any) -> Any:
        if a in ints:
            return ints[a]
        if isinstance(a, int | float | bool | str) or a is None:
            return a
        raise CannotDerive(f"{node.name}: {a} is not an integer of the shapes")

    if node.op == "call_method" and node.target == "size" and node.args[0] in deps:
        shape = deps[node.args[0]].shape
        if len(node.args) > 1:
            return shape[_dim(node.args[1], len(shape), "size")]
        return tuple(shape)
    if node.op == "call_function" and getattr(node.target, "__name__", "") == "getattr":
        obj, attr = node.args
        if obj in deps and attr == "shape":
            return tuple(deps[obj].shape)
        if obj in deps and attr in ("device", "dtype"):
            return None
    if node.op == "call_function" and node.target is operator.getitem and node.args[0] in ints:
        return ints[node.args[0]][node.args[1]]
    if node.op == "call_function" and node.target in _INT_OPS:
        return _INT_OPS[node.target](*[val(a) for a in node.args])
    raise CannotDerive(
        f"{node.name} ({_kind(node)}): not a tensor and not an integer of the shapes"
    )


def _ival(a: Any, ints: dict[Any, IntLike]) -> Any:
    if isinstance(a, list | tuple):
        return type(a)(_ival(x, ints) for x in a)
    return a if isinstance(a, slice) else ints.get(a, a)


MASK_MAKERS = {"ones", "ones_like", "tril", "triu", "invert", "logical_not", "bitwise_not"}


def _rule(
    node: Any, deps: dict[Any, _Dep], bound: Callable[..., Sym], gm: Any, ints: dict[Any, IntLike]
) -> _Dep:
    kind = _kind(node)
    args = [_ival(a, ints) for a in node.args]
    kwargs = {k: _ival(v, ints) for k, v in node.kwargs.items()}
    if kind in MASK_MAKERS:
        return _mask(node, kind, args, kwargs, deps)
    if node.op == "call_module":
        mod = gm.get_submodule(node.target)
        if kind == "linear":
            x = deps[args[0]]
            return _linear(
                x, _param(gm, node, "weight", deps), _param(gm, node, "bias", deps), bound
            )
        if kind in ("softmax", "log_softmax"):
            return _row(deps[args[0]], mod.dim if mod.dim is not None else -1, kind, bound)
        if kind in ("GroupNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm",
                    "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"):  # fmt: skip
            return _norm(node, kind, mod, deps[args[0]], gm, deps, bound)
        if kind in CONVS:
            return _conv(node, kind, mod, deps[args[0]], gm, deps, bound)
        if kind in POOLS:
            return _pool(node, kind, mod, deps[args[0]], bound)
        if kind in ADAPTIVE:
            return _adaptive(node, kind, mod, deps[args[0]], bound)
        if kind == "TripletMarginLoss":
            return _triplet(node, mod, args, deps, bound)
    if kind in INDEX_VALUED:
        return _index_valued(node, kind, args, kwargs, deps)
    o = [out_sym(d) for d in range(8)]
    if kind in ("masked_fill", "where") and args[0 if kind == "where" else 1] in deps:
        m = deps[args[0 if kind == "where" else 1]]
        if m.pred is not None:
            x = deps[args[1] if kind == "where" else args[0]]
            shape = _broadcast([x.shape, m.shape])
            idx = lambda s: [0 if _one(s[k]) else o[k + len(shape) - len(s)] for k in range(len(s))]  # noqa: E731
            keep = m.pred_at(idx(m.shape))
            keep = keep if kind == "where" else _neg(keep)
            reads = x.at(idx(x.shape), keep)
            if kind == "where" and len(args) > 2 and args[2] in deps:
                y = deps[args[2]]
                reads += y.at(idx(y.shape), _neg(m.pred_at(idx(m.shape))))
                shape = _broadcast([shape, y.shape])
            return _Dep(reads, shape)
    if kind in POINTWISE or (
        node.op == "call_module" and kind in _MODULES.values() and kind not in ("linear",)
    ):
        ops = [a for a in list(args) + list(kwargs.values()) if a in deps]
        if not ops:
            raise CannotDerive(f"{node.name} ({kind}) has no tensor operand")
        shape = _broadcast([deps[a].shape for a in ops])
        reads: list[Read] = []
        for a in ops:
            s = deps[a].shape
            off = len(shape) - len(s)
            idx = [
                0 if (isinstance(s[k], int) and s[k] == 1) else o[k + off] for k in range(len(s))
            ]
            reads += deps[a].at(idx)
        return _Dep(reads, shape)
    if kind == "einsum":
        return _einsum(node, args, deps, bound)
    if kind in ("matmul", "mm", "bmm"):
        a, b = deps[args[0]], deps[args[1]]
        if len(a.shape) < 2 or len(b.shape) < 2:
            raise CannotDerive(f"{node.name} ({kind}): 1-D operands are not supported")
        batch = _broadcast([a.shape[:-2], b.shape[:-2]]) if len(a.shape) + len(b.shape) > 4 else ()
        r = len(batch)
        k = bound("contract", a.shape[-1], node.name)
        ai = [
            0 if (isinstance(s, int) and s == 1) else o[d + r - (len(a.shape) - 2)]
            for d, s in enumerate(a.shape[:-2])
        ]
        bi = [
            0 if (isinstance(s, int) and s == 1) else o[d + r - (len(b.shape) - 2)]
            for d, s in enumerate(b.shape[:-2])
        ]
        reads = a.at(ai + [o[r], k]) + b.at(bi + [k, o[r + 1]])
        return _Dep(reads, (*batch, a.shape[-2], b.shape[-1]))
    if kind == "linear":
        w = deps[args[1]]
        bias = (
            deps[args[2]]
            if len(args) > 2 and args[2] in deps
            else deps.get(node.kwargs.get("bias"))
        )
        return _linear(deps[args[0]], w, bias, bound)
    if kind == "scaled_dot_product_attention":
        q, kk, v = (deps[a] for a in args[:3])
        if len(q.shape) != 4:
            raise CannotDerive(f"{node.name}: attention needs [B, H, S, D] operands")
        gqa = bool(kwargs.get("enable_gqa"))
        hk = o[1] // (q.shape[1] // kk.shape[1]) if gqa else o[1]
        c = bound("contract", q.shape[3], node.name)
        j = bound("contract", kk.shape[2], node.name)
        guard = None
        mask = kwargs.get("attn_mask", args[3] if len(args) > 3 else None)
        if mask is not None:
            m = deps.get(mask)
            if m is None or m.pred is None:
                raise CannotDerive(
                    f"{node.name}: attn_mask must be a boolean mask made in the graph (ones().tril())"
                )
            full = (o[0], o[1], o[2], j)
            n = len(m.shape)
            guard = m.pred_at([0 if _one(m.shape[t]) else full[4 - n + t] for t in range(n)])
        if kwargs.get("is_causal"):
            guard = land(guard, j <= o[2]) if guard is not None else (j <= o[2])
        reads = (
            q.at([o[0], o[1], o[2], c])
            + kk.at([o[0], hk, j, c], guard)
            + v.at([o[0], hk, j, o[3]], guard)
        )
        return _Dep(reads, (q.shape[0], q.shape[1], q.shape[2], v.shape[3]))
    if kind in ("transpose", "t", "permute"):
        x = deps[args[0]]
        n = len(x.shape)
        if kind == "t":
            perm = [1, 0]
        elif kind == "transpose":
            d0, d1 = _dim(args[1], n, kind), _dim(args[2], n, kind)
            perm = list(range(n))
            perm[d0], perm[d1] = d1, d0
        else:
            perm = [
                _dim(p, n, kind)
                for p in (args[1] if isinstance(args[1], tuple | list) else args[1:])
            ]
        idx: list[IntLike] = [0] * n
        for d, p in enumerate(perm):
            idx[p] = o[d]
        return _Dep(x.at(idx), tuple(x.shape[p] for p in perm))
    if kind in ("cat", "concat", "concatenate", "narrow", "select", "zeros_like", "zeros"):
        return _pieces(node, kind, args, kwargs, deps)
    if kind == "unsqueeze":
        x = deps[args[0]]
        d = _dim(args[1], len(x.shape) + 1, kind)
        idx = [o[i] for i in range(len(x.shape) + 1) if i != d]
        return _Dep(x.at(idx), (*x.shape[:d], 1, *x.shape[d:]))
    if kind in ("view", "reshape", "expand"):
        x = deps[args[0]]
        want = tuple(node.meta["tensor_meta"].shape)
        conc = tuple(node.args[0].meta["tensor_meta"].shape)
        if kind == "expand" and len(want) == len(conc):
            idx = [0 if c == 1 and w != 1 else o[d] for d, (c, w) in enumerate(zip(conc, want))]
            shape = tuple(
                x.shape[d]
                if not (conc[d] == 1 and want[d] != 1)
                else Sym(f"{node.name}_{d}", "shape")
                for d in range(len(want))
            )
            return _Dep(x.at(idx), shape)
        if want == conc:
            return _Dep(x.at(o[: len(want)]), x.shape)
        raise CannotDerive(
            f"{node.name} ({kind}) changes the shape {conc} -> {want}: not supported"
        )
    if kind == "repeat_interleave":
        x = deps[args[0]]
        reps = args[1]
        d = _dim(kwargs.get("dim", args[2] if len(args) > 2 else None), len(x.shape), kind)
        if not isinstance(reps, int | Expr) or reps in deps:
            raise CannotDerive(f"{node.name}: repeat_interleave by a tensor is not supported")
        idx = [o[i] // reps if i == d else o[i] for i in range(len(x.shape))]
        return _Dep(
            x.at(idx),
            tuple(x.shape[i] * reps if i == d else x.shape[i] for i in range(len(x.shape))),
        )
    if kind in ("min", "max") and len(args) > 1 and args[1] in deps:  # torch.min(x, y)
        return _pointwise(node, [args[0], args[1]], deps)
    if kind in REDUCTIONS:
        x = deps[args[0]]
        n = len(x.shape)
        pos = 2 if kind == "norm" else 1  # torch.norm(x, p, dim, keepdim)
        dim = kwargs.get("dim", args[pos] if len(args) > pos else None)
        keep = bool(
            kwargs.get(
                "keepdim",
                args[pos + 1] if len(args) > pos + 1 and isinstance(args[pos + 1], bool) else False,
            )
        )
        if dim is None and kind in ("argmin", "argmax"):
            raise CannotDerive(f"{node.name} ({kind}) over every dim (a flat index): give dim")
        dims = (
            list(range(n))  # every dim: a 0-d result (`x.sum()`, `torch.norm(x)`)
            if dim is None
            else [_dim(d, n, kind) for d in (dim if isinstance(dim, tuple | list) else [dim])]
        )
        rs = {d: bound("reduce", x.shape[d], node.name) for d in dims}
        idx, shape, j = [], [], 0
        for d in range(n):
            if d in rs:
                idx.append(rs[d])
                if keep:
                    shape.append(1)
                    j += 1
            else:
                idx.append(o[j])
                shape.append(x.shape[d])
                j += 1
        return _Dep(x.at(idx), tuple(shape))
    if kind in ROW_OPS:
        dim = kwargs.get("dim", args[1] if len(args) > 1 else -1)
        return _row(deps[args[0]], dim, kind, bound)
    if kind == "getattr" and args[0] in deps and args[1] in ("T", "mT"):
        x = deps[args[0]]
        n = len(x.shape)
        idx = [o[i] for i in range(n)]
        idx[-1], idx[-2] = o[n - 2], o[n - 1]
        return _Dep(x.at(idx), (*x.shape[:-2], x.shape[-1], x.shape[-2]))
    if (
        kind == "getitem"
        and args[0] in deps
        and isinstance(args[1], int)
        and _tuple_reduction(node.args[0])
    ):
        return deps[args[0]]  # (values, indices) of max/min over a dim: both read the same
    if kind == "getitem" and args[0] in deps:
        return _select(node, deps[args[0]], args[1], deps)
    if kind == "index_select" and args[0] in deps:
        x = deps[args[0]]
        d = _dim(kwargs.get("dim", args[1] if len(args) > 1 else None), len(x.shape), kind)
        return _gather(
            node, x, d, deps[kwargs.get("index", args[2] if len(args) > 2 else None)], ""
        )
    if kind == "flatten" and args[0] in deps:  # only dims of 1 merged: an index map
        x = deps[args[0]]
        n = len(x.shape)
        lo = _dim(kwargs.get("start_dim", args[1] if len(args) > 1 else 0), n, kind)
        hi = _dim(kwargs.get("end_dim", args[2] if len(args) > 2 else -1), n, kind)
        big = [d for d in range(lo, hi + 1) if not _one(x.shape[d])]
        if len(big) > 1:
            raise CannotDerive(
                f"{node.name} (flatten) merges dims {big} of {x.shape}: not supported"
            )
        idx: list[IntLike] = [out_sym(d) for d in range(lo)]
        idx += [out_sym(lo) if d in big else 0 for d in range(lo, hi + 1)]
        idx += [out_sym(lo + 1 + d - hi - 1) for d in range(hi + 1, n)]
        merged = x.shape[big[0]] if big else 1
        return _Dep(x.at(idx), (*x.shape[:lo], merged, *x.shape[hi + 1 :]))
    if kind == "squeeze":
        x = deps[args[0]]
        n = len(x.shape)
        dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
        drop = (
            [d for d in range(n) if _one(x.shape[d])]
            if dim is None
            else [_dim(d, n, kind) for d in (dim if isinstance(dim, tuple | list) else [dim])]
        )
        drop = [d for d in drop if _one(x.shape[d])]
        idx, j = [], 0
        for d in range(n):
            if d in drop:
                idx.append(0)
            else:
                idx.append(out_sym(j))
                j += 1
        return _Dep(x.at(idx), tuple(x.shape[d] for d in range(n) if d not in drop))
    if kind == "cross_entropy":
        return _cross_entropy(node, args, kwargs, deps, bound)
    if kind in LOSSES:  # the mean/sum of a per-element loss over every element
        ops = [a for a in args[:2] if a in deps]
        red = kwargs.get("reduction", "mean")
        if red == "batchmean" and kind == "kl_div":
            red = "sum"  # the sum over every element divided by the batch: the same reads
        if red not in ("mean", "sum") or len(ops) != 2:
            raise CannotDerive(f"{node.name} ({kind}): reduction {red!r} of two tensors only")
        shape = _broadcast([deps[a].shape for a in ops])
        rs = [bound("reduce", d, node.name) for d in shape]
        reads = []
        for a in ops:
            sh = deps[a].shape
            off = len(shape) - len(sh)
            reads += deps[a].at([0 if _one(sh[k]) else rs[k + off] for k in range(len(sh))])
        return _Dep(reads, ())
    if kind == "flip" and args[0] in deps:  # element o_d of the flipped dims reads n - 1 - o_d
        x = deps[args[0]]
        n = len(x.shape)
        ds = kwargs.get("dims", args[1] if len(args) > 1 else None)
        ds = [_dim(d, n, kind) for d in (ds if isinstance(ds, tuple | list) else [ds])]
        idx = [x.shape[d] - 1 - out_sym(d) if d in ds else out_sym(d) for d in range(n)]
        return _Dep(x.at(idx), x.shape)
    if kind in SCANS:
        x = deps[args[0]]
        n = len(x.shape)
        d = _dim(kwargs.get("dim", args[1] if len(args) > 1 else None), n, kind)
        r = bound("reduce", x.shape[d], node.name)
        idx = [r if i == d else out_sym(i) for i in range(n)]
        return _Dep(x.at(idx, r <= out_sym(d)), x.shape)
    if kind in SELECTIONS:
        x = deps[args[0]]
        n = len(x.shape)
        if kind == "topk":
            kk = kwargs.get("k", args[1] if len(args) > 1 else None)
            d = _dim(kwargs.get("dim", args[2] if len(args) > 2 else -1), n, kind)
        else:
            d = _dim(kwargs.get("dim", args[1] if len(args) > 1 else -1), n, kind)
            kk = x.shape[d]
        r = bound("reduce", x.shape[d], node.name)
        idx = [r if i == d else out_sym(i) for i in range(n)]
        return _Dep(x.at(idx), tuple(kk if i == d else x.shape[i] for i in range(n)))
    raise CannotDerive(
        f"{node.name}: op {kind!r} has no specification rule; supported: {', '.join(SUPPORTED)}"
    )


def _index_valued(
    node: Any, kind: str, args: list[Any], kwargs: dict[str, Any], deps: dict[Any, _Dep]
) -> _Dep:
    """Positions, not data (MoE's alignment: `full_like(buf, SLOTS).scatter(0, row_of,
    arange(SLOTS))`, every row the sentinel or a slot): no input element is read into them;
    their values are `arange`'s [start, end), `full`'s fill, a scatter's self's or src's.
    The scatter's positions are data (the index tensor: whose contract is its producer's)."""
    v = value_sym()
    shape = tuple(node.meta["tensor_meta"].shape)
    if kind == "arange":
        ends = [a for a in args if not isinstance(a, float)]
        lo, hi = (ends[0], ends[1]) if len(ends) > 1 else (0, ends[0] if ends else None)
        step = args[2] if len(args) > 2 else kwargs.get("step", 1)
        if hi is None or not (isinstance(step, int) and step == 1):
            raise CannotDerive(f"{node.name} (arange): only arange(end) / arange(start, end)")
        return _Dep([], (hi - lo,), values=land(v >= lo, v < hi))
    if kind in ("full", "full_like"):
        fill = args[1] if len(args) > 1 else kwargs.get("fill_value")
        if not isinstance(fill, int | Expr) or fill in deps:
            raise CannotDerive(f"{node.name} ({kind}): the fill must be an integer of the shapes")
        src = deps.get(args[0]) if kind == "full_like" else None
        dims = src.shape if src is not None else tuple(args[0])
        return _Dep([], tuple(dims) if len(dims) == len(shape) else shape, values=v.eq(fill))
    # scatter(self, dim, index, src)
    x, idx, src = (deps.get(a) if _is_dep(a, deps) else None for a in (args[0], args[2], args[3]))
    if x is None or idx is None or src is None or src.reads or kwargs.get("reduce"):
        raise CannotDerive(
            f"{node.name} (scatter): only positions (a scatter of arange/full values, "
            "no reduce) are supported; a scatter of data reads it at data-dependent rows"
        )
    values = (
        BoolOp("or", (as_expr(x.values), as_expr(src.values)))
        if x.values is not None and src.values is not None
        else None
    )
    return _Dep(list(x.reads), x.shape, values=values)


def _tuple_reduction(node: Any) -> bool:
    """`torch.max(x, dim)`, `torch.topk(x, k)`, `torch.sort(x)`: (values, indices), read by
    `getitem`."""
    k = _kind(node)
    return (k in ("max", "min") and (len(node.args) > 1 or "dim" in node.kwargs)) or k in (
        "topk",
        "sort",
    )


def _gather(node: Any, x: _Dep, dim: int, idx: _Dep, index_name: str) -> _Dep:
    """`x[ids]` / `x.index_select(dim, ids)` with `ids` an input index tensor: the result
    (ids's dims in place of x's `dim`) reads x at `ids[...]` along `dim` — a read through
    an index tensor (a ghost read `@ids[o0]`, which a kernel's contracts speak of)."""
    from argus_core.ir.tags import read as data_read

    if len(idx.reads) != 1 or idx.pred is not None:
        raise CannotDerive(
            f"{node.name}: an index tensor must be a graph input (a routing id tensor), "
            f"not a computed one"
        )
    (r,) = idx.reads
    m = len(idx.shape)
    o = [out_sym(d) for d in range(len(x.shape) + m)]
    sel = [o[dim + t] for t in range(m)]
    at = data_read(r.tensor, *[_subs(e, {out_sym(t): sel[t] for t in range(m)}) for e in r.index])
    index = [*o[:dim], at, *o[dim + m : dim + m + len(x.shape) - dim - 1]]
    shape = (*x.shape[:dim], *idx.shape, *x.shape[dim + 1 :])
    return _Dep(x.at(index), shape)


def _is_dep(k: Any, deps: dict[Any, _Dep]) -> bool:
    return not isinstance(k, slice | int | type(None) | type(Ellipsis)) and k in deps


def _slice_end(v: Any, default: IntLike, extent: IntLike) -> IntLike:
    """A slice's start or stop: `default` where None, counted from `extent` where negative,
    clamped to `extent` where a literal past it (`x[:, :1]` of a dim of 1)."""
    if v is None:
        return default
    if isinstance(v, int) and v < 0:
        return extent + v
    if isinstance(v, int) and isinstance(extent, int):
        return min(v, extent)
    return v


def _select(node: Any, x: _Dep, key: Any, deps: dict[Any, _Dep]) -> _Dep:
    """`x[i]`, `x[:, 0]`, `x[:, 2:-1]`, `x[..., None]`, `x[ids]`: ints select, full slices
    keep, slices of step 1 take a piece (shifted by their start), None inserts a dim of 1,
    an input index tensor gathers (`_gather`)."""
    items = list(key) if isinstance(key, tuple | list) else [key]
    if any(isinstance(k, type(Ellipsis)) for k in items):
        pos = next(i for i, k in enumerate(items) if isinstance(k, type(Ellipsis)))
        fill = len(x.shape) - sum(1 for k in items if k is not None and k is not Ellipsis)
        items = items[:pos] + [slice(None)] * fill + items[pos + 1 :]
    tensors = [i for i, k in enumerate(items) if _is_dep(k, deps)]
    if tensors:
        if len(tensors) > 1 or any(
            not (isinstance(k, slice) and k == slice(None))
            for i, k in enumerate(items)
            if i not in tensors
        ):
            raise CannotDerive(
                f"{node.name}: indexing by a tensor with other indices is not supported"
            )
        return _gather(node, x, tensors[0], deps[items[tensors[0]]], "")
    o = [out_sym(d) for d in range(len(x.shape) + len(items))]
    index: list[IntLike] = []
    shape: list[IntLike] = []
    j = 0  # output dim
    d = 0  # x dim
    for k in items:
        if k is None:
            shape.append(1)
            j += 1
        elif isinstance(k, int):
            index.append(k % x.shape[d] if k < 0 and isinstance(x.shape[d], int) else k)
            if k < 0 and not isinstance(x.shape[d], int):
                index[-1] = x.shape[d] + k
            d += 1
        elif isinstance(k, slice) and k == slice(None):
            index.append(o[j])
            shape.append(x.shape[d])
            j += 1
            d += 1
        elif (
            isinstance(k, slice)
            and k.step in (None, 1)
            and all(isinstance(v, int | Expr | type(None)) for v in (k.start, k.stop))
        ):  # a contiguous piece `a:b` (ends from the back where negative): as narrow
            lo, hi = _slice_end(k.start, 0, x.shape[d]), _slice_end(k.stop, x.shape[d], x.shape[d])
            index.append(o[j] + lo if not (isinstance(lo, int) and lo == 0) else o[j])
            shape.append(hi - lo if not (isinstance(lo, int) and lo == 0) else hi)
            j += 1
            d += 1
        else:
            raise CannotDerive(
                f"{node.name}: index {k!r} is not supported (ints, slices of step 1, None, "
                "an index tensor)"
            )
    for t in range(d, len(x.shape)):
        index.append(o[j])
        shape.append(x.shape[t])
        j += 1
    return _Dep(x.at(index), tuple(shape))


def _pointwise(node: Any, operands: list[Any], deps: dict[Any, _Dep]) -> _Dep:
    ops = [a for a in operands if a in deps]
    shape = _broadcast([deps[a].shape for a in ops])
    reads: list[Read] = []
    for a in ops:
        s = deps[a].shape
        off = len(shape) - len(s)
        reads += deps[a].at([0 if _one(s[k]) else out_sym(k + off) for k in range(len(s))])
    return _Dep(reads, shape)


def _neg(p: Expr) -> Expr:
    return p.args[0] if isinstance(p, BoolOp) and p.op == "not" else lnot(p)


def _one(e: Any) -> bool:
    return isinstance(e, int) and e == 1


def _mask(
    node: Any, kind: str, args: list[Any], kwargs: dict[str, Any], deps: dict[Any, _Dep]
) -> _Dep:
    """A boolean mask made in the graph, as a predicate over its coordinates."""
    o = [out_sym(d) for d in range(8)]
    if kind in ("ones", "ones_like"):
        if kind == "ones_like":
            shape = deps[args[0]].shape
        else:
            shape = (
                tuple(args[0])
                if len(args) == 1 and isinstance(args[0], tuple | list)
                else tuple(args)
            )
        return _Dep([], shape, land())
    x = deps.get(args[0])
    if x is not None and x.pred is None and kind in ("tril", "triu"):
        # of data: the element where it lies on its side of the diagonal, else 0 (reads
        # nothing there)
        n = len(x.shape)
        d = kwargs.get("diagonal", args[1] if len(args) > 1 else 0)
        if not isinstance(d, int) or n < 2:
            raise CannotDerive(f"{node.name} ({kind}): an int diagonal of a >= 2-d tensor only")
        row, col = o[n - 2], o[n - 1]
        edge = col <= row + d if kind == "tril" else col >= row + d
        reads = [
            Read(r.tensor, r.index, land(*(g for g in (r.guard, edge) if g is not None)))
            for r in x.reads
        ]
        return _Dep(reads, x.shape)
    if x is None or x.pred is None:
        raise CannotDerive(
            f"{node.name} ({kind}): only masks made in the graph (ones, tril, triu, ~) are supported"
        )
    n = len(x.shape)
    if kind in ("tril", "triu"):
        d = kwargs.get("diagonal", args[1] if len(args) > 1 else 0)
        row, col = o[n - 2], o[n - 1]
        edge = col <= row + d if kind == "tril" else col >= row + d
        return _Dep([], x.shape, land(x.pred, edge))
    return _Dep([], x.shape, _neg(x.pred))


def _pieces(
    node: Any, kind: str, args: list[Any], kwargs: dict[str, Any], deps: dict[Any, _Dep]
) -> _Dep:
    """Layouts that read a piece: `narrow(x, d, start, length)` (element o_d reads
    x[o_d + start]), `select(x, d, i)` (x at i along d, the dim dropped), `cat(xs, d)`
    (element o_d of operand j's range reads it at o_d - offset_j, guarded by that range),
    `zeros`/`zeros_like` (no input element)."""
    o = [out_sym(d) for d in range(8)]
    if kind in ("zeros", "zeros_like"):
        shape = tuple(node.meta["tensor_meta"].shape)
        if kind == "zeros_like" and args and args[0] in deps:
            shape = tuple(deps[args[0]].shape)
        return _Dep([], shape)
    if kind in ("narrow", "select"):
        x = deps.get(args[0])
        if x is None:
            raise CannotDerive(f"{node.name} ({kind}): of a traced tensor only")
        n = len(x.shape)
        rest = args[1:] + [kwargs[k] for k in ("dim", "start", "length", "index") if k in kwargs]
        d = _dim(rest[0] if rest else None, n, kind)
        if kind == "select":
            i = rest[1] if len(rest) > 1 else None
            if not isinstance(i, int | Expr):
                raise CannotDerive(f"{node.name} (select): an index of the shapes only")
            if isinstance(i, int) and i < 0:  # from the end
                i = x.shape[d] + i
            idx = [*o[:d], i, *o[d : n - 1]]
            return _Dep(x.at(idx), tuple(x.shape[k] for k in range(n) if k != d))
        start, length = (rest[1], rest[2]) if len(rest) > 2 else (None, None)
        if not isinstance(start, int | Expr) or not isinstance(length, int | Expr):
            raise CannotDerive(f"{node.name} (narrow): start and length of the shapes only")
        idx = [o[k] + start if k == d else o[k] for k in range(n)]
        return _Dep(x.at(idx), tuple(length if k == d else x.shape[k] for k in range(n)))
    parts = args[0] if args and isinstance(args[0], tuple | list) else None
    if parts is None or any(p not in deps for p in parts):
        raise CannotDerive(f"{node.name} ({kind}): a list of traced tensors only")
    n = len(deps[parts[0]].shape)
    d = _dim(args[1] if len(args) > 1 else kwargs.get("dim", 0), n, kind)
    reads: list[Read] = []
    off: IntLike = 0
    for p in parts:
        x = deps[p]
        e = x.shape[d]
        within = land(as_expr(o[d]) >= off, as_expr(o[d]) < off + e)
        reads += x.at([o[k] - off if k == d else o[k] for k in range(n)], within)
        off = e if isinstance(off, int) and off == 0 else off + e
    shape = tuple(off if k == d else deps[parts[0]].shape[k] for k in range(n))
    return _Dep(reads, shape)


def _einsum(
    node: Any, args: tuple[Any, ...], deps: dict[Any, _Dep], bound: Callable[..., Sym]
) -> _Dep:
    """`torch.einsum("bijl,lk->bijk", a, b)`: each output letter is an output coordinate,
    each letter not in the output is contracted (one variable a letter, shared by every
    operand that has it); an operand's dim of extent 1 under a letter that others give
    more broadcasts (index 0). An implicit output (no "->") is the letters seen once, in
    alphabetical order, as PyTorch's. Ellipses are refused."""
    eq = args[0] if args and isinstance(args[0], str) else None
    ops = list(args[1:])
    if len(ops) == 1 and isinstance(ops[0], tuple | list):
        ops = list(ops[0])
    if eq is None or not ops or any(o not in deps for o in ops):
        raise CannotDerive(f"{node.name} (einsum): an equation and traced operands only")
    eq = eq.replace(" ", "")
    if "." in eq:
        raise CannotDerive(f"{node.name} (einsum {eq!r}): ellipses are not supported")
    lhs, arrow, rhs = eq.partition("->")
    subs = lhs.split(",")
    if len(subs) != len(ops) or any(len(sub) != len(deps[o].shape) for sub, o in zip(subs, ops)):
        raise CannotDerive(f"{node.name} (einsum {eq!r}): subscripts do not fit the operands")
    if not arrow:
        seen = "".join(subs)
        rhs = "".join(sorted(c for c in set(seen) if seen.count(c) == 1))
    extent: dict[str, IntLike] = {}
    for sub, o in zip(subs, ops):
        for c, e in zip(sub, deps[o].shape):
            if c not in extent or _one(extent[c]):
                extent[c] = e
    if any(c not in extent for c in rhs) or len(set(rhs)) != len(rhs):
        raise CannotDerive(f"{node.name} (einsum {eq!r}): an output letter no operand has")
    var: dict[str, IntLike] = {c: out_sym(j) for j, c in enumerate(rhs)}
    for c in sorted(extent):
        if c not in var:
            var[c] = bound("contract", extent[c], node.name)
    reads: list[Read] = []
    for sub, o in zip(subs, ops):
        x = deps[o]
        reads += x.at([0 if _one(e) and not _one(extent[c]) else var[c]
                       for c, e in zip(sub, x.shape)])  # fmt: skip
    return _Dep(reads, tuple(extent[c] for c in rhs))


def _cross_entropy(
    node: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    deps: dict[Any, _Dep],
    bound: Callable[..., Sym],
) -> _Dep:
    """`F.cross_entropy(x [R, K], y [R])` with class indices (no weights, no smoothing):
    row r reads its every logit (the log-sum-exp) and the logit of its class, x[r, y[r]]
    (a read through the target's values, as `_gather`); "mean"/"sum" over the rows, "none"
    one loss a row."""
    from argus_core.ir.tags import read as data_read

    x, y = (deps.get(a) for a in args[:2]) if len(args) >= 2 else (None, None)
    if x is None or y is None or len(x.shape) != 2 or len(y.shape) != 1:
        raise CannotDerive(f"{node.name} (cross_entropy): [R, K] logits and [R] class indices only")
    if len(y.reads) != 1 or y.pred is not None:
        raise CannotDerive(f"{node.name} (cross_entropy): the targets must be a graph input")
    for k in ("weight", "label_smoothing"):
        if kwargs.get(k) not in (None, 0.0):
            raise CannotDerive(f"{node.name} (cross_entropy): {k} is not supported")
    red = kwargs.get("reduction", "mean")
    if red not in ("mean", "sum", "none"):
        raise CannotDerive(f"{node.name} (cross_entropy): reduction {red!r}")
    row: IntLike = out_sym(0) if red == "none" else bound("reduce", x.shape[0], node.name)
    col = bound("reduce", x.shape[1], node.name)
    (t,) = y.reads
    cls = data_read(t.tensor, *[_subs(e, {out_sym(0): row}) for e in t.index])
    reads = x.at([row, col]) + x.at([row, cls]) + y.at([row])
    return _Dep(reads, (x.shape[0],) if red == "none" else ())


def _triplet(
    node: Any, mod: Any, args: tuple[Any, ...], deps: dict[Any, _Dep], bound: Callable[..., Sym]
) -> _Dep:
    """nn.TripletMarginLoss(anchor, positive, negative): each row's distances d(a, p),
    d(a, n) (and d(p, n) with `swap`) each a sum over the two rows' elements (a dim of 1
    broadcasts); reduction "none" gives one loss a row, "mean"/"sum" one over every row."""
    ops = list(args[:3])
    if len(ops) != 3 or any(a not in deps for a in ops):
        raise CannotDerive(f"{node.name} (TripletMarginLoss): three traced operands only")
    red = getattr(mod, "reduction", "mean")
    if red not in ("mean", "sum", "none"):
        raise CannotDerive(f"{node.name} (TripletMarginLoss): reduction {red!r}")
    shape = _broadcast([deps[a].shape for a in ops])
    if not shape:
        raise CannotDerive(f"{node.name} (TripletMarginLoss): 0-d operands")
    lead = len(shape) - 1
    rows: list[IntLike] = (
        [out_sym(d) for d in range(lead)]
        if red == "none"
        else [bound("reduce", shape[d], node.name) for d in range(lead)]
    )
    pairs = [(0, 1), (0, 2)] + ([(1, 2)] if getattr(mod, "swap", False) else [])
    reads: list[Read] = []
    for pair in pairs:  # each distance its own sum over the row's elements
        idx = [*rows, bound("reduce", shape[-1], node.name)]
        for i in pair:
            sh = deps[ops[i]].shape
            off = len(shape) - len(sh)
            reads += deps[ops[i]].at([0 if _one(sh[k]) else idx[k + off] for k in range(len(sh))])
    return _Dep(reads, tuple(shape[:lead]) if red == "none" else ())


def _norm(
    node: Any,
    kind: str,
    mod: Any,
    x: _Dep,
    gm: Any,
    deps: dict[Any, _Dep],
    bound: Callable[..., Sym],
) -> _Dep:
    """Normalization layers: the element, its statistics' set (the channel's group for
    GroupNorm, the row's last dims for LayerNorm, the (sample, channel)'s positions for
    InstanceNorm; none for BatchNorm in eval, whose running statistics are parameters) and
    the per-channel (per-feature) parameters."""
    n = len(x.shape)
    o = [out_sym(d) for d in range(n)]
    reads = x.at(o)
    chan: list[IntLike]
    if kind == "GroupNorm":
        per = (
            x.shape[1] // mod.num_groups
            if isinstance(x.shape[1], Expr)
            else x.shape[1] // mod.num_groups
        )
        r = bound("reduce", per, node.name)
        rest = [bound("reduce", x.shape[d], node.name) for d in range(2, n)]
        reads += x.at([o[0], (o[1] // per) * per + r, *rest])
        chan = [o[1]]
    elif kind == "LayerNorm":
        k = len(mod.normalized_shape)
        rs = [bound("reduce", x.shape[d], node.name) for d in range(n - k, n)]
        reads += x.at([*o[: n - k], *rs])
        chan = o[n - k :]
    elif kind.startswith("InstanceNorm") and (mod.training or not mod.track_running_stats):
        # each (sample, channel)'s own statistics over its positions (in eval too, unless
        # it tracks running statistics: then as BatchNorm in eval, below)
        rest = [bound("reduce", x.shape[d], node.name) for d in range(2, n)]
        reads += x.at([o[0], o[1], *rest])
        chan = [o[1]]
    else:
        if mod.training or not mod.track_running_stats:
            raise CannotDerive(f"{node.name}: {kind} in training mode is not supported (eval only)")
        chan = [o[1]]
        for attr in ("running_mean", "running_var"):
            p = _param(gm, node, attr, deps)
            if p is not None:
                reads += p.at(chan)
    for attr in ("weight", "bias"):
        p = _param(gm, node, attr, deps)
        if p is not None:
            reads += p.at(chan)
    return _Dep(reads, x.shape)


def _per_dim(v: Any, n: int) -> list[int]:
    return [int(x) for x in v] if isinstance(v, tuple | list) else [int(v)] * n


def _window(
    x: _Dep, o: list[Sym], ks: list[Sym], stride: list[int], pad: list[int], dil: list[int]
) -> tuple[list[IntLike], Expr | None]:
    """The input positions of output position o[2:] for window offsets `ks`: o*stride -
    pad + k*dil per spatial dim, and the guard that they lie inside the input (padding
    positions read nothing: a convolution's zeros, a pool's neutral value)."""
    pos: list[IntLike] = []
    inside = []
    for i, k in enumerate(ks):
        p = o[2 + i] * stride[i] - pad[i] + k * dil[i]
        pos.append(p)
        if pad[i]:
            inside += [as_expr(p) >= 0, as_expr(p) < x.shape[2 + i]]
    return pos, (land(*inside) if inside else None)


def _out_size(n: IntLike, k: IntLike, stride: int, pad: int, dil: int) -> IntLike:
    return (n + 2 * pad - dil * (k - 1) - 1) // stride + 1


def _conv(
    node: Any,
    kind: str,
    mod: Any,
    x: _Dep,
    gm: Any,
    deps: dict[Any, _Dep],
    bound: Callable[..., Sym],
) -> _Dep:
    """Conv{1,2,3}d: out[n, co, p] reads x[n, g*Cg + c, p*stride - pad + k*dil] (inside the
    input) and weight[co, c, k], c < Cg and k < K contracted, g = co // (Cout / G) the
    output channel's group; bias[co]. ConvTranspose: out[n, co, q] reads x[n, g*Cg + c, i]
    where q = i*stride - pad + k*dil (i = (q + pad - k*dil) / stride, an integer inside the
    input) and weight[g*Cg + c, co % (Cout / G), k]."""
    if getattr(mod, "padding_mode", "zeros") != "zeros" or isinstance(mod.padding, str):
        raise CannotDerive(f"{node.name}: {kind} padding {mod.padding!r} / {mod.padding_mode!r}")
    nd = len(x.shape) - 2
    if nd < 1:
        raise CannotDerive(f"{node.name}: {kind} of a {len(x.shape)}-D input (batched only)")
    w = _param(gm, node, "weight", deps)
    bias = _param(gm, node, "bias", deps)
    assert w is not None
    g = int(mod.groups)
    stride, pad, dil = (_per_dim(v, nd) for v in (mod.stride, mod.padding, mod.dilation))
    ksz = list(w.shape[2:])
    o = [out_sym(d) for d in range(2 + nd)]
    transposed = "Transpose" in kind
    # a group's input channels C/G: a conv's weight dim 1, named as the input's channels
    # over the group count where G > 1 (PyTorch requires them equal), so that a view
    # splitting the channels (`ngsc:G`) divides the input's dim as the read does; a dim of
    # 1 (depthwise) stays 1
    per_in = w.shape[1] if (not transposed and (g == 1 or w.shape[1] == 1)) else x.shape[1] // g
    c = bound("contract", per_in, node.name)
    ks = [bound("contract", ksz[i], node.name) for i in range(nd)]
    if not transposed:
        cout = w.shape[0]
        per_out = cout // g if g > 1 else cout
        chan = (o[1] // per_out) * per_in + c if g > 1 else c
        pos, guard = _window(x, o, ks, stride, pad, dil)
        # a weight tap over padding multiplies zeros: read (depended on) only inside
        reads = x.at([o[0], chan, *pos], guard) + w.at([o[1], c, *ks], guard)
        shape = tuple(
            _out_size(x.shape[2 + i], ksz[i], stride[i], pad[i], dil[i]) for i in range(nd)
        )
        out_c = cout
    else:
        per_out = w.shape[1]  # Cout / G
        cg = x.shape[1] // g if g > 1 else x.shape[1]
        chan = (o[1] // per_out) * cg + c if g > 1 else c
        pos, conds = [], []
        for i in range(nd):
            num = o[2 + i] + pad[i] - ks[i] * dil[i]
            at = num // stride[i] if stride[i] > 1 else num
            pos.append(at)
            if stride[i] > 1:
                conds.append((num % stride[i]).eq(0))
            conds += [as_expr(num) >= 0, as_expr(at) < x.shape[2 + i]]
        oc = o[1] % per_out if g > 1 else o[1]
        inside = land(*conds)
        reads = x.at([o[0], chan, *pos], inside) + w.at([chan, oc, *ks], inside)
        outp = _per_dim(getattr(mod, "output_padding", 0), nd)
        shape = tuple(
            (x.shape[2 + i] - 1) * stride[i] - 2 * pad[i] + dil[i] * (ksz[i] - 1) + outp[i] + 1
            for i in range(nd)
        )
        out_c = w.shape[1] * g
    if bias is not None:
        reads += bias.at([o[1]])
    return _Dep(reads, (x.shape[0], out_c, *shape))


def _pool(node: Any, kind: str, mod: Any, x: _Dep, bound: Callable[..., Sym]) -> _Dep:
    """MaxPool/AvgPool{1,2,3}d: out[n, c, p] reads x[n, c, p*stride - pad + k*dil] for the
    window's k < kernel (reduced), inside the input."""
    nd = len(x.shape) - 2
    if nd < 1 or getattr(mod, "ceil_mode", False) or getattr(mod, "return_indices", False):
        raise CannotDerive(f"{node.name}: {kind} with ceil_mode/return_indices or unbatched")
    ksz = _per_dim(mod.kernel_size, nd)
    stride = _per_dim(mod.stride if mod.stride is not None else mod.kernel_size, nd)
    pad = _per_dim(mod.padding, nd)
    dil = _per_dim(getattr(mod, "dilation", 1), nd)
    o = [out_sym(d) for d in range(2 + nd)]
    ks = [bound("reduce", ksz[i], node.name) for i in range(nd)]
    pos, guard = _window(x, o, ks, stride, pad, dil)
    shape = tuple(_out_size(x.shape[2 + i], ksz[i], stride[i], pad[i], dil[i]) for i in range(nd))
    return _Dep(x.at([o[0], o[1], *pos], guard), (x.shape[0], x.shape[1], *shape))


def _adaptive(node: Any, kind: str, mod: Any, x: _Dep, bound: Callable[..., Sym]) -> _Dep:
    """AdaptiveMax/AvgPool{1,2,3}d to output size O: out[n, c, i] reads x[n, c, start + r]
    for start = i*S // O <= start + r < ceil((i + 1)*S / O), r reduced (PyTorch's bins)."""
    nd = len(x.shape) - 2
    if nd < 1:
        raise CannotDerive(f"{node.name}: {kind} of an unbatched input")
    size = mod.output_size if isinstance(mod.output_size, tuple | list) else [mod.output_size] * nd
    o = [out_sym(d) for d in range(2 + nd)]
    outs: list[IntLike] = []
    pos, inside = [], []
    for i in range(nd):
        s_ = x.shape[2 + i]
        n = s_ if size[i] is None else int(size[i])
        r = bound("reduce", s_, node.name)
        start = o[2 + i] * s_ // n
        end = ((o[2 + i] + 1) * s_ + n - 1) // n
        pos.append(start + r)
        inside.append(as_expr(start + r) < end)
        outs.append(n)
    return _Dep(x.at([o[0], o[1], *pos], land(*inside)), (x.shape[0], x.shape[1], *outs))


def _param(gm: Any, node: Any, attr: str, deps: dict[Any, _Dep]) -> _Dep | None:
    p = getattr(gm.get_submodule(node.target), attr, None)
    if p is None:
        return None
    name = f"{node.target}.{attr}"
    shape = tuple(1 if s == 1 else Sym(f"{name}_{d}", "shape") for d, s in enumerate(p.shape))
    return _Dep([Read(name, tuple(out_sym(d) for d in range(len(shape))))], shape)


def _linear(x: _Dep, w: _Dep | None, bias: _Dep | None, bound: Callable[..., Sym]) -> _Dep:
    assert w is not None
    o = [out_sym(d) for d in range(len(x.shape))]
    k = bound("contract", x.shape[-1], "linear")
    reads = x.at(o[:-1] + [k]) + w.at([o[-1], k]) + (bias.at([o[-1]]) if bias is not None else [])
    return _Dep(reads, (*x.shape[:-1], w.shape[0]))


def _row(x: _Dep, dim: Any, kind: str, bound: Callable[..., Sym]) -> _Dep:
    n = len(x.shape)
    d = _dim(dim, n, kind)
    r = bound("reduce", x.shape[d], kind)
    o = [out_sym(i) for i in range(n)]
    return _Dep(x.at(o) + x.at([r if i == d else o[i] for i in range(n)]), x.shape)


def spec_of_module(
    build: Callable[[], Any],
    make_inputs: Callable[[], Sequence[Any]],
    inputs: Sequence[str] | None = None,
    outputs: Sequence[str] | None = None,
    dims: dict[str, Sequence[IntLike]] | None = None,
    name: str = "module",
) -> Spec:
    """`spec_of_graph` of a module captured by the front end (`frontend.capture`, on meta
    tensors)."""
    from argus_core.frontend.capture import capture

    gm, _ = capture(build, make_inputs, name)
    return spec_of_graph(gm, inputs, outputs, dims)
