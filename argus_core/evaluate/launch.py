"""Turn a LoweredKernel into something callable: its JIT function, its arguments, its grid.

Triton's `@jit` reads the kernel's source with `inspect`, so the lowered text is written to
a real file (named by a hash of the text, so identical kernels share one file) and imported
from there. Nothing here compiles or launches; callers do `fn[grid](*args)`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from argus_core.errors import ArgusError
from argus_core.types import LoweredKernel

# what a grid expression may call besides triton.cdiv
_GRID_BUILTINS = {"min": min, "max": max}


class KernelLoadError(ArgusError):
    """The lowered source does not define a usable kernel, or its arguments cannot be bound."""


def ensure_triton_cache_dir() -> str:
    """Point TRITON_CACHE_DIR at a private folder unless the caller already chose one.

    Triton's default (~/.triton) is shared by every process of the user; runs and tests
    keep theirs apart. Call before importing triton.
    """
    if not os.environ.get("TRITON_CACHE_DIR"):
        path = Path(tempfile.gettempdir()) / f"argus-triton-cache-{os.getuid()}"
        path.mkdir(parents=True, exist_ok=True)
        os.environ["TRITON_CACHE_DIR"] = str(path)
    return os.environ["TRITON_CACHE_DIR"]


def default_workdir() -> Path:
    """Where lowered sources are written: $ARGUS_KERNEL_DIR or a per-user temp folder."""
    env = os.environ.get("ARGUS_KERNEL_DIR")
    return Path(env) if env else Path(tempfile.gettempdir()) / f"argus-kernels-{os.getuid()}"


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:20]


def load_module(lowered: LoweredKernel, workdir: str | Path | None = None) -> ModuleType:
    """Import the lowered source as a module from `<workdir>/<hash>/<name>.py`.

    The same text always maps to the same file and module name, so a second load is
    free. Exceptions raised while importing (SyntaxError, NameError, ...) propagate.
    """
    digest = source_hash(lowered.source)
    modname = f"_argus_lowered_{digest}"
    if modname in sys.modules:
        return sys.modules[modname]
    folder = Path(workdir or default_workdir()) / digest
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{lowered.name or 'kernel'}.py"
    if not path.exists() or path.read_text() != lowered.source:
        # write then rename, so a concurrent reader never sees half a file
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(lowered.source)
        tmp.replace(path)
    spec = importlib.util.spec_from_file_location(modname, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[modname]
        raise
    return module


def ensure_allocator() -> None:
    """Give Triton a scratch allocator (once per process): kernels that make TMA
    descriptors on the device (`tl.make_tensor_descriptor`, the `tma` option) need global
    memory for them at launch. On the CPU interpreter the scratch is host memory."""
    import triton

    if getattr(ensure_allocator, "done", False):
        return
    import torch

    on_gpu = torch.cuda.is_available() and not os.environ.get("TRITON_INTERPRET")

    def alloc(size: int, alignment: int, stream: Any) -> Any:
        return torch.empty(size, dtype=torch.int8, device="cuda" if on_gpu else "cpu")

    triton.set_allocator(alloc)
    ensure_allocator.done = True  # type: ignore[attr-defined]


def load_kernel(lowered: LoweredKernel, workdir: str | Path | None = None) -> Any:
    """The `@triton.jit` function `lowered.name` from the lowered source.

    Raises KernelLoadError when the module lacks it, it is not a Triton kernel, or its
    parameters differ from `lowered.params` (so a launcher never binds by the wrong name).
    """
    module = load_module(lowered, workdir)
    if lowered.tma_tensors:
        ensure_allocator()
    fn = getattr(module, lowered.name, None)
    if fn is None:
        defined = sorted(n for n, v in vars(module).items() if hasattr(v, "arg_names"))
        raise KernelLoadError(
            f"lowered source defines no kernel {lowered.name!r}; "
            f"kernels defined: {', '.join(defined) or '(none)'}"
        )
    if not hasattr(fn, "arg_names"):
        raise KernelLoadError(
            f"{lowered.name!r} is not a @triton.jit function: {type(fn).__name__}"
        )
    expected = [p.name for p in lowered.params]
    if list(fn.arg_names) != expected:
        raise KernelLoadError(
            f"kernel {lowered.name!r} takes {list(fn.arg_names)}; the lowering promised {expected}"
        )
    return fn


def constexpr_values(
    lowered: LoweredKernel, constexprs: dict[str, int] | None = None
) -> dict[str, int]:
    """Value of every constexpr parameter, by parameter name, before any launch-time choice.

    A ("const", key) binding is looked up in `constexprs` (the policy's tiles) first, then
    in `lowered.constexprs` (what the lowering baked in), by key and then by param name. A
    ("descriptors", tensor, ...) constexpr has its compile-time value here (the lowering's);
    `launch_args` sets it from the tensors.
    """
    given = {**lowered.constexprs, **(constexprs or {})}
    values: dict[str, int] = {}
    for p in lowered.params:
        if p.kind != "constexpr":
            continue
        key = p.binding[1] if p.binding[0] == "const" and len(p.binding) > 1 else p.name
        for k in (key, p.name):
            if k in given:
                values[p.name] = given[k]
                break
        else:
            raise KernelLoadError(
                f"no value for constexpr {p.name!r} (binding {p.binding}); given: {sorted(given)}"
            )
    return values


def _bound_value(p: Any, tensors: dict[str, Any]) -> Any:
    source, name = p.binding[0], p.binding[1]
    if name not in tensors:
        raise KernelLoadError(
            f"parameter {p.name!r} is bound to tensor {name!r}; tensors given: {sorted(tensors)}"
        )
    t = tensors[name]
    if source == "scalar":
        return t
    if source == "tensor":
        return t
    if source == "shape":
        return int(t.shape[p.binding[2]])
    if source == "stride":
        return int(t.stride(p.binding[2]))
    raise KernelLoadError(
        f"parameter {p.name!r} has binding {p.binding}; valid sources: tensor, shape, stride, scalar, const"
    )


def descriptors_ok(names: Iterable[str], tensors: dict[str, Any]) -> bool:
    """True when every tensor named meets Triton's tensor-descriptor contract
    (`tl.make_tensor_descriptor`): two or more dims, contiguous in the last, 16-byte aligned
    base and outer strides. A kernel that can also run without descriptors (a pointer path)
    takes this as a launch-time constexpr: ragged pitches such as K=83 in bf16 fail it."""
    for name in names:
        t = tensors.get(name)
        if t is None or not hasattr(t, "stride"):
            return False
        size = t.element_size()
        if t.dim() < 2 or t.stride(-1) != 1 or t.data_ptr() % 16:
            return False
        if any((t.stride(d) * size) % 16 for d in range(t.dim() - 1)):
            return False
    return True


def launch_args(
    lowered: LoweredKernel, tensors: dict[str, Any], constexprs: dict[str, int] | None = None
) -> tuple[list[Any], tuple[int, ...]]:
    """Positional arguments for `fn[grid](*args)` and the grid, both from bindings.

    Ints come from tensor sizes and strides; constexprs as in `constexpr_values`, but a
    ("descriptors", tensor, ...) constexpr is 1 exactly when those tensors meet the
    tensor-descriptor contract (`descriptors_ok`: Hopper's USE_TMA picks its TMA or pointer
    path so). The grid
    is `lowered.grid` evaluated with every int and constexpr parameter bound by name and
    `triton` importable; a bare int becomes a 1-tuple.
    """
    consts = constexpr_values(lowered, constexprs)
    for p in lowered.params:  # launch-time choices the lowering declared
        if p.kind == "constexpr" and p.binding[0] == "descriptors":
            consts[p.name] = int(descriptors_ok(p.binding[1:], tensors))
    args: list[Any] = []
    scope: dict[str, Any] = {}
    for p in lowered.params:
        value = consts[p.name] if p.kind == "constexpr" else _bound_value(p, tensors)
        args.append(value)
        if p.kind != "ptr":
            scope[p.name] = value
    import triton  # only here: the caller decides TRITON_INTERPRET before triton loads

    try:
        grid = eval(lowered.grid, {"__builtins__": _GRID_BUILTINS, "triton": triton}, scope)  # noqa: S307
    except Exception as exc:
        raise KernelLoadError(
            f"grid {lowered.grid!r} does not evaluate with {sorted(scope)}: {exc}"
        ) from exc
    grid = (grid,) if isinstance(grid, int) else tuple(int(g) for g in grid)
    return args, grid
