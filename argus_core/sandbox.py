"""Tracing DSL source that nobody reviewed (an LLM's) without running it in this process.

Two layers. `check_source` reads the module's syntax tree and rejects, naming the line,
anything a DSL module has no use for: imports other than the DSL front end allows
(`DSLFrontend.allowed_imports`), builtins outside an allowlist, dunder and private
attributes, classes, `try`/`with`, and modules that are not DSL at all (no function marked
with the front end's `kernel_decorator`, `@al.kernel` in the tile DSL). Only then does
`trace_in_child` execute it, in a child Python process under a wall-clock limit (an
infinite loop at trace time is killed) with CPU, memory and file-size limits and with
`__import__`/`open`/`exec`/`eval` refused to the DSL module's own code. The IR comes back
pickled and is unpickled with an allowlist of classes, so even a child that escaped could
not run code in this process.

The sandbox knows no DSL by name: every function takes the front end (`dsl`) whose code it
checks and traces.
"""

from __future__ import annotations

import ast
import builtins
import copyreg
import importlib
import io
import math
import os
import pickle
import subprocess
import sys
import types
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from argus_core.errors import DSLError

if TYPE_CHECKING:
    from argus_core.protocols import DSLFrontend

# builtins a DSL module may name; every other builtin is refused
SAFE_BUILTINS: frozenset[str] = frozenset(
    {
        "True", "False", "None", "abs", "all", "any", "bool", "divmod", "enumerate",
        "float", "int", "len", "list", "dict", "tuple", "max", "min", "pow", "range",
        "reversed", "round", "sorted", "sum", "zip", "isinstance", "ValueError",
        "NotImplementedError", "AssertionError",
    }
)  # fmt: skip
# refused even when the module binds them itself: they are how sandboxes are escaped
FORBIDDEN_NAMES: frozenset[str] = frozenset(
    {
        "__import__", "open", "exec", "eval", "compile", "getattr", "setattr", "delattr",
        "hasattr", "globals", "locals", "vars", "dir", "type", "object", "super",
        "breakpoint", "input", "help", "memoryview", "os", "sys", "subprocess", "builtins",
        "importlib", "ctypes", "socket", "shutil", "pathlib", "pickle", "marshal",
    }
)  # fmt: skip
# attributes that reach frames, code or globals without a dunder
FORBIDDEN_ATTRS: frozenset[str] = frozenset(
    {
        "mro", "format", "format_map", "gi_frame", "gi_code", "cr_frame", "cr_code",
        "ag_frame", "f_globals", "f_locals", "f_builtins", "f_back", "f_code", "tb_frame",
        "tb_next", "co_code", "func_globals", "func_code",
    }
)  # fmt: skip
# statements a DSL module never needs, and what to say about them
FORBIDDEN_NODES: dict[type, str] = {
    ast.ClassDef: "class definitions",
    ast.AsyncFunctionDef: "async functions",
    ast.AsyncFor: "async for",
    ast.AsyncWith: "async with",
    ast.Await: "await",
    ast.With: "with statements",
    ast.Try: "try statements",
    ast.Yield: "yield",
    ast.YieldFrom: "yield from",
}
if hasattr(ast, "TryStar"):  # Python 3.11+
    FORBIDDEN_NODES[ast.TryStar] = "try statements"

TRACE_TIMEOUT_S = 20.0  # default wall-clock limit of one trace; ARGUS_TRACE_TIMEOUT_S overrides
CHILD_MEMORY_BYTES = 4 << 30  # address space of the tracing child


def trace_timeout_s() -> float:
    """The trace time limit: `ARGUS_TRACE_TIMEOUT_S` if set (a positive number), else
    TRACE_TIMEOUT_S."""
    raw = os.environ.get("ARGUS_TRACE_TIMEOUT_S")
    if not raw:
        return TRACE_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise DSLError(f"ARGUS_TRACE_TIMEOUT_S={raw!r}: must be a positive number of seconds")
    return value


# --------------------------------------------------------------------------- static check


