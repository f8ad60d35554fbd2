"""A kernel's outputs against the reference: poisoned before a run, compared after it.

The layer below both the correctness worker (`worker.py`) and timing (`timing.py`): both
compare, neither imports the other for it. torch is imported when called, so importing
this module never loads it.
"""

from __future__ import annotations

import math
from typing import Any


def poison(t: Any) -> None:
    """Fill an output with a value no correct kernel leaves behind: NaN, or INT_MIN."""
    import torch

    if t.dtype.is_floating_point:
        t.fill_(float("nan"))
    else:
        t.fill_(torch.iinfo(t.dtype).min)


def compare(out: Any, ref: Any, atol: float, rtol: float) -> tuple[bool, float, float, str]:
    """(ok, max abs err, max rel err, why) of `out` against `ref`.

    An element passes when |out - ref| <= atol + rtol * |ref|; NaN never passes (an
    element the kernel did not write stays NaN). The relative error counts only elements
    whose reference exceeds atol in magnitude, so near-zeros do not dominate it.
    """
    import torch

    if tuple(out.shape) != tuple(ref.shape):
        return (
            False,
            math.inf,
            math.inf,
            f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}",
        )
    o, r = out.double(), ref.double()
    err = (o - r).abs()
    bad = torch.isnan(err) | (err > atol + rtol * r.abs())
    finite = err[~torch.isnan(err)]
    max_abs = float(finite.max()) if finite.numel() else math.inf
    big = (r.abs() > atol) & ~torch.isnan(err)
    max_rel = float((err[big] / r.abs()[big]).max()) if big.any() else 0.0
    nan_count = int(torch.isnan(o).sum())
    if nan_count:
        max_abs = max_rel = math.inf
    if not bad.any():
        return True, max_abs, max_rel, ""
    first = tuple(int(i) for i in bad.nonzero()[0])
    unwritten = f" ({nan_count} NaN: never written)" if nan_count else ""
    why = (
        f"{int(bad.sum())} of {bad.numel()} elements wrong{unwritten}; "
        f"first at {list(first)}: got {float(o[first])}, expected {float(r[first])} "
        f"(atol {atol}, rtol {rtol})"
    )
    return False, max_abs, max_rel, why


# Untrusted processes send their outputs back as plain arrays, never as pickles: a JSON
# header (dtype, shape of each array, and a small metadata dict) followed by raw bytes,
# read with numpy from an allowlist of dtypes. Nothing in a reply can run code here.
PACK_MAGIC = b"ARGUSOUT1\n"
PACK_DTYPES: frozenset[str] = frozenset(
    {"float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint8", "bool"}
)
PACK_MAX_HEADER = 1 << 20


def pack_arrays(meta: dict[str, Any], tensors: list[Any]) -> bytes:
    """`meta` (JSON-able) and `tensors` (torch tensors or numpy arrays; bf16 and other
    dtypes numpy lacks are sent as float32) as bytes for `unpack_arrays`."""
    import json

    import numpy as np

    arrays = []
    for t in tensors:
        if hasattr(t, "detach"):
            t = t.detach().cpu()
            if str(t.dtype).removeprefix("torch.") not in PACK_DTYPES:
                t = t.float()
            t = t.contiguous().numpy()
        # ascontiguousarray makes a 0-d array 1-d: keep a scalar output's shape ()
        arrays.append(np.ascontiguousarray(t).reshape(np.shape(t)))
    header = {
        "meta": meta,
        "arrays": [{"dtype": str(a.dtype), "shape": list(a.shape)} for a in arrays],
    }
    head = json.dumps(header).encode()
    return (
        PACK_MAGIC + len(head).to_bytes(8, "little") + head + b"".join(a.tobytes() for a in arrays)
    )


class PackError(ValueError):
    """A reply that is not a well-formed `pack_arrays` blob."""


def unpack_arrays(blob: bytes) -> tuple[dict[str, Any], list[Any]]:
    """(meta, numpy arrays) of a `pack_arrays` blob from an untrusted process; PackError
    for anything malformed (wrong magic, header, dtype, or sizes that do not add up)."""
    import json

    import numpy as np

    if not blob.startswith(PACK_MAGIC):
        raise PackError("not an output blob (bad magic)")
    pos = len(PACK_MAGIC)
    size = int.from_bytes(blob[pos : pos + 8], "little")
    if size > PACK_MAX_HEADER or pos + 8 + size > len(blob):
        raise PackError(f"header of {size} bytes does not fit the blob")
    try:
        header = json.loads(blob[pos + 8 : pos + 8 + size])
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PackError(f"header is not JSON: {exc}") from None
    if not isinstance(header, dict) or not isinstance(header.get("arrays"), list):
        raise PackError("header is not {meta, arrays}")
    meta = header.get("meta")
    meta = meta if isinstance(meta, dict) else {}
    pos += 8 + size
    arrays = []
    for spec in header["arrays"]:
        dtype = spec.get("dtype") if isinstance(spec, dict) else None
        shape = spec.get("shape") if isinstance(spec, dict) else None
        if dtype not in PACK_DTYPES:
            raise PackError(f"array dtype {dtype!r}; valid: {', '.join(sorted(PACK_DTYPES))}")
        if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
        ):
            raise PackError(f"array shape {shape!r} is not a list of sizes")
        count = math.prod(shape)
        nbytes = count * np.dtype(dtype).itemsize
        if pos + nbytes > len(blob):
            raise PackError("array data is shorter than its header says")
        arrays.append(np.frombuffer(blob, dtype=dtype, count=count, offset=pos).reshape(shape))
        pos += nbytes
    if pos != len(blob):
        raise PackError(f"{len(blob) - pos} bytes after the last array")
    return meta, arrays
