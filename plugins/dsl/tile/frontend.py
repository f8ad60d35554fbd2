"""The `tile` DSL front end: DSL source text -> traced IR. Parse-only: each backend lowers
the IR (`Backend.lower`)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from argus_core.errors import DSLError
from argus_core.ir import KernelIR, Sym, TensorParam
from argus_plugins.dsl.tile import lang, tracer


def load_module(source: str, filename: str) -> dict[str, Any]:
    """Execute a DSL module's source and return its namespace. Errors name the line."""
    try:
        code = compile(source, filename, "exec")
    except SyntaxError as exc:
        raise DSLError(f"syntax error: {exc.msg}", f"{filename}:{exc.lineno}") from exc
    digest = hashlib.sha1(source.encode()).hexdigest()[:12]
    ns: dict[str, Any] = {"__name__": f"argus_dsl_{digest}", "__file__": filename}
    try:
        exec(code, ns)
    except DSLError:
        raise
    except Exception as exc:
        line = 0
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == filename:
                line = tb.tb_lineno
            tb = tb.tb_next
        raise DSLError(
            f"{type(exc).__name__} while loading the module: {exc}", f"{filename}:{line}"
        ) from exc
    return ns


def _annotation(fn: Any, name: str, ns: dict[str, Any]) -> Any:
    ann = fn.__annotations__.get(name)
    if isinstance(ann, str):
        try:
            ann = eval(ann, ns)  # annotations are DSL expressions such as al.Tensor["M", "K"]
        except Exception as exc:
            raise DSLError(
                f"cannot evaluate the annotation of parameter {name!r}: {ann!r} ({exc})",
                f"{fn.__code__.co_filename}:{fn.__code__.co_firstlineno}",
            ) from exc
    return ann


def _def_line(source: str, first: int) -> int:
    """The `def` line of a decorated function (co_firstlineno is the decorator's)."""
    lines = source.splitlines()
    for n in range(first, len(lines) + 1):
        if lines[n - 1].lstrip().startswith(("def ", "async def ")):
            return n
    return first


def trace_kernel(
    kdef: lang.KernelDef, ns: dict[str, Any], filename: str, source: str = ""
) -> KernelIR:
    fn = kdef.fn
    code = fn.__code__
    where = f"{filename}:{_def_line(source, code.co_firstlineno)}"
    argnames = code.co_varnames[: code.co_argcount]
    tensors: list[TensorParam] = []
    shape_syms: dict[str, Sym] = {}
    bindings: dict[str, tuple[str, int]] = {}
    constexprs: list[Sym] = []
    scalars: list[tuple[Sym, str]] = []
    args: list[Any] = []
    for name in argnames:
        ann = _annotation(fn, name, ns)
        if isinstance(ann, lang._TensorAnnotation):
            dims = []
            for d, dim in enumerate(ann.dims):
                if dim not in shape_syms:
                    shape_syms[dim] = Sym(dim, "shape", 1, None)
                    bindings[dim] = (name, d)
                dims.append(shape_syms[dim])
            strides = tuple(
                Sym(f"{name}_stride{d}", "stride", 0, None) for d in range(len(ann.dims))
            )
            param = TensorParam(name, tuple(dims), strides)
            tensors.append(param)
            args.append(lang.TensorArg(param))
        elif isinstance(ann, lang.DType) and ann.name in ("i32", "f32"):
            sym = Sym(name, "scalar", None, None)
            scalars.append((sym, "i32" if ann.name == "i32" else "fp32"))
            args.append(sym)
        elif ann is lang.constexpr:
            sym = Sym(name, "const", 1, None)
            constexprs.append(sym)
            args.append(sym)
        else:
            raise DSLError(
                f"parameter {name!r} of kernel {fn.__name__!r} needs an annotation: "
                f"al.Tensor[...dims], al.constexpr, al.i32 or al.f32, got {ann!r}",
                where,
            )
    clash = set(shape_syms) & {c.name for c in constexprs}
    if clash:
        raise DSLError(f"names used both as tensor dims and constexprs: {sorted(clash)}", where)
    st = tracer.trace(fn, args, filename)
    if st.grid is None:
        raise DSLError(
            f"kernel {fn.__name__!r} never calls al.program_ids(...): no launch grid", where
        )
    if not st.written:
        raise DSLError(f"kernel {fn.__name__!r} stores nothing", where)
    ir = KernelIR(
        name=fn.__name__,
        file=filename,
        tensors=tensors,
        shape_syms=list(shape_syms.values()),
        shape_bindings=bindings,
        constexprs=constexprs,
        ops=st.scopes[0],
        grid=st.grid,
        written=st.written,
        source=source,
        scalars=scalars,
    )
    _check_scoping(ir)
    return ir


def _check_scoping(ir: KernelIR) -> None:
    """Every tile an op reads must be defined before it, in the same or an enclosing scope."""
    from argus_core.ir import Loop

    def go(ops, visible: set[int]) -> None:
        visible = set(visible)
        for op in ops:
            for v in op.operands():
                if v.id not in visible:
                    raise DSLError(
                        f"{op.kind} reads a tile ({v.name or v.id}) made inside a loop body it is "
                        "not in; carry it through the loop by assigning it before the loop",
                        f"{op.point.file}:{op.point.line}",
                    )
            if isinstance(op, Loop):
                go(op.body, visible | {c.arg.id for c in op.carried})
                visible |= {c.result.id for c in op.carried}
            if op.result is not None:
                visible.add(op.result.id)

    go(ir.ops, set())


class TileFrontend:
    """The tile-level DSL (`dsl=tile`)."""

    name = "tile"
    # what tile DSL code may import: the language (as `al`), `math`, and the `annotations`
    # future (argus_core.sandbox enforces it on code nobody reviewed)
    allowed_imports: Mapping[str, frozenset[str] | None] = MappingProxyType(
        {
            "argus_plugins.dsl.tile": frozenset({"lang"}),
            "math": None,
            "__future__": frozenset({"annotations"}),
        }
    )
    allowed_imports_text = "from argus_plugins.dsl.tile import lang as al; import math"
    kernel_decorator = "al.kernel"

    def kernels(self, source: str, filename: str = "<dsl>") -> list[str]:
        ns = load_module(source, str(filename))
        return [k for k, v in ns.items() if isinstance(v, lang.KernelDef)]

    def default_policy(self, source: str, filename: str = "<dsl>") -> dict[str, int] | None:
        """The module's `DEFAULT_POLICY` dict, if it defines one."""
        declared = load_module(source, str(filename)).get("DEFAULT_POLICY")
        if not isinstance(declared, dict):
            return None
        return {str(k): int(v) for k, v in declared.items()}

    def parse(self, source: str, entry: str, filename: str = "<dsl>") -> KernelIR:
        filename = str(filename)
        ns = load_module(source, filename)
        kernels = {k: v for k, v in ns.items() if isinstance(v, lang.KernelDef)}
        if entry not in kernels:
            raise DSLError(
                f"no @al.kernel named {entry!r} in the module; kernels found: "
                f"{', '.join(sorted(kernels)) or '(none)'}",
                filename,
            )
        return trace_kernel(kernels[entry], ns, filename, source)
