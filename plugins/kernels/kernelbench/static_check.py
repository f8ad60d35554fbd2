"""Static rejection of PyTorch compute in a KernelBench-style `ModelNew` candidate.

A candidate must do its work in `@triton.jit` kernels. Outside them it may allocate outputs
(`torch.empty`, `empty_like`, `zeros`, ...), look at and re-view tensors (`.shape`,
`.stride()`, `.view`, `.reshape`, `.contiguous`, ...), build `nn` layers (or draw random weights) in
`__init__` only to hold weights, and launch its kernels. Everything else that computes with PyTorch is
rejected, naming the line and the op: torch functions outside the allocation list
(`torch.matmul`, `torch.compile`, `F.softmax`, ...), tensor methods outside the view list
(`.sum()`, `.softmax()`, `.mm()`), calling an `nn` layer (its forward), the `@` operator,
arithmetic on tensor values, and dynamic escapes (`getattr`, `eval`, `exec`, `__import__`).
Imports are limited to torch, torch.nn, triton, triton.language and math.

This check is the first of two: the worker also runs `forward` under a torch-function
guard (`harness.ComputeGuard`) that stops any PyTorch compute the AST cannot see.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from argus_core.errors import ArgusError

ALLOWED_IMPORTS = ("torch", "torch.nn", "triton", "triton.language", "math")
# torch.<name>(...) calls that only allocate or describe, never compute on data
ALLOWED_TORCH_CALLS = frozenset(
    {
        "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like",
        "full", "full_like", "arange", "device", "dtype", "Size", "no_grad", "inference_mode",
        "nn.Parameter", "nn.Module", "cuda.synchronize", "cuda.current_device",
        "finfo", "iinfo", "is_tensor",
    }
)  # fmt: skip
# and in __init__ only: drawing initial weights (as KernelBench's ModelNew files do)
INIT_TORCH_CALLS = frozenset({"manual_seed", "randn", "rand", "randint", "randn_like", "rand_like"})
# tensor methods that re-view, describe or allocate; everything else computes
ALLOWED_METHODS = frozenset(
    {
        "view", "reshape", "contiguous", "size", "stride", "dim", "numel", "element_size",
        "data_ptr", "is_contiguous", "t", "transpose", "permute", "unsqueeze", "squeeze",
        "expand", "flatten", "unflatten", "new_empty", "new_zeros", "new_ones", "new_full",
        "to", "float", "half", "bfloat16", "cuda", "cpu", "detach", "storage_offset",
        "__init__", "register_buffer", "register_parameter", "parameters", "named_parameters",
        "append", "items", "keys", "values", "get",
    }
)  # fmt: skip
SAFE_BUILTINS = frozenset(
    {
        "range", "len", "min", "max", "int", "float", "bool", "tuple", "list", "dict",
        "isinstance", "super", "enumerate", "zip", "print", "abs", "round", "divmod", "str",
        "ValueError", "RuntimeError", "TypeError", "AssertionError", "NotImplementedError",
    }
)  # fmt: skip
FORBIDDEN_NAMES = frozenset(
    {
        "getattr",
        "setattr",
        "eval",
        "exec",
        "compile",
        "__import__",
        "globals",
        "locals",
        "vars",
        "open",
    }
)
TENSOR_ATTRS = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "layout"})
# methods whose result is a number, not a tensor
INT_METHODS = frozenset(
    {
        "size",
        "stride",
        "dim",
        "numel",
        "element_size",
        "data_ptr",
        "is_contiguous",
        "storage_offset",
    }
)


class CandidateRejected(ArgusError):
    """A candidate failed the static check; the message lists every violation."""

    stage = "static"


@dataclass(frozen=True)
class Violation:
    line: int
    op: str
    why: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.op}: {self.why}"


def _dotted(node: ast.AST) -> str | None:
    """'torch.nn.functional.softmax' for an attribute chain rooted at a name, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def _is_jit(fn: ast.FunctionDef) -> bool:
    return any(
        (_dotted(d.func if isinstance(d, ast.Call) else d) or "").endswith("jit")
        for d in fn.decorator_list
    )


