"""The runtime of a package `argus export` writes, copied into it as `_runtime.py`.

It needs only torch and triton (never argus): it checks a call's arguments against the
shape domain the kernel was proved for, picks the policy of the nearest tuned shape, and
launches the lowered Triton kernel with arguments bound as Argus bound them when it
measured the kernel. Everything it reads comes from the package's `manifest.json`.

Kept free of argus imports on purpose: it is package data, tested through the packages
the tests export (tests/core/test_export.py).
"""

from __future__ import annotations

import importlib
import math
import os
from typing import Any

import torch

DTYPES = {
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
    "fp32": torch.float32,
    "fp8e4": getattr(torch, "float8_e4m3fn", None),
    "i32": torch.int32,
    "int32": torch.int32,
    "i64": torch.int64,
}
_CALLS = {"min": min, "max": max, "cdiv": lambda a, b: -(-a // b)}


class DomainError(ValueError):
    """A call outside the shape domain the kernel was proved for; names the condition."""


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "") not in ("", "0")


def _dims(op: dict[str, Any], tensors: dict[str, torch.Tensor]) -> dict[str, int]:
    """Each shape symbol's value, read from the inputs; a symbol two inputs give different
    values is an error naming both."""
    env: dict[str, int] = {}
    seen: dict[str, str] = {}
    for spec in op["inputs"]:
        t = tensors[spec["name"]]
        for axis, sym in enumerate(spec["dims"]):
            size = int(t.shape[axis])
            where = f"{spec['name']}.shape[{axis}]"
            if sym in env and env[sym] != size:
                raise DomainError(
                    f"{op['qualname']}: {where} = {size} but {seen[sym]} = {env[sym]}; "
                    f"both are {sym}, they must agree"
                )
            env.setdefault(sym, size)
            seen.setdefault(sym, where)
    return env


def check(op: dict[str, Any], tensors: dict[str, Any], scalars: dict[str, Any]) -> dict[str, int]:
    """The shape symbols' values when the call lies in the op's proved domain, else a
    DomainError naming the violated condition and the domain."""
    name = op["qualname"]
    device = None
    for spec in op["inputs"]:
        t = tensors[spec["name"]]
        if not isinstance(t, torch.Tensor):
            raise DomainError(f"{name}: {spec['name']} must be a tensor, got {type(t).__name__}")
        if t.dim() != len(spec["dims"]):
            raise DomainError(
                f"{name}: {spec['name']} has {t.dim()} dims {list(t.shape)}; the kernel takes "
                f"{len(spec['dims'])}: [{', '.join(spec['dims'])}]"
            )
        want = DTYPES[spec["dtype"]]
        if t.dtype != want:
            raise DomainError(
                f"{name}: {spec['name']} has dtype {t.dtype}; the kernel was proved and tuned "
                f"for {want}"
            )
        if device is None:
            device = t.device
        elif t.device != device:
            raise DomainError(f"{name}: {spec['name']} is on {t.device}, the others on {device}")
    env = _dims(op, tensors)
    for sym, (lo, hi) in op["domain"]["ranges"].items():
        if sym in env and not lo <= env[sym] <= hi:
            raise DomainError(
                f"{name}: {sym} = {env[sym]} is outside the proved range {lo} <= {sym} <= {hi}"
            )
    for spec in op["inputs"] + op["outputs"]:
        n = math.prod(_shape(spec, env))
        if n >= 2**31:
            raise DomainError(
                f"{name}: {spec['name']} would have {n} elements; the kernel indexes with "
                "32-bit offsets, so every tensor must have fewer than 2**31"
            )
    scope = {**env, **scalars}
    for req in op["domain"]["requires"]:
        try:
            ok = bool(eval(req["python"], {"__builtins__": _CALLS}, scope))  # noqa: S307
        except Exception as exc:  # a symbol the call did not give: name it
            raise DomainError(f"{name}: cannot evaluate {req['text']}: {exc}") from exc
        if not ok:
            given = ", ".join(f"{k}={scope[k]}" for k in req["symbols"] if k in scope)
            raise DomainError(
                f"{name}: the call violates {req['text']} ({given}); the kernel is proved only "
                f"where it holds"
            )
    return env


def _shape(spec: dict[str, Any], env: dict[str, Any]) -> list[Any]:
    return [env[d] if isinstance(d, str) else int(d) for d in spec["dims"]]


def bucket(op: dict[str, Any], env: dict[str, int], scalars: dict[str, Any]) -> dict[str, Any]:
    """The policy tuned at the shape nearest to this call (log-distance over the dims the
    tuned shapes name), among the buckets whose own preconditions (those over the tile
    constants, such as D <= HEAD_D) hold here."""
    best, best_d = None, math.inf
    scope = {**env, **scalars}
    for b in op["buckets"]:
        if not all(
            bool(eval(r["python"], {"__builtins__": _CALLS}, scope))  # noqa: S307
            for r in b["requires"]
        ):
            continue
        d = sum(
            abs(math.log(max(env[k], 1) / max(v, 1))) for k, v in b["shape"].items() if k in env
        )
        if d < best_d:
            best, best_d = b, d
    if best is None:
        raise DomainError(
            f"{op['qualname']}: no tuned policy's constants admit this call ({env}); "
            + "; ".join(
                f"tuned at {b['shape']} needs {' and '.join(r['text'] for r in b['requires'])}"
                for b in op["buckets"]
            )
        )
    return best


_KERNELS: dict[str, Any] = {}


def kernel(package: str, b: dict[str, Any]) -> Any:
    key = f"{package}.kernels.{b['module']}"
    fn = _KERNELS.get(key)
    if fn is None:
        fn = getattr(importlib.import_module(key), b["kernel"])
        _KERNELS[key] = fn
    return fn


def _descriptors_ok(names: list[str], tensors: dict[str, torch.Tensor]) -> bool:
    for n in names:
        t = tensors[n]
        size = t.element_size()
        if t.dim() < 2 or t.stride(-1) != 1 or t.data_ptr() % 16:
            return False
        if any((t.stride(d) * size) % 16 for d in range(t.dim() - 1)):
            return False
    return True


_ALLOCATOR = False


def _allocator() -> None:
    global _ALLOCATOR
    if _ALLOCATOR:
        return
    import triton

    on_gpu = torch.cuda.is_available() and not _interpreting()
    triton.set_allocator(
        lambda size, align, stream: torch.empty(
            size, dtype=torch.int8, device="cuda" if on_gpu else "cpu"
        )
    )
    _ALLOCATOR = True


def fake(op: dict[str, Any], tensors: dict[str, Any]) -> tuple[torch.Tensor, ...]:
    """Empty outputs of the right shapes and dtypes (the op's fake/meta implementation)."""
    env: dict[str, Any] = {}
    for spec in op["inputs"]:
        for axis, sym in enumerate(spec["dims"]):
            env.setdefault(sym, tensors[spec["name"]].shape[axis])
    device = tensors[op["inputs"][0]["name"]].device
    return tuple(
        torch.empty(_shape(s, env), dtype=DTYPES[s["dtype"]], device=device) for s in op["outputs"]
    )


def call(package: str, op: dict[str, Any], tensors: dict[str, Any], scalars: dict[str, Any]):
    """Check the call against the proved domain, allocate the outputs, launch the kernel of
    the nearest tuned shape, return the outputs (one tensor, or a tuple of them)."""
    env = check(op, tensors, scalars)
    b = bucket(op, env, scalars)
    import triton  # after the caller chose TRITON_INTERPRET

    tensors = {k: v.contiguous() for k, v in tensors.items()}  # the proof assumes row-major
    device = tensors[op["inputs"][0]["name"]].device
    for s in op["outputs"]:
        tensors[s["name"]] = torch.empty(_shape(s, env), dtype=DTYPES[s["dtype"]], device=device)
    if b.get("tma_tensors"):
        _allocator()
    args: list[Any] = []
    scope: dict[str, Any] = {}
    for p in b["params"]:
        kind, binding = p["kind"], p["binding"]
        if kind == "constexpr":
            if binding[0] == "descriptors":
                value: Any = int(_descriptors_ok(binding[1:], tensors))
            else:
                value = b["constexprs"][p["name"]]
        elif binding[0] == "tensor":
            value = tensors[binding[1]]
        elif binding[0] == "scalar":
            value = scalars[binding[1]]
        elif binding[0] == "shape":
            value = int(tensors[binding[1]].shape[binding[2]])
        else:  # stride
            value = int(tensors[binding[1]].stride(binding[2]))
        args.append(value)
        if kind != "ptr":
            scope[p["name"]] = value
    grid = eval(b["grid"], {"__builtins__": {"min": min, "max": max}, "triton": triton}, scope)  # noqa: S307
    grid = (grid,) if isinstance(grid, int) else tuple(grid)
    options = {} if device.type == "cpu" else dict(b["compiler"])
    kernel(package, b)[grid](*args, **options)
    outs = tuple(tensors[s["name"]] for s in op["outputs"])
    return outs[0] if len(outs) == 1 else outs
