"""The offline template front: trace a task's Model with torch.fx, recognise a supported
pattern, and emit a DSL kernel from `templates/`.

Patterns (each op may be a torch function, a tensor method, an F.* call or an nn layer):
  matmul   A @ B, torch.mm/matmul, nn.Linear / F.linear (+ bias), then any elementwise
           epilogue of constants and [N] vectors (add, sub, mul, div, relu, sigmoid, tanh,
           silu, gelu(approximate="tanh"))
  elementwise  a chain of those elementwise ops over same-shaped inputs and constants
  softmax  softmax over the last dim
  rowreduce    sum or mean over the last dim
Anything else raises NoTemplate naming the task and its ops.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from argus_core.errors import ConfigError

TEMPLATES = Path(__file__).with_name("templates")
ENTRY = "kb_kernel"
GELU_C = 1.5957691216057308  # 2 * sqrt(2 / pi): gelu_tanh(x) = x * sigmoid(C * (x + 0.044715 x^3))

# op -> DSL expression over its operand strings
UNARY: dict[str, str] = {
    "relu": "al.maximum({0}, 0.0)",
    "sigmoid": "al.sigmoid({0})",
    "tanh": "2.0 * al.sigmoid(2.0 * {0}) - 1.0",  # the DSL has sigmoid, not tanh
    "silu": "{0} * al.sigmoid({0})",
    "gelu_tanh": f"{{0}} * al.sigmoid({GELU_C} * ({{0}} + 0.044715 * {{0}} * {{0}} * {{0}}))",
    "neg": "-{0}",
}
BINARY: dict[str, str] = {
    "add": "({0} + {1})",
    "sub": "({0} - {1})",
    "mul": "({0} * {1})",
    "div": "({0} / {1})",
}


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


@dataclass
class Op:
    kind: str
    args: list[Any]  # fx nodes or Python numbers
    node: Any
    dim: Any = None
    keepdim: bool = False
    module: Any = None  # the nn layer of a call_module
    attr: str = ""


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


def _function_kinds() -> dict[Any, str]:
    import torch
    import torch.nn.functional as F

    return {
        torch.matmul: "matmul", torch.mm: "matmul", operator.matmul: "matmul",
        F.linear: "linear", operator.add: "add", torch.add: "add", operator.sub: "sub",
        torch.sub: "sub", operator.mul: "mul", torch.mul: "mul", operator.truediv: "div",
        torch.div: "div", operator.neg: "neg", torch.relu: "relu", F.relu: "relu",
        torch.sigmoid: "sigmoid", F.sigmoid: "sigmoid", torch.tanh: "tanh", F.tanh: "tanh",
        F.silu: "silu", F.gelu: "gelu", torch.softmax: "softmax", F.softmax: "softmax",
        torch.sum: "sum", torch.mean: "mean", torch.cumsum: "cumsum",
    }  # fmt: skip


MODULE_KINDS = {"Linear": "linear", "ReLU": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh",
                "SiLU": "silu", "GELU": "gelu", "Softmax": "softmax"}  # fmt: skip
METHOD_KINDS = {m: m for m in ("relu", "sigmoid", "tanh", "softmax", "sum", "mean", "add", "sub",
                               "mul", "div", "matmul", "neg", "cumsum")}  # fmt: skip


def ops_of(gm: Any) -> list[Op]:
    """The graph's compute nodes as Ops, in order (kind 'unknown:<target>' when unmapped)."""
    fkinds = _function_kinds()
    out = []
    for n in gm.graph.nodes:
        if n.op in ("placeholder", "output", "get_attr"):
            continue
        args, kw = list(n.args), dict(n.kwargs)
        if n.op == "call_function":
            kind = fkinds.get(n.target, f"unknown:{getattr(n.target, '__name__', n.target)}")
        elif n.op == "call_method":
            kind = METHOD_KINDS.get(n.target, f"unknown:.{n.target}")
        else:  # call_module
            mod = gm.get_submodule(n.target)
            kind = MODULE_KINDS.get(type(mod).__name__, f"unknown:nn.{type(mod).__name__}")
            op = Op(kind, args, n, module=mod, attr=str(n.target))
            if kind == "gelu":
                op.kind = "gelu_tanh" if mod.approximate == "tanh" else "gelu"
            if kind == "softmax":
                op.dim = mod.dim
            out.append(op)
            continue
        op = Op(kind, args, n, dim=kw.get("dim"), keepdim=bool(kw.get("keepdim", False)))
        if kind == "gelu" and kw.get("approximate") == "tanh":
            op.kind = "gelu_tanh"
        if kind in ("softmax", "sum", "mean", "cumsum") and op.dim is None and len(args) > 1:
            op.dim = args[1]
        if kind in ("sum", "mean") and len(args) > 2:
            op.keepdim = bool(args[2])
        out.append(op)
    return out


