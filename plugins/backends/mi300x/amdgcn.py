"""Static numbers from gfx942 AMDGCN text, as LLVM's AMDGPU backend prints them.

The kernel's metadata block (`.vgpr_count: 164`, `.sgpr_spill_count: 0`, ...) and the
trailing comments (`; NumAgprs: 64`, `; Occupancy: 3`, `; ScratchSize: 0`) name every
resource; instructions are counted by mnemonic at the start of each code line.
"""

from __future__ import annotations

import re
from typing import Any

_FIELDS: dict[str, str] = {
    "vgprs": r"^\s*\.vgpr_count:\s*(\d+)",  # total VGPRs + AGPRs (unified register file)
    "sgprs": r"^\s*\.sgpr_count:\s*(\d+)",
    "agprs": r"^; NumAgprs:\s*(\d+)",
    "arch_vgprs": r"^; NumVgprs:\s*(\d+)",
    "vgpr_spills": r"^\s*\.vgpr_spill_count:\s*(\d+)",
    "sgpr_spills": r"^\s*\.sgpr_spill_count:\s*(\d+)",
    "scratch_bytes": r"^\s*\.private_segment_fixed_size:\s*(\d+)",
    "scratch_comment": r"^; ScratchSize:\s*(\d+)",
    "occupancy": r"^; Occupancy:\s*(\d+)",
    "code_bytes": r"^; codeLenInByte\s*=\s*(\d+)",
}

# instruction-mix counters: name -> regex on the mnemonic
_MNEMONICS: dict[str, str] = {
    "v_mfma": r"v_mfma\w*",
    "buffer_load": r"buffer_load\w*",
    "buffer_store": r"buffer_store\w*",
    "global_load": r"global_load\w*",
    "global_store": r"global_store\w*",
    "ds_read": r"ds_read\w*",
    "ds_write": r"ds_write\w*",
    "scratch_load": r"scratch_load\w*",
    "scratch_store": r"scratch_store\w*",
    "s_waitcnt": r"s_waitcnt",
    "s_barrier": r"s_barrier",
}
_CODE_PREFIXES = ("v_", "s_", "ds_", "global_", "buffer_", "flat_", "scratch_")
_MNEMONIC_LINE = re.compile(r"^\s+([a-z_][a-z0-9_]*)", re.MULTILINE)


def parse_resources(asm: str) -> dict[str, int]:
    """Every resource figure the text states (first occurrence), by the keys of `_FIELDS`."""
    found: dict[str, int] = {}
    for key, pattern in _FIELDS.items():
        m = re.search(pattern, asm, re.MULTILINE)
        if m:
            found[key] = int(m.group(1))
    return found


def count_instructions(asm: str) -> dict[str, int]:
    """How many lines of code issue each instruction class (0 when absent)."""
    mnemonics = _MNEMONIC_LINE.findall(asm)
    counts = dict.fromkeys(_MNEMONICS, 0)
    compiled = {k: re.compile(p + r"$") for k, p in _MNEMONICS.items()}
    for m in mnemonics:
        for key, rx in compiled.items():
            if rx.match(m):
                counts[key] += 1
                break
    counts["total"] = sum(1 for m in mnemonics if m.startswith(_CODE_PREFIXES))
    return counts


def report_fields(asm: str, metadata: Any) -> dict[str, Any]:
    """CompileReport keyword arguments from the AMDGCN text and Triton's kernel metadata."""
    res = parse_resources(asm)
    mix = count_instructions(asm)
    spills = None
    if "vgpr_spills" in res or "sgpr_spills" in res:
        spills = res.get("vgpr_spills", 0) + res.get("sgpr_spills", 0)
    instructions = dict(mix)
    for key in ("arch_vgprs", "vgpr_spills", "sgpr_spills", "code_bytes"):
        if key in res:
            instructions[key] = res[key]
    return {
        "registers": res.get("vgprs"),
        "sgprs": res.get("sgprs"),
        "agprs": res.get("agprs"),
        "spills": spills,
        "scratch_bytes": res.get("scratch_bytes", res.get("scratch_comment")),
        "occupancy": res.get("occupancy"),
        "shared_bytes": int(getattr(metadata, "shared", 0) or 0),
        "mma_count": mix["v_mfma"],
        "buffer_loads": mix["buffer_load"],
        "instructions": instructions,
    }