class _Checker(ast.NodeVisitor):
    def __init__(self) -> None:
        self.violations: list[Violation] = []
        self.aliases: dict[str, str] = {}  # local name -> module it imports
        self.defined: set[str] = set()  # module-level functions and classes
        self.jit: set[str] = set()  # @triton.jit kernels
        self.methods: set[str] = set()  # methods of the candidate's classes
        self.layers: set[str] = set()  # self.<attr> holding an nn layer
        self.self_tensors: set[str] = set()  # self.<attr> holding a tensor or parameter
        self.tensors: set[str] = set()  # local names bound to tensors (forward's arguments, ...)

    def bad(self, node: ast.AST, op: str, why: str) -> None:
        self.violations.append(Violation(getattr(node, "lineno", 0), op, why))

    # ---------------------------------------------------------------- module structure
    def visit_Module(self, node: ast.Module) -> None:
        for stmt in node.body:
            if isinstance(stmt, ast.FunctionDef | ast.ClassDef):
                self.defined.add(stmt.name)
                if isinstance(stmt, ast.FunctionDef) and _is_jit(stmt):
                    self.jit.add(stmt.name)
            if isinstance(stmt, ast.ClassDef):
                self.methods |= {s.name for s in stmt.body if isinstance(s, ast.FunctionDef)}
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            if a.name not in ALLOWED_IMPORTS:
                self.bad(node, f"import {a.name}", f"allowed imports: {', '.join(ALLOWED_IMPORTS)}")
            self.aliases[a.asname or a.name.split(".")[0]] = (
                a.name if a.asname else a.name.split(".")[0]
            )

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for a in node.names:
            full = f"{node.module}.{a.name}"
            if full not in ALLOWED_IMPORTS:
                self.bad(
                    node,
                    f"from {node.module} import {a.name}",
                    f"allowed imports: {', '.join(ALLOWED_IMPORTS)}",
                )
            self.aliases[a.asname or a.name] = full

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if node.name in self.jit:
            return  # Triton code: what it computes is the candidate's own work
        saved = set(self.tensors)
        if node.name == "forward":  # its arguments are the task's input tensors
            self.tensors |= {a.arg for a in node.args.args[1:]}
        self.generic_visit(node)
        self.tensors = saved

    # ---------------------------------------------------------------- tensor values
    def _module_of(self, dotted: str) -> str:
        head, _, rest = dotted.partition(".")
        full = self.aliases.get(head, head)
        return f"{full}.{rest}" if rest else full

    def _tensor_valued(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.tensors
        if isinstance(node, ast.Attribute):
            if node.attr in TENSOR_ATTRS:
                return False
            parts = (_dotted(node) or "").split(".")
            if parts[0] == "self" and len(parts) == 2:
                return parts[1] in self.self_tensors
            if parts[0] == "self":  # self.fc.weight: a layer's parameter
                return parts[1] in self.layers
            return self._tensor_valued(node.value)
        if isinstance(node, ast.Subscript):
            return self._tensor_valued(node.value) and not (
                isinstance(node.value, ast.Attribute) and node.value.attr in TENSOR_ATTRS
            )
        if isinstance(node, ast.Call):
            name = _dotted(node.func) or ""
            if isinstance(node.func, ast.Attribute) and node.func.attr in INT_METHODS:
                return False
            return self._module_of(name).startswith("torch.") or (
                isinstance(node.func, ast.Attribute) and self._tensor_valued(node.func.value)
            )
        return False

    def visit_Assign(self, node: ast.Assign) -> None:
        tensor = self._tensor_valued(node.value)
        for target in node.targets:
            if isinstance(target, ast.Name) and tensor:
                self.tensors.add(target.id)
            if isinstance(target, ast.Attribute) and _dotted(target.value) == "self" and tensor:
                self.self_tensors.add(target.attr)
            if (
                isinstance(target, ast.Attribute)
                and _dotted(target.value) == "self"
                and isinstance(node.value, ast.Call)
                and self._module_of(_dotted(node.value.func) or "").startswith("torch.nn.")
                and self._module_of(_dotted(node.value.func) or "") != "torch.nn.Parameter"
            ):
                self.layers.add(target.attr)
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult):
            self.bad(node, "@", "matrix product in PyTorch; write it as a Triton kernel")
        elif self._tensor_valued(node.left) or self._tensor_valued(node.right):
            op = type(node.op).__name__
            self.bad(
                node, f"tensor {op}", "arithmetic on tensors runs in PyTorch; do it in a kernel"
            )
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.op, ast.MatMult) or self._tensor_valued(node.target):
            self.bad(
                node, f"tensor {type(node.op).__name__}=", "in-place arithmetic runs in PyTorch"
            )
        self.generic_visit(node)

    # ---------------------------------------------------------------- calls
    def visit_Call(self, node: ast.Call) -> None:
        self._check_call(node)
        self.generic_visit(node)

    def _check_call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Subscript):  # kernel[grid](...)
            if not (isinstance(func.value, ast.Name) and func.value.id in self.jit):
                self.bad(
                    node, ast.unparse(func), "only @triton.jit kernels are launched as k[grid](...)"
                )
            return
        dotted = _dotted(func)
        if isinstance(func, ast.Name):
            name = func.id
            if name in FORBIDDEN_NAMES:
                self.bad(node, f"{name}()", "dynamic lookups and code execution are not allowed")
            elif name in self.aliases:
                self._check_module_call(node, self.aliases[name])
            elif name not in self.defined and name not in SAFE_BUILTINS:
                self.bad(node, f"{name}()", "not a function of this file or an allowed builtin")
            return
        if dotted is not None:
            head = dotted.split(".")[0]
            if head in self.aliases:
                self._check_module_call(node, self._module_of(dotted))
                return
            if head == "self":
                attr = dotted.split(".")[1] if dotted.count(".") >= 1 else ""
                if dotted.count(".") == 1 and attr in self.layers:
                    self.bad(
                        node, dotted, "calls an nn layer's forward; write it as a Triton kernel"
                    )
                    return
                if dotted.count(".") == 1 and (attr in self.methods or attr in ALLOWED_METHODS):
                    return
        if isinstance(func, ast.Attribute) and func.attr not in ALLOWED_METHODS:
            self.bad(node, f".{func.attr}()", "tensor method that computes in PyTorch (or unknown)")

    def _check_module_call(self, node: ast.Call, full: str) -> None:
        module, _, rest = full.partition(".")
        if module == "torch":
            in_init = self._in_init and (rest.startswith("nn.") or rest in INIT_TORCH_CALLS)
            if rest not in ALLOWED_TORCH_CALLS and not in_init:
                self.bad(node, full, "PyTorch compute; only allocation and shape calls are allowed")
        elif module not in ("triton", "math"):
            self.bad(node, full, f"calls into {module}")

    _in_init = False

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for stmt in node.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
                self._in_init = True
                self.visit(stmt)
                self._in_init = False
        for stmt in node.body:
            if not (isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__"):
                self.visit(stmt)


def violations(source: str, filename: str = "<candidate>") -> list[Violation]:
    """Every reason to reject `source` as a ModelNew candidate (empty when it passes).
    A syntax error is one violation at its line."""
    try:
        tree = ast.parse(source, filename)
    except SyntaxError as exc:
        return [Violation(exc.lineno or 0, "syntax", exc.msg)]
    checker = _Checker()
    checker.visit(tree)
    if not any(isinstance(s, ast.ClassDef) and s.name == "ModelNew" for s in tree.body):
        checker.violations.append(Violation(0, "ModelNew", "the file defines no class ModelNew"))
    return sorted(checker.violations, key=lambda v: v.line)


def check(source: str, filename: str = "<candidate>") -> None:
    """Raise CandidateRejected listing every violation of `source`, or return."""
    found = violations(source, filename)
    if found:
        raise CandidateRejected(
            f"{filename} rejected: "
            + "; ".join(str(v) for v in found[:8])
            + (f"; and {len(found) - 8} more" if len(found) > 8 else "")
        )