def _public(module: types.ModuleType) -> frozenset[str]:
    """Attributes of a DSL/stdlib module that DSL code may read: public, not a module (an
    `al.sys` would reach everything), and defined by Argus or plain data for the DSL."""
    names = set()
    for name in dir(module):
        if name.startswith("_"):
            continue
        value = getattr(module, name)
        if isinstance(value, types.ModuleType):
            continue
        owner = getattr(value, "__module__", None) or ""
        if module.__name__ == "math" or owner.startswith(("argus_core", "argus_plugins")):
            names.add(name)
    return frozenset(names)


def _import_bindings(tree: ast.Module) -> dict[str, str]:
    """Import alias -> the dotted name it binds, for every absolute import in `tree`
    (`from a.b import c as d` binds d to "a.b.c"; `import a.b` binds a to "a")."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                out[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                out[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return out


def kernel_marker(dsl: DSLFrontend) -> tuple[str, str]:
    """(module, attribute) of the front end's kernel decorator: `dsl.kernel_decorator`
    ("al.kernel") read through the imports of `dsl.allowed_imports_text`, so DSL code
    may bind the module under any alias. DSLError if the two declarations disagree."""
    alias, _, attr = dsl.kernel_decorator.rpartition(".")
    try:
        bindings = _import_bindings(ast.parse(dsl.allowed_imports_text))
    except SyntaxError:
        bindings = {}
    if not attr or alias not in bindings:
        raise DSLError(
            f"dsl={dsl.name}: kernel_decorator {dsl.kernel_decorator!r} must be "
            f"`<alias>.<name>` with an alias that allowed_imports_text "
            f"({dsl.allowed_imports_text!r}) imports"
        )
    return bindings[alias], attr


def _bound_names(tree: ast.Module) -> set[str]:
    """Every name the module binds: defs, parameters, assignment and loop targets,
    comprehension and lambda variables, import aliases."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.Lambda):
            if isinstance(node, ast.FunctionDef):
                bound.add(node.name)
            a = node.args
            for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg):
                if arg is not None:
                    bound.add(arg.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            bound.add(node.id)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
    return bound


class _Checker(ast.NodeVisitor):
    def __init__(self, filename: str, dsl: DSLFrontend):
        self.filename = filename
        self.allowed: Mapping[str, frozenset[str] | None] = dsl.allowed_imports
        self.allowed_text = dsl.allowed_imports_text
        self.modules: dict[str, frozenset[str]] = {}  # import alias -> readable attributes
        self.bindings: dict[str, str] = {}  # import alias -> the module it names
        self.bound: set[str] = set()

    def fail(self, node: ast.AST, message: str) -> DSLError:
        return DSLError(message, f"{self.filename}:{getattr(node, 'lineno', 1)}")

    def generic_visit(self, node: ast.AST) -> None:
        what = FORBIDDEN_NODES.get(type(node))
        if what is not None:
            raise self.fail(node, f"not allowed in DSL code: {what}")
        super().generic_visit(node)

    # imports ------------------------------------------------------------------
    def _import_error(self, node: ast.AST, text: str) -> DSLError:
        return self.fail(
            node, f"import not allowed: {text!r}; DSL code may import only: {self.allowed_text}"
        )

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name not in self.allowed or self.allowed[alias.name] is not None:
                raise self._import_error(node, f"import {alias.name}")
            self._bind_module(alias.asname or alias.name, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        names = self.allowed.get(module, frozenset()) if node.level == 0 else frozenset()
        for alias in node.names:
            if module not in self.allowed or (names is not None and alias.name not in names):
                raise self._import_error(
                    node, f"from {'.' * node.level}{module} import {alias.name}"
                )
            if module != "__future__":
                self._bind_module(alias.asname or alias.name, f"{module}.{alias.name}")

    def _bind_module(self, alias: str, dotted: str) -> None:
        try:
            value = importlib.import_module(dotted)
        except ImportError:
            return  # `from math import sqrt`: a function, read like any other name
        self.modules[alias] = _public(value)
        self.bindings[alias] = dotted

    # names and attributes -----------------------------------------------------
    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        if name in FORBIDDEN_NAMES or (name.startswith("__") and name.endswith("__")):
            raise self.fail(node, f"name not allowed in DSL code: {name!r}")
        if isinstance(node.ctx, ast.Load) and name not in self.bound and name not in SAFE_BUILTINS:
            raise self.fail(
                node,
                f"name not allowed in DSL code: {name!r} (neither defined in the module nor an "
                f"allowed builtin: {', '.join(sorted(SAFE_BUILTINS))})",
            )

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        if attr.startswith("_") or attr in FORBIDDEN_ATTRS:
            raise self.fail(node, f"attribute not allowed in DSL code: {attr!r}")
        base = node.value
        if isinstance(base, ast.Name) and base.id in self.modules:
            if attr not in self.modules[base.id]:
                raise self.fail(
                    node, f"{base.id}.{attr} is not part of the DSL (no such public name)"
                )
        self.generic_visit(node)


def _is_kernel(node: ast.FunctionDef, aliases: set[str], attr: str) -> bool:
    """True when `node` is decorated with `<alias>.<attr>` (or a call of it) for one of
    `aliases`, the names the module binds to the DSL's kernel-decorator module."""
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if (
            isinstance(target, ast.Attribute)
            and target.attr == attr
            and isinstance(target.value, ast.Name)
            and target.value.id in aliases
        ):
            return True
    return False


def check_source(dsl: DSLFrontend, source: str, filename: str = "<llm>") -> None:
    """Return only if `source` is a module of `dsl` fit to trace; else raise DSLError
    naming `filename:line` and the kind: "no code", "syntax error", "import not allowed"
    (outside `dsl.allowed_imports`), "name not allowed", "attribute not allowed", "not
    allowed in DSL code" (a class, try, with, ...) or "not DSL" (no function marked with
    `dsl.kernel_decorator`). Nothing is executed."""
    if not source or not source.strip():
        raise DSLError("no code: the source is empty", f"{filename}:1")
    try:
        tree = ast.parse(source, filename)
    except SyntaxError as exc:
        raise DSLError(f"syntax error: {exc.msg}", f"{filename}:{exc.lineno or 1}") from None
    module, attr = kernel_marker(dsl)
    checker = _Checker(filename, dsl)
    checker.bound = _bound_names(tree)
    # imports first, so attribute checks know every module alias wherever it is used
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            checker.visit(node)
    checker.visit(tree)
    funcs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    aliases = {a for a, dotted in checker.bindings.items() if dotted == module}
    if not any(_is_kernel(f, aliases, attr) for f in funcs):
        line = funcs[0].lineno if funcs else 1
        marker = dsl.kernel_decorator
        raise DSLError(
            f"not DSL: the module defines no @{marker} function (a {dsl.name} DSL module "
            f"imports `{dsl.allowed_imports_text}` and decorates its kernels with @{marker})",
            f"{filename}:{line}",
        )


# --------------------------------------------------------------------------- child trace


def trace_in_child(
    dsl: DSLFrontend,
    source: str,
    entry: str,
    filename: str = "<llm>",
    timeout_s: float | None = None,
) -> Any:
    """The KernelIR of `entry`, traced by `dsl.parse` in a child process killed after
    `timeout_s` seconds (default `trace_timeout_s()`). `dsl` is pickled to the child, so
    it must pickle (a plain front-end object does). Raises DSLError: "trace timed out
    after Ns", or the child's own DSLError (with its line), or the child's crash. Call
    `check_source` first: this executes the module."""
    return trace_all_in_child(dsl, source, [entry], filename, timeout_s)[0]


def trace_all_in_child(
    dsl: DSLFrontend,
    source: str,
    entries: Sequence[str],
    filename: str = "<llm>",
    timeout_s: float | None = None,
) -> list[Any]:
    """`trace_in_child` for several kernels of one module, in one child (MoE has five)."""
    limit = float(timeout_s) if timeout_s is not None else trace_timeout_s()
    payload = pickle.dumps(
        {
            "dsl": dsl,
            "source": source,
            "entries": list(entries),
            "filename": filename,
            "cpu_s": math.ceil(limit) + 1,
        }
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "argus_core.sandbox"],
            input=payload,
            capture_output=True,
            timeout=limit,
            env=env,
        )
    except subprocess.TimeoutExpired:  # subprocess.run has killed the child
        raise DSLError(f"trace timed out after {limit:g}s", filename) from None
    if proc.returncode != 0 or not proc.stdout:
        lines = proc.stderr.decode(errors="replace").strip().splitlines()
        raise DSLError(
            f"trace crashed (exit {proc.returncode}): {lines[-1] if lines else 'no output'}",
            filename,
        )
    reply = _SafeUnpickler(io.BytesIO(proc.stdout)).load()
    if "error" in reply:
        raise DSLError(reply["error"], reply.get("where"))
    return reply["irs"]


def parse_candidate(
    dsl: DSLFrontend, cand: Any, entries: Sequence[str], timeout_s: float | None = None
) -> list[Any]:
    """The IR of each of `entries` in an LLM candidate's source: `check_source`, then one
    child trace (`trace_all_in_child`, killed after `timeout_s`; None: the default limit).
    A candidate without source fails with its `note` (the planner's reason: no code in the
    reply, a failed request)."""
    filename = f"<{cand.id}>"
    if not cand.source.strip():
        raise DSLError(cand.note or "no code: the candidate's source is empty", f"{filename}:1")
    check_source(dsl, cand.source, filename)
    return trace_all_in_child(dsl, cand.source, entries, filename, timeout_s)


# classes the IR is made of; anything else in a child's reply is refused
_SAFE_BUILTIN_CLASSES = frozenset(
    {"list", "dict", "tuple", "set", "frozenset", "int", "float", "str", "bool", "bytes",
     "complex", "slice", "range", "NoneType", "object"}
)  # fmt: skip


class _SafeUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name in _SAFE_BUILTIN_CLASSES:
            return getattr(builtins, name)
        if module == "copyreg" and name == "_reconstructor":
            return copyreg._reconstructor
        if module.startswith(("argus_core.", "argus_plugins.")) and module != __name__:
            value = getattr(importlib.import_module(module), name, None)
            if isinstance(value, type):
                return value
        raise pickle.UnpicklingError(f"the tracing child sent {module}.{name}, not IR data")


def _guard_dsl_code(allowed: Mapping[str, frozenset[str] | None]) -> None:
    """In the child: refuse `__import__` beyond `allowed` (the front end's allowlist) and
    the dangerous builtins to code of the DSL module being traced (its namespace is named
    `argus_dsl_*`); the front end itself keeps them."""
    real_import = builtins.__import__

    def from_dsl(depth: int) -> bool:
        return str(sys._getframe(depth).f_globals.get("__name__", "")).startswith("argus_dsl_")

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002
        if (globals or {}).get("__name__", "").startswith("argus_dsl_") and (
            level or name not in allowed
        ):
            raise ImportError(f"import not allowed in DSL code: {name!r}")
        return real_import(name, globals, locals, fromlist, level)

    builtins.__import__ = guarded_import
    for name in ("open", "exec", "eval", "compile", "getattr", "setattr", "globals", "vars"):
        real = getattr(builtins, name)

        def guarded(*args, _real=real, _name=name, **kwargs):
            if from_dsl(2):
                raise PermissionError(f"{_name}() is not allowed in DSL code")
            return _real(*args, **kwargs)

        setattr(builtins, name, guarded)


def _limit_child(cpu_s: int) -> None:
    try:
        import resource
    except ImportError:  # not POSIX: the wall-clock limit still holds
        return
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY_BYTES, CHILD_MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))


def _child_main() -> None:
    """`python -m argus_core.sandbox`: read a pickled request on stdin, write the pickled
    {"irs": [...]} or {"error", "where"} on stdout (the module's prints go to stderr)."""
    request = pickle.loads(sys.stdin.buffer.read())  # from the parent, trusted
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.dont_write_bytecode = True
    _limit_child(int(request["cpu_s"]))
    dsl = request["dsl"]
    _guard_dsl_code(dsl.allowed_imports)
    try:
        irs = [dsl.parse(request["source"], e, request["filename"]) for e in request["entries"]]
        reply: dict[str, Any] = {"irs": irs}
    except DSLError as exc:
        text = str(exc)
        if exc.where and text.startswith(f"{exc.where}: "):
            text = text[len(exc.where) + 2 :]  # the parent's DSLError adds `where` again
        reply = {"error": text, "where": exc.where}
    except BaseException as exc:  # the module's own error: report it, the parent decides
        reply = {"error": f"{type(exc).__name__} while tracing: {exc}", "where": None}
    out.write(pickle.dumps(reply))
    out.flush()


if __name__ == "__main__":
    _child_main()
