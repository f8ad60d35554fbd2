"""Child-side pieces of a candidate's run: the runtime compute guard and the two runners.

`ComputeGuard` is a torch function mode active while a ModelNew candidate's `forward` runs:
a torch function outside `GUARD_ALLOWED` (allocation, views, metadata, and what Triton's
launcher itself calls) raises `ComputeInPyTorch`, naming it, so compute that the static
check cannot see (`getattr(torch, "mat" + "mul")`) still fails. The same mode fills every
`empty*` allocation with NaN (INT_MIN for integers): an output the kernel leaves partly
unwritten can never inherit a correct value from a previous trial's memory.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import sys
from collections.abc import Callable
from typing import Any

from argus_core.evaluate.dtypes import torch_dtype
from argus_core.evaluate.launch import default_workdir, launch_args, load_kernel
from argus_core.evaluate.outputs import poison
from argus_core.types import LoweredKernel

GUARD_ALLOWED = frozenset(
    {
        # allocation (the uninitialized ones are poisoned)
        "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided",
        "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "arange",
        "new_zeros", "new_ones", "new_full",
        # views and metadata
        "view", "reshape", "contiguous", "size", "stride", "dim", "numel", "element_size",
        "data_ptr", "is_contiguous", "storage_offset", "untyped_storage", "t", "transpose",
        "permute", "unsqueeze", "squeeze", "expand", "flatten", "unflatten", "__get__",
        "__len__", "__format__", "__repr__", "is_floating_point", "get_device", "dtype",
        "to", "float", "half", "bfloat16", "cuda", "cpu", "detach", "requires_grad_",
    }
)  # fmt: skip
POISONED = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"})


class ComputeInPyTorch(RuntimeError):
    """A candidate's forward called a PyTorch function that computes on data."""


class OutOfBounds(RuntimeError):
    """A kernel wrote into the guard region around its output."""


GUARD_ELEMS = 4096  # poisoned elements before and after a DSL kernel's output buffer


def _func_name(func: Any) -> str:
    return getattr(func, "__name__", None) or str(func)


