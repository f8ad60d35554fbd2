"""Compiling lowered Triton for a target without a launch, shared by the Triton backends:
policy checks, the compile-time signature, and the compile report.

Triton's runtime JIT specializes arguments before compiling (an int equal to 1 becomes a
constant, ints and pointers divisible by 16 get alignment hints, AMD buffers under 2 GiB
get a pointer-range hint). Cross-compiling without a launch has no arguments to look at,
so `specialized_signature` assumes the common case the runtime would see: contiguous
tensors (innermost stride 1), 16-aligned pointers, sizes and outer strides divisible by 16.
The static report then describes the code the GPU would actually run for aligned shapes.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from argus_core.errors import PolicyError, choices_error
from argus_core.evaluate.launch import constexpr_values, ensure_triton_cache_dir, load_kernel
from argus_core.types import CompileReport, LoweredKernel, Policy

# tiles named like this are tile extents (BM, BN, BK, BLOCK_M, ...); others (GROUP) are not
TILE_DIM = re.compile(r"^B(LOCK)?_?[A-Z0-9]{1,3}$")


def is_power_of_two(v: int) -> bool:
    return v > 0 and v & (v - 1) == 0


def check_compiler_options(target: str, space: Mapping[str, list[Any]], policy: Policy) -> None:
    """PolicyError for an option the target lacks or a value outside its allowed list."""
    for key, value in policy.compiler.items():
        if key not in space:
            raise PolicyError(f"{target}: " + choices_error("compiler option", key, space))
        if isinstance(value, bool) or value not in space[key]:
            raise PolicyError(f"{target}: " + choices_error(f"value of {key}", value, space[key]))


def check_tiles(target: str, policy: Policy, minimum: int) -> None:
    """PolicyError unless every tile extent is a power of two >= `minimum` and every
    other tile constant a positive int."""
    for key, value in policy.tiles.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise PolicyError(f"{target}: tile {key}={value!r} must be a positive int")
        if TILE_DIM.match(key) and (not is_power_of_two(value) or value < minimum):
            raise PolicyError(
                f"{target}: tile {key}={value} must be a power of two >= {minimum} "
                f"(valid: {', '.join(str(minimum << i) for i in range(5))}, ...)"
            )


def constexpr_args(lowered: LoweredKernel, policy: Policy) -> dict[str, int]:
    """Constexpr values by parameter name: the policy's tiles over the lowering's defaults."""
    return constexpr_values(lowered, policy.tiles)


def specialized_signature(
    lowered: LoweredKernel, dtypes: dict[str, str], policy: Policy, buffer_ops: bool
) -> tuple[dict[str, str], dict[str, int], dict[tuple[int, ...], list[list[Any]]]]:
    """(signature, constexprs, attrs) for `triton.compiler.ASTSource`, specialized as the
    runtime JIT would for contiguous, 16-aligned tensors (see the module docstring)."""
    signature = lowered.signature(dtypes)
    untyped = [n for n, t in signature.items() if t == "*"]
    if untyped:
        raise PolicyError(
            f"pointer parameters {untyped} have no element dtype; pass dtypes such as "
            f"{ {n: 'bf16' for n in untyped} }"
        )
    constexprs = constexpr_args(lowered, policy)
    attrs: dict[tuple[int, ...], list[list[Any]]] = {}
    innermost = _innermost_dims(lowered)
    for i, p in enumerate(lowered.params):
        if p.kind == "ptr":
            attrs[(i,)] = [["tt.divisibility", 16]] + (
                [["tt.pointer_range", 32]] if buffer_ops else []
            )
        elif p.kind == "int":
            if p.binding[0] == "stride" and innermost.get(p.binding[1]) == p.binding[2]:
                signature[p.name] = "constexpr"
                constexprs[p.name] = 1
            elif p.binding[0] in ("shape", "stride"):  # never scalar arguments (flags, counts)
                attrs[(i,)] = [["tt.divisibility", 16]]
    return signature, constexprs, attrs


def _innermost_dims(lowered: LoweredKernel) -> dict[str, int]:
    """Per tensor, its dim of stride 1: the highest dim any parameter binds (contiguous
    tensors have stride 1 there), or the one `lowered.unit_stride` names (a permuted view;
    absent where it has none)."""
    dims: dict[str, int] = {}
    for p in lowered.params:
        if p.kind == "int" and p.binding[0] in ("shape", "stride"):
            dims[p.binding[1]] = max(dims.get(p.binding[1], -1), int(p.binding[2]))
    for tensor, dim in lowered.unit_stride.items():
        if dim is None:
            dims.pop(tensor, None)
        else:
            dims[tensor] = int(dim)
    return dims


def error_text(exc: BaseException, limit: int = 4000) -> str:
    """'Type: message', trimmed to its last `limit` characters (Triton errors can be long)."""
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= limit else "..." + text[-limit:]


def compile_report(
    lowered: LoweredKernel,
    dtypes: dict[str, str],
    policy: Policy,
    *,
    target: tuple[str, Any, int],
    options: Mapping[str, Any],
    buffer_ops: bool,
    asm_kind: str,
    fields: Callable[[Any], dict[str, Any]],
    workdir: Any = None,
) -> CompileReport:
    """Compile `lowered` for `target` = (backend, arch, warp size) with Triton compile
    `options` (the backend's defaults and the policy's compiler options, never the ones
    its lowering read; None values are left to Triton), specialized as the runtime JIT
    would, and build the CompileReport from `fields(compiled) -> dict` (the target's static
    report). Never raises for the kernel: a compiler failure, or a process where
    TRITON_INTERPRET is set, gives ok=False."""
    name = f"{target[0]}:{target[1]}"
    start = time.perf_counter()
    if os.environ.get("TRITON_INTERPRET") not in (None, "", "0"):
        return CompileReport(
            target=name,
            ok=False,
            asm_kind=asm_kind,
            error="TRITON_INTERPRET is set in this process; triton.compile cannot run here",
        )
    try:
        ensure_triton_cache_dir()
        import triton  # here: importing triton costs seconds, and reads TRITON_CACHE_DIR
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource

        fn = load_kernel(lowered, workdir)
        signature, constexprs, attrs = specialized_signature(lowered, dtypes, policy, buffer_ops)
        src = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
        given = {k: v for k, v in options.items() if v is not None}
        compiled = triton.compile(src, target=GPUTarget(*target), options=given)
        report = fields(compiled)
    except Exception as exc:  # any compiler failure is the candidate's, not ours
        return CompileReport(
            target=name,
            ok=False,
            asm_kind=asm_kind,
            error=error_text(exc),
            seconds=time.perf_counter() - start,
        )
    return CompileReport(
        target=name, ok=True, asm_kind=asm_kind, seconds=time.perf_counter() - start, **report
    )
