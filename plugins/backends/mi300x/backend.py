"""The AMD Instinct MI300X backend: gfx942 cross-compilation, static report, cost model.

Compiles on any machine: Triton bundles the AMD LLVM backend and LLD, so
`triton.compile(..., target=GPUTarget("hip", "gfx942", 64))` needs no GPU. Kernels run
and are timed only where torch sees a ROCm gfx942 device.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from argus_core.backend import BackendBase
from argus_core.errors import PolicyError
from argus_core.evaluate.costmodel import lds_bytes_estimate
from argus_core.ir.explicit import selects_explicit
from argus_core.lowering.triton import TRITON_RULES, TritonLowering
from argus_core.lowering.triton_compile import (
    check_compiler_options,
    check_tiles,
    compile_report,
)
from argus_core.types import CompileReport, LoweredKernel, Policy
from argus_plugins.backends.mi300x.amdgcn import report_fields
from argus_plugins.backends.mi300x.gluon import CDNA3_GLUON
from argus_plugins.backends.mi300x.spec import MI300X

ARCH = "gfx942"

# Triton's HIP options (triton/backends/amd/compiler.py HIPOptions) a policy may set
POLICY_SPACE: dict[str, list[Any]] = {
    "num_warps": [1, 2, 4, 8, 16],
    "num_stages": [1, 2, 3, 4],
    "waves_per_eu": [0, 1, 2, 3, 4],  # 0: let the compiler choose
    "matrix_instr_nonkdim": [0, 16, 32],  # MFMA 16x16 or 32x32; 0: compiler's choice
    "kpack": [1, 2],
}
DEFAULTS: dict[str, Any] = {
    "num_warps": 4,
    "num_stages": 2,
    "waves_per_eu": 0,
    "matrix_instr_nonkdim": 0,
    "kpack": 1,
}
MIN_TILE = 16  # the smallest MFMA operand extent on CDNA3


class Mi300xBackend(BackendBase):
    """gfx942 through the generic Triton rules: MI300X adds no lowering rule of its own."""

    name = "mi300x"
    spec = MI300X
    lowering = TritonLowering(TRITON_RULES, MI300X)
    explicit_target = CDNA3_GLUON  # explicit-level kernels: Gluon for gfx942 (gluon.py)

    def __init__(self, workdir: str | Path | None = None):
        self.workdir = workdir

    def policy_space(self) -> dict[str, list[Any]]:
        return {k: list(v) for k, v in POLICY_SPACE.items()}

    def validate_policy(self, policy: Policy) -> None:
        """PolicyError for an unknown option, a value outside its list, a tile extent that
        is not a power of two >= 16, or an LDS estimate over the CU's 64 KiB."""
        if selects_explicit(policy):  # level: explicit: the family checks its knobs
            return
        check_compiler_options(self.name, POLICY_SPACE, policy)
        check_tiles(self.name, policy, MIN_TILE)
        # 16-bit operands: the MFMA dtypes; an fp32 kernel needs twice this
        lds = lds_bytes_estimate(policy, elem_bytes=2)
        if lds is not None and lds > self.spec.lds_bytes_per_cu:
            raise PolicyError(
                f"{self.name}: policy {policy.key()!r} needs ~{lds} bytes of LDS for 16-bit "
                f"operands, over the {self.spec.lds_bytes_per_cu} bytes of a CU; "
                "use smaller BM/BN/BK or fewer num_stages"
            )

    def compile(
        self, lowered: LoweredKernel, dtypes: dict[str, str], policy: Policy
    ) -> CompileReport:
        """Cross-compile for gfx942 and read the static report from the AMDGCN; a kernel
        that does not compile gives ok=False and the compiler's message."""

        def fields(compiled: Any) -> dict[str, Any]:
            asm = compiled.asm.get("amdgcn", "")
            return {"asm": asm, **report_fields(asm, compiled.metadata)}

        return compile_report(
            lowered,
            dtypes,
            policy,
            target=("hip", ARCH, self.spec.wave_size),
            options={**DEFAULTS, **self.compiler_options(policy)},
            buffer_ops=True,
            asm_kind="amdgcn",
            fields=fields,
            workdir=self.workdir,
        )

    def device_available(self) -> bool:
        """True only when torch is a ROCm build and sees a gfx942 device."""
        try:
            import torch
        except ImportError:
            return False
        if getattr(torch.version, "hip", None) is None or not torch.cuda.is_available():
            return False
        arch = getattr(torch.cuda.get_device_properties(0), "gcnArchName", "")
        return arch.startswith(ARCH)