def _shape(node: Any) -> tuple[int, ...]:
    meta = node.meta.get("tensor_meta")
    return tuple(meta.shape) if meta is not None else ()


def _is_last_dim(dim: Any, rank: int) -> bool:
    return isinstance(dim, int) and dim in (-1, rank - 1)


def match(gm: Any, task: str) -> Emission:
    """The Emission for a traced task graph (`trace`), or NoTemplate naming its ops."""
    ops = ops_of(gm)
    names = [o.kind for o in ops]
    inputs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    output = next(n for n in gm.graph.nodes if n.op == "output")
    result = output.args[0]
    why = ""
    try:
        if ops and not isinstance(result, tuple | list):
            first = ops[0].kind
            if first in ("matmul", "linear"):
                return _matmul(gm, ops, inputs, result, task, names)
            if first in ("softmax", "sum", "mean") and len(ops) == 1:
                return _rowwise(ops[0], inputs, task, names)
            if all(o.kind in UNARY or o.kind in BINARY for o in ops):
                return _elementwise(ops, inputs, result, task, names)
    except NoTemplate as exc:
        why = f" ({exc})"
    raise NoTemplate(
        f"no template matches task {task} (ops: {', '.join(names) or 'none'}){why}; give "
        "kernel.source=FILE or use an LLM (planner.options.llm=true)"
    )


def _fill(name: str, **parts: str) -> str:
    text = (TEMPLATES / f"{name}.py.tmpl").read_text()
    for key, value in parts.items():
        text = text.replace(f"@@{key}@@", value)
    if "@@" in text:
        raise NoTemplate(f"template {name} has unfilled parts")
    return text


def _chain(ops: list[Op], env: dict[Any, str], operand: Any) -> list[str]:
    """DSL lines computing each elementwise op into `e<i>`, `env` mapping nodes to names;
    `operand(node)` names an operand that is not an earlier op (or raises NoTemplate)."""
    lines = []
    for i, op in enumerate(ops):
        vals = []
        for a in op.args if op.attr == "" else op.args[:1]:
            if isinstance(a, int | float) and not isinstance(a, bool):
                vals.append(repr(float(a)))
            elif a in env:
                vals.append(env[a])
            else:
                vals.append(operand(a))
        if op.kind in UNARY and len(vals) == 1:
            expr = UNARY[op.kind].format(*vals)
        elif op.kind in BINARY and len(vals) == 2:
            expr = BINARY[op.kind].format(*vals)
        else:
            raise NoTemplate(f"{op.kind} with {len(vals)} operands is not elementwise here")
        env[op.node] = f"e{i}"
        lines.append(f"    e{i} = {expr}\n")
    return lines


def _matmul(gm, ops, inputs, result, task, names) -> Emission:
    core, rest = ops[0], ops[1:]
    binding: dict[str, dict[str, Any]] = {}
    a_node = core.args[0]
    if a_node not in inputs or len(_shape(a_node)) != 2:
        raise NoTemplate("the matmul's left operand must be a 2-D forward input")
    binding["a"] = {"from": "input", "index": inputs.index(a_node)}
    m, k = _shape(a_node)
    vectors: list[str] = []
    if core.kind == "matmul":
        b_node = core.args[1]
        if b_node not in inputs or len(_shape(b_node)) != 2:
            raise NoTemplate("the matmul's right operand must be a 2-D forward input")
        binding["b"] = {"from": "input", "index": inputs.index(b_node)}
        n = _shape(b_node)[1]
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
    env: dict[Any, str] = {core.node: "acc"}
    lines = [f"    r{j} = al.load({v}.tile(BN)[pn])[None, :]\n" for j, v in enumerate(vectors)]
    if vectors:  # the Linear's bias, added before its epilogue
        lines.append("    acc = acc + r0\n")

    def operand(node: Any) -> str:
        if node in inputs and _shape(node) == (n,):
            name = f"vec{len(vectors)}"
            vectors.append(name)
            binding[name] = {"from": "input", "index": inputs.index(node)}
            lines.append(f"    r{len(vectors) - 1} = al.load({name}.tile(BN)[pn])[None, :]\n")
            return f"r{len(vectors) - 1}"
        raise NoTemplate(f"epilogue operand {node} is neither a constant nor an [N] vector")

    lines += _chain(rest, env, operand)
    lines.append(f"    out = {env[result]}\n")
    binding["c"] = {"from": "output"}
    vec_params = "".join(f' {v}: al.Tensor["N"],' for v in vectors)
    source = _fill(
        "matmul", TASK=task, WHAT=" -> ".join(names), ENTRY=ENTRY, B_PARAM=b_param,
        BIAS_PARAM=vec_params, B_VIEW=b_view, EPILOGUE="".join(lines),
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
