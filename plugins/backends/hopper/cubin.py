"""The static report of a Hopper cubin: `cuobjdump --dump-resource-usage` and the SASS.

Triton ships `cuobjdump` in its NVIDIA backend (`triton/backends/nvidia/bin`), so the
report needs no CUDA toolkit and no GPU.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from typing import Any

_USAGE = re.compile(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")
# SASS mnemonics worth counting: Hopper's warpgroup MMA, older MMA, async and TMA copies,
# local-memory traffic (spills), global loads
_OPS = {
    "hgmma": r"\bHGMMA\b",
    "hmma": r"\bHMMA\b",
    "ldgsts": r"\bLDGSTS\b",
    "utmaldg": r"\bUTMALDG\b",
    "ldg": r"\bLDG\b",
    "stg": r"\bSTG\b",
    "stl": r"\bSTL\b",
    "ldl": r"\bLDL\b",
}


def cuobjdump() -> str:
    """Path of the cuobjdump that Triton bundles (or one on PATH)."""
    import triton

    bundled = os.path.join(
        os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump"
    )
    return bundled if os.path.exists(bundled) else "cuobjdump"


def report_fields(cubin: bytes, metadata: Any) -> dict[str, Any]:
    """CompileReport fields from a cubin: registers per thread, spills (local stores and
    loads in the SASS), stack bytes, shared memory (Triton's dynamic allocation plus the
    static part), MMA instruction count (HGMMA, else HMMA), and an instruction mix."""
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
        path = f.name
    try:
        usage = subprocess.run(
            [cuobjdump(), "--dump-resource-usage", path], capture_output=True, text=True, timeout=60
        ).stdout
        sass = subprocess.run(
            [cuobjdump(), "--dump-sass", path], capture_output=True, text=True, timeout=60
        ).stdout
    finally:
        os.unlink(path)
    m = _USAGE.search(usage)
    regs, stack, static_shared, _local = (
        (int(g) for g in m.groups()) if m else (None, None, 0, None)
    )
    counts = {k: len(re.findall(rx, sass)) for k, rx in _OPS.items()}
    num_warps = int(getattr(metadata, "num_warps", 4))
    return {
        "registers": regs,
        "spills": counts["stl"] + counts["ldl"],
        "scratch_bytes": stack,
        "shared_bytes": int(getattr(metadata, "shared", 0)) + static_shared,
        "occupancy": _warps_per_sm(regs, num_warps),
        "mma_count": counts["hgmma"] or counts["hmma"],
        "instructions": counts,
        "asm": sass,
    }


def _warps_per_sm(regs: int | None, num_warps: int) -> int | None:
    """Resident warps per SM allowed by registers alone (64K registers, allocated per warp
    in units of 256; at most 64 warps)."""
    if not regs:
        return None
    per_warp = -(-regs * 32 // 256) * 256
    ctas = 65536 // (per_warp * num_warps)
    return min(64, ctas * num_warps)