def compute_guard() -> Any:
    """A fresh ComputeGuard (torch is imported only here, in the child)."""
    import torch
    from torch.overrides import TorchFunctionMode

    class ComputeGuard(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            name = _func_name(func)
            if name == "__getitem__" and not any(isinstance(a, torch.Tensor) for a in args[1:]):
                return func(*args, **(kwargs or {}))  # basic slicing is a view
            if name not in GUARD_ALLOWED:
                raise ComputeInPyTorch(
                    f"forward called torch {name!r}, which computes in PyTorch; only "
                    "allocation, views and Triton launches may run outside the kernels"
                )
            out = func(*args, **(kwargs or {}))
            if name in POISONED and isinstance(out, torch.Tensor):
                poison(out)
            return out

    return ComputeGuard()


VIEWS = ("2d", "1d", "n1s", "w_dw", "ngsc:G", "w_conv:G", "w_convT:G", "go:G", "rows:K", "mid:D",
         "gns:G")  # fmt: skip


def _view(t: Any, how: str | None) -> Any:
    """The tensor as a kernel sees it; every view shares the tensor's storage (no copy):
    "2d" rows [-1, last], "1d" flat, "n1s" [N, 1, -1], "w_dw" a depthwise conv weight
    [C, 1, *k] as [taps, C]; for a convolution of G channel groups, "ngsc:G" the
    channels-last [N, G, S, C/G] of an [N, C, *S] activation (strided), "w_conv:G" a conv
    weight [OC, C/G, *k] as [taps, G, C/G, OC/G], "w_convT:G" a transposed conv's
    [C, OC/G, *k] as [taps, G, C/G, OC/G], "go:G" a per-channel vector as [G, C/G];
    "rows:K" rows of the last K dims [-1, prod(last K)], "gns:G" an [N, C, *S] activation
    as the strided [G, C/G, N, S] (a channel group's samples side by side), "mid:D" a
    tensor as [prod(shape[:D]), shape[D], prod(shape[D + 1:])] (a reduction over its middle
    dim D)."""
    if how == "2d":
        return t.reshape(-1, t.shape[-1]) if t.dim() else t.reshape(1, 1)
    if how == "1d":
        return t.reshape(-1)
    if how == "n1s":
        return t.view(t.shape[0], 1, -1)
    name, _, g = (how or "").partition(":")
    if name == "rows" and g.isdigit() and 0 < int(g) <= t.dim():  # the last K dims as one
        return t.reshape(-1, math.prod(t.shape[t.dim() - int(g) :]))
    if name == "mid" and g.isdigit() and 0 < int(g) < t.dim() - 1:  # [A, shape[D], B]
        return t.reshape(math.prod(t.shape[: int(g)]), t.shape[int(g)], -1)
    if name == "gns" and g.isdigit() and int(g) > 0:  # [N, C, *S] as [G, C / G, N, S]
        return t.reshape(t.shape[0], int(g), t.shape[1] // int(g), -1).permute(1, 2, 0, 3)
    if how == "w_dw":  # a depthwise conv weight [C, 1, *k] as [taps, C]
        return t.reshape(t.shape[0], -1).t()
    if name in ("ngsc", "w_conv", "w_convT", "go") and g.isdigit() and int(g) > 0:
        g_ = int(g)
        if name == "ngsc":
            return t.view(t.shape[0], g_, t.shape[1] // g_, -1).permute(0, 1, 3, 2)
        if name == "w_conv":
            return t.view(g_, t.shape[0] // g_, t.shape[1], -1).permute(3, 0, 2, 1)
        if name == "w_convT":
            return t.view(g_, t.shape[0] // g_, t.shape[1], -1).permute(3, 0, 1, 2)
        return t.reshape(g_, -1)
    if how is not None:
        raise ValueError(f"view {how!r}; valid: {', '.join(VIEWS)}")
    return t


def unit_stride_dim(how: str | None) -> tuple[int | None, int]:
    """(the dim of stride 1, the rank) of a contiguous tensor seen through view `how`
    (`_view`), found by applying it to a 4-D meta tensor whose dims all exceed 1 and whose
    first two the groups divide (channels are dim 1 of an activation, dim 0 of a weight;
    the dim None where none has stride 1)."""
    import torch

    name, _, g = (how or "").partition(":")
    groups = int(g) if g.isdigit() and name in ("ngsc", "w_conv", "w_convT", "go", "gns") else 1
    v = _view(torch.empty(2 * groups, 2 * groups, 3, 5, device="meta"), how)
    return next((d for d in range(v.dim()) if v.stride(d) == 1 and v.shape[d] > 1), None), v.dim()


PROGRAM = "@program"  # a program's launch plan in a binding (`match.PROGRAM`)


def _guarded(n: int, dtype: Any, device: Any) -> tuple[Any, Any]:
    """(buffer, the n elements between its two poisoned guard regions of GUARD_ELEMS)."""
    import torch

    buf = torch.empty(n + 2 * GUARD_ELEMS, dtype=dtype, device=device)
    poison(buf)
    return buf, buf[GUARD_ELEMS : GUARD_ELEMS + n]


def _check_guards(buf: Any, n: int, what: str) -> None:
    """OutOfBounds when a guard region of `buf` (holding n elements) changed."""
    import torch

    guards = torch.cat([buf[:GUARD_ELEMS], buf[GUARD_ELEMS + n :]])
    clean = guards.isnan() if guards.is_floating_point() else guards == guards.min()
    if not bool(clean.all()) or (
        not guards.is_floating_point() and int(guards.min()) != torch.iinfo(guards.dtype).min
    ):
        raise OutOfBounds(f"the kernel wrote outside {what} (a guard region changed)")


def _raw(binding: dict[str, dict[str, Any]], inputs: list[Any], params: dict[str, Any],
         out: Any, buffers: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """Each kernel tensor as its binding names it (reshaped by "shape"), before its view."""
    tensors = {}
    for name, b in binding.items():
        src = b["from"]
        if src == "output":
            t = out
        elif src == "input":
            t = inputs[b["index"]]
            if not hasattr(t, "dim"):  # a number forward argument: one element (lower_more)
                import torch

                t = torch.full((1,), float(t), dtype=out.dtype, device=out.device)
        elif src == "param":
            t = params[b["attr"]]
        elif src == "buffer":
            t = buffers[b["name"]]
        else:
            raise ValueError(
                f"tensor {name!r} binds from {src!r}; valid: input, param, output, buffer"
            )
        if b.get("shape") is not None:  # a program's buffer (or output) seen reshaped
            t = t.view(buffer_shape(b["shape"], inputs))
        tensors[name] = t
    return tensors


def _bound(binding: dict[str, dict[str, Any]], inputs: list[Any], params: dict[str, Any],
           out: Any, buffers: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """Each kernel tensor as its binding says, through its view."""
    raw = _raw(binding, inputs, params, out, buffers)
    return {name: _view(t, binding[name].get("view")) for name, t in raw.items()}


def _extents_as_read(kernel: LoweredKernel, binding: dict[str, dict[str, Any]],
                     raw: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """`raw` with an extents-only `ys` one dim short seen with its channel dim back.

    The per-sample templates (conv, pool, chanprog) read the spatial extents of their result
    from `ys`, declared [N, OC, *S]. A reduction over the channels without keepdim
    (`torch.max(x, dim=1)[0]`, level2/89) makes the bound output [N, *S]: its extents then
    sit one dim early and the launch read past them (IndexError: tuple index out of range).
    Seen as [N, 1, *S] (a view), it is what keepdim=True binds; `ys` is never loaded or
    stored, and its channel extent is read by no offset."""
    t = raw.get("ys")
    if t is None or binding["ys"].get("view") is not None or not hasattr(t, "dim"):
        return raw
    dims = [
        int(p.binding[2])
        for p in kernel.params
        if p.kind == "int" and p.binding[0] in ("shape", "stride") and p.binding[1] == "ys"
    ]
    if dims and t.dim() == max(dims) and t.dim() >= 1:  # one dim short: the channel dim
        return {**raw, "ys": t.unsqueeze(1)}
    return raw


INT32_ELEMS = 2**31  # the lowering's offsets are 32-bit: a tensor must hold fewer elements
BATCH_VIEWS = ("ngsc:", "n1s")  # views that keep an activation's batch dim first


def batch_chunks(binding: dict[str, dict[str, Any]], raw: dict[str, Any]
                 ) -> tuple[list[str], list[slice]] | None:  # fmt: skip
    """(the batch tensors, the batch slices to launch one at a time) when a kernel's tensor
    holds 2^31 elements or more and the kernel is one of the per-sample programs (conv,
    pool, chanprog: bound with `ys`, its grid's first axis walks ys.shape[0], a program
    reads and writes one sample of each activation); else None (one launch).

    The lowering computes offsets in int32, so `pz * x.stride(0)` overflows past 2^31
    (level1/45: a [16, 64, 2048, 2048] input, 2^32 elements, faulted on the H200). Each
    launch then sees the activations sliced to a few samples (a view, no copy), every one
    under 2^31 elements. A kernel that is not per-sample, or whose one sample is already
    2^31 elements, is a ValueError naming the tensor."""
    big = [n for n, t in raw.items() if hasattr(t, "numel") and t.numel() >= INT32_ELEMS]
    if not big:
        return None
    if "ys" not in binding:
        raise ValueError(
            f"tensor {big[0]!r} has {raw[big[0]].numel()} elements; the lowered kernel's "
            "offsets are 32-bit (fewer than 2**31) and it cannot be launched per sample"
        )
    n = raw["ys"].shape[0]
    batch = [
        name for name, b in binding.items()
        if b["from"] != "param" and raw[name].dim() >= 1 and raw[name].shape[0] == n
        and (b.get("view") is None or b["view"].startswith(BATCH_VIEWS))
    ]  # fmt: skip
    outside = [name for name in big if name not in batch]
    per = max(raw[name].numel() // max(n, 1) for name in batch)
    if outside or per >= INT32_ELEMS:
        name = outside[0] if outside else max(batch, key=lambda b: raw[b].numel())
        raise ValueError(
            f"tensor {name!r} has {raw[name].numel()} elements; the lowered kernel's offsets "
            "are 32-bit (fewer than 2**31 per launch) and one sample is already that large"
        )
    step = (INT32_ELEMS - 1) // per
    return batch, [slice(i, min(n, i + step)) for i in range(0, n, step)]


def buffer_shape(shape: list[Any], inputs: list[Any]) -> tuple[int, ...]:
    """A program buffer's extents: ints, or expressions over the inputs' shapes `s[i][d]`
    (match emits them, so a buffer follows the sizes of each call's inputs)."""
    s = [list(x.shape) if hasattr(x, "shape") else [] for x in inputs]
    out = []
    for e in shape:
        v = eval(e, {"__builtins__": {}}, {"s": s}) if isinstance(e, str) else e  # noqa: S307
        if not isinstance(v, int) or v < 0:
            raise ValueError(f"buffer extent {e!r} is {v!r} for inputs of shapes {s}")
        out.append(v)
    return tuple(out)


def dsl_runner(
    lowered: LoweredKernel | list[LoweredKernel],
    binding: dict[str, dict[str, Any]],
    params: dict[str, Any],
    constexprs: dict[str, int],
    compiler: dict[str, Any],
) -> Callable[[list[Any], Any], Any]:
    """`run(inputs, like)`: a NaN-filled output shaped like `like`, written by the lowered
    kernel with its tensors bound as `binding` says ({"from": "input", "index": i} |
    {"from": "param", "attr": "fc.weight"} (from `params`) | {"from": "output"}, plus
    "view": "2d" | "1d" to pass a row-major reshaped view). The output sits between two
    poisoned guard regions of GUARD_ELEMS elements; a kernel that writes into either
    raises OutOfBounds.

    A program of several kernels (`lowered` a list, `binding[PROGRAM]` its plan:
    {"launches": [{"entry", "binding"}], "buffers": {name: extents}}) launches each kernel
    in order; a tensor bound {"from": "buffer", "name": t} is the intermediate `t`,
    allocated per call (the output's dtype, or the plan's "dtypes" {name: "bf16"}), poisoned
    and guarded like the output; "shape"
    (extents, as `buffer_shape` reads them) views a buffer or the output reshaped.

    A per-sample kernel whose tensors reach 2^31 elements is launched once per batch slice
    (`batch_chunks`) where its lowered offsets are 32-bit; one lowered with 64-bit offsets
    (`LoweredKernel.wide_offsets`, the family's `wide_offsets`) is launched whole."""
    import torch

    kernels = list(lowered) if isinstance(lowered, list | tuple) else [lowered]
    plan = binding.get(PROGRAM)
    if plan is None:
        if len(kernels) != 1:
            raise ValueError(f"{len(kernels)} kernels but no launch plan ({PROGRAM!r})")
        launches = [{"entry": kernels[0].name, "binding": binding}]
        buffer_shapes: dict[str, list[Any]] = {}
    else:
        launches, buffer_shapes = list(plan["launches"]), dict(plan["buffers"])
    # a buffer of another dtype than the output's (a weight's bf16 halves): the plan names it
    kinds = dict((plan or {}).get("dtypes") or {})
    buffer_dtypes = {name: torch_dtype(d) for name, d in kinds.items()}
    by_name = {k.name: k for k in kernels}
    missing = [ln["entry"] for ln in launches if ln["entry"] not in by_name]
    if missing:
        raise ValueError(f"the launch plan runs {missing}; kernels given: {sorted(by_name)}")
    fns = {name: load_kernel(k) for name, k in by_name.items()}

    def run(inputs: list[Any], like: Any, guarded: bool = True) -> Any:
        n = like.numel()
        if guarded:
            buf, flat = _guarded(n, like.dtype, like.device)
        else:  # timed: allocated as eager PyTorch allocates its output, nothing checked
            buf, flat = None, torch.empty(n, dtype=like.dtype, device=like.device)
        out = flat.view(like.shape)
        held = {}
        buffers = {}
        for name, shape in buffer_shapes.items():
            ext = buffer_shape(shape, inputs)
            size = 1
            for e in ext:
                size *= e
            dtype = buffer_dtypes.get(name, like.dtype)
            if guarded:
                held[name] = _guarded(size, dtype, like.device)
                buffers[name] = held[name][1].view(ext)
            else:
                buffers[name] = torch.empty(ext, dtype=dtype, device=like.device)
        for ln in launches:
            k = by_name[ln["entry"]]
            raw = _extents_as_read(k, ln["binding"], _raw(ln["binding"], inputs, params, out,
                                                          buffers))  # fmt: skip
            split = None if k.wide_offsets else batch_chunks(ln["binding"], raw)
            for part in split[1] if split else [None]:
                tensors = {
                    name: _view(t[part] if part is not None and name in split[0] else t,
                                ln["binding"][name].get("view"))
                    for name, t in raw.items()
                }  # fmt: skip
                args, grid = launch_args(k, tensors, constexprs)
                fns[ln["entry"]][grid](*args, **compiler)
        if buf is not None:
            _check_guards(buf, n, "its output")
        for name, (b, t) in held.items():
            _check_guards(b, t.numel(), f"buffer {name}")
        return out

    # the timed form (`worker._measure`): poisoning the output (a write of all of it) and
    # reading the guards back (a sync) are the check's costs, not the kernel's; the trials
    # before timing ran guarded at the same shape
    run.timed = lambda inputs, like: run(inputs, like, guarded=False)  # type: ignore[attr-defined]
    return run


def load_modelnew(source: str, filename: str) -> Any:
    """Import a ModelNew candidate from a real file (Triton's @jit reads source through
    inspect), named by the hash of its text; returns the module."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:20]
    folder = default_workdir() / "modelnew" / digest
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "candidate.py"
    path.write_text(source)
    name = f"_argus_modelnew_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    if not hasattr(module, "ModelNew"):
        raise RuntimeError(f"{filename} defines no class ModelNew")
    return module


def modelnew_runner(model_new: Any) -> Callable[[list[Any], Any], Any]:
    """`run(inputs, like)`: the candidate's forward under the compute guard."""
    import torch

    def run(inputs: list[Any], like: Any) -> Any:
        with torch.no_grad(), compute_guard():
            return model_new(*inputs)

    return run
