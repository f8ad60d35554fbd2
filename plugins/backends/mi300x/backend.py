"""The AMD Instinct MI300X backend: gfx942 cross-compilation, static report, cost model.

Compiles on any machine: Triton bundles the AMD LLVM backend and LLD, so
`triton.compile(..., target=GPUTarget("hip", "gfx942", 64))` needs no GPU. Kernels run
and are timed only where torch sees a ROCm gfx942 device.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from argus_core.errors import PolicyError
from argus_core.evaluate.costmodel import MI300X, estimate_time, lds_bytes_estimate
from argus_core.evaluate.launch import ensure_triton_cache_dir, load_kernel
from argus_core.types import CompileReport, LoweredKernel, Policy, TimingReport
from argus_plugins.backends._triton_build import (
    check_compiler_options,
    check_tiles,
    error_text,
    specialized_signature,
)
from argus_plugins.backends.mi300x.amdgcn import report_fields

ARCH = "gfx942"
WARP_SIZE = 64

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


class Mi300xBackend:
    name = "mi300x"
    lowering = "triton"
    lowering_options: dict[str, Any] = {}
    spec = MI300X

    def __init__(self, workdir: str | Path | None = None):
        self.workdir = workdir

    def policy_space(self) -> dict[str, list[Any]]:
        return {k: list(v) for k, v in POLICY_SPACE.items()}

    def validate_policy(self, policy: Policy) -> None:
        """PolicyError for an unknown option, a value outside its list, a tile extent that
        is not a power of two >= 16, or an LDS estimate over the CU's 64 KiB."""
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
        start = time.perf_counter()
        report = CompileReport(target=f"hip:{ARCH}", ok=False, asm_kind="amdgcn")
        if os.environ.get("TRITON_INTERPRET") not in (None, "", "0"):
            report.error = "TRITON_INTERPRET is set in this process; triton.compile cannot run here"
            return report
        try:
            compiled = self._compile(lowered, dtypes, policy)
        except Exception as exc:  # any compiler failure is the candidate's, not ours
            report.error = error_text(exc)
            report.seconds = time.perf_counter() - start
            return report
        asm = compiled.asm.get("amdgcn", "")
        report = CompileReport(
            target=f"hip:{ARCH}",
            ok=True,
            seconds=time.perf_counter() - start,
            asm=asm,
            asm_kind="amdgcn",
            **report_fields(asm, compiled.metadata),
        )
        return report

    def _compile(self, lowered: LoweredKernel, dtypes: dict[str, str], policy: Policy) -> Any:
        ensure_triton_cache_dir()
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource

        fn = load_kernel(lowered, self.workdir)
        signature, constexprs, attrs = specialized_signature(
            lowered, dtypes, policy, buffer_ops=True
        )
        src = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
        options = {**DEFAULTS, **policy.compiler}
        return triton.compile(src, target=GPUTarget("hip", ARCH, WARP_SIZE), options=options)

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

    def estimate(
        self,
        family: Any,
        shape: dict[str, int],
        dtype: str,
        policy: Policy,
        report: CompileReport | None,
    ) -> TimingReport:
        """The roofline-occupancy cost model for MI300X (docs/cost_model.md)."""
        return estimate_time(self.spec, family, shape, dtype, policy, report)
