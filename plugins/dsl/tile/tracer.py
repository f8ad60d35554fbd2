"""Tracing a DSL kernel into the IR without running it.

The kernel function is called once with symbolic arguments. Each DSL op appends an IR op
to the innermost open scope, stamped with the program point of the kernel statement that
called it. `al.range` yields its symbolic induction variable exactly once; when the body
ends, the loop-carried tiles are found by comparing the kernel frame's locals before and
after the body (a local rebound to a tile made in the body is carried).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from argus_core.errors import DSLError
from argus_core.ir import Expr, Op, ProgramPoint, Sym, Value

_DSL_PACKAGE_DIR = __file__.rsplit("/", 1)[0]


class TileHandle:
    """Base of the DSL objects that stand for an IR tile (`tiles.Tile`): tracing names each
    such tile after the kernel local that holds it."""

    __slots__ = ()
    _value: Value


@dataclass
class TraceState:
    kernel_code: types.CodeType
    file: str
    scopes: list[list[Op]] = field(default_factory=lambda: [[]])
    grid: tuple | None = None
    names: dict[int, str] = field(default_factory=dict)  # Value.id -> chosen name
    used_names: set[str] = field(default_factory=set)
    written: list[str] = field(default_factory=list)
    n_lets: int = 0

    def emit(self, op: Op) -> Op:
        self.scopes[-1].append(op)
        return op


_STATE: TraceState | None = None


def state() -> TraceState:
    if _STATE is None:
        raise DSLError("DSL ops can only be used inside a kernel being traced (call parse/trace)")
    return _STATE


def kernel_frame() -> types.FrameType | None:
    """The innermost frame executing code from the kernel's source file."""
    st = state()
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_filename == st.file and not f.f_code.co_filename.startswith(
            _DSL_PACKAGE_DIR
        ):
            return f
        f = f.f_back
    return None


def point(op: str, ghost: bool = False) -> ProgramPoint:
    """Where `op` is being recorded. Recording a real op first names the tiles the
    kernel's locals hold; a ghost op (a tag, an assertion, a contract: erased by the
    lowering) does not, so ghost code never changes the names in the lowered kernel."""
    f = kernel_frame()
    st = state()
    if f is None:
        return ProgramPoint(st.file, 0, op)
    if not ghost:
        name_locals(f)
    return ProgramPoint(st.file, f.f_lineno, op)


def here() -> str:
    f = kernel_frame()
    return f"{state().file}:{f.f_lineno if f else 0}"


def fail(message: str) -> DSLError:
    return DSLError(message, here())


def fresh_name(base: str) -> str:
    st = state()
    name, n = base, 1
    while name in st.used_names:
        name = f"{base}_{n}"
        n += 1
    st.used_names.add(name)
    return name


def name_locals(frame: types.FrameType) -> None:
    """Give unnamed tiles the name of the kernel local that holds them (readable lowering)."""
    for var, val in frame.f_locals.items():
        if isinstance(val, TileHandle) and not val._value.name:
            val._value.name = fresh_name(var)


def trace(fn: Callable[..., Any], args: list[Any], file: str) -> TraceState:
    """Run `fn(*args)` under a fresh trace state; returns the state with the recorded ops."""
    global _STATE
    if _STATE is not None:
        raise DSLError("nested kernel tracing is not supported")
    st = TraceState(kernel_code=fn.__code__, file=file)
    _STATE = st

    def on_return(frame, event, arg):
        if event == "return" and frame.f_code is fn.__code__:
            name_locals(frame)

    old_profile = sys.getprofile()
    sys.setprofile(on_return)
    try:
        fn(*args)
    except DSLError:
        raise
    except RecursionError as exc:
        raise DSLError(f"recursion while tracing: {exc}") from exc
    except (
        TypeError,
        ValueError,
        AttributeError,
        IndexError,
        KeyError,
        NameError,
        ZeroDivisionError,
    ) as exc:
        tb = exc.__traceback__
        line = 0
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == file:
                line = tb.tb_lineno
            tb = tb.tb_next
        raise DSLError(f"{type(exc).__name__}: {exc}", f"{file}:{line}") from exc
    finally:
        sys.setprofile(old_profile)
        _STATE = None
    if len(st.scopes) != 1:
        raise DSLError("a loop body was left open (was an al.range loop exited with break?)", file)
    return st


def is_symbolic(x: Any) -> bool:
    return isinstance(x, Expr)


def loop_var_name(frame: types.FrameType | None, sym: Sym) -> str | None:
    if frame is None:
        return None
    for var, val in frame.f_locals.items():
        if isinstance(val, Sym) and val == sym:
            return var
    return None
