"""NVIDIA Hopper backends (`h100`, `h200`): sm_90 lowering, compilation, cubin report.

Compiles on any machine (Triton bundles ptxas and cuobjdump): `GPUTarget("cuda", 90, 32)`
gives PTX and a cubin with no GPU. Kernels run and are timed where torch sees a CUDA
device of compute capability 9.0. The lowering is the generic Triton one with Hopper's
rules (`lowering.py`: TMA, warp specialization, persistent grid), whose policy options
Triton's compiler never sees.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from argus_core.backend import BackendBase
from argus_core.errors import PolicyError
from argus_core.evaluate.costmodel import lds_bytes_estimate
from argus_core.ir.explicit import selects_explicit
from argus_core.lowering.triton_compile import (
    check_compiler_options,
    check_tiles,
    compile_report,
)
from argus_core.target import TargetSpec
from argus_core.types import CompileReport, LoweredKernel, Policy
from argus_plugins.backends.hopper.cubin import report_fields
from argus_plugins.backends.hopper.gluon import HOPPER_GLUON
from argus_plugins.backends.hopper.lowering import LOWERING_OPTIONS, hopper_lowering
from argus_plugins.backends.hopper.spec import H100, H200

CAPABILITY = 90

# Triton's CUDA options (triton/backends/nvidia/compiler.py CUDAOptions) a policy may set,
# and the options of Hopper's lowering (LOWERING_OPTIONS), which Triton never sees
POLICY_SPACE: dict[str, list[Any]] = {
    "num_warps": [1, 2, 4, 8, 16],
    "num_stages": [1, 2, 3, 4, 5],
    "num_ctas": [1, 2],
    "maxnreg": [None, 128, 168, 232, 255],
    "tma": [0, 1],  # plain tile views through TMA descriptors (pointer path when unaligned)
    "warp_specialize": [0, 1],  # producer/consumer warps on the main loop; needs tma, 4 warps
    "persistent": [0, 1, 2],  # programs per SM looping over the grid's tiles (0: one per tile)
}
DEFAULTS: dict[str, Any] = {"num_warps": 4, "num_stages": 3, "num_ctas": 1, "maxnreg": None}
MIN_TILE = 16


class HopperBackend(BackendBase):
    explicit_target = HOPPER_GLUON  # explicit-level kernels: Gluon for sm_90 (gluon.py)

    def __init__(self, name: str, spec: TargetSpec, workdir: str | Path | None = None):
        self.name, self.spec, self.workdir = name, spec, workdir
        self.lowering = hopper_lowering(spec)

    def policy_space(self) -> dict[str, list[Any]]:
        return {k: list(v) for k, v in POLICY_SPACE.items()}

    def compiler_options(self, policy: Policy) -> dict[str, Any]:
        """The policy's options without those Hopper's lowering read (tma,
        warp_specialize, persistent): Triton's compile and launch reject them."""
        return {k: v for k, v in policy.compiler.items() if k not in LOWERING_OPTIONS}

    def validate_policy(self, policy: Policy) -> None:
        """PolicyError for an unknown option, a value outside its list, a tile extent that
        is not a power of two >= 16, or a shared-memory estimate over what a block may use."""
        if selects_explicit(policy):  # level: explicit: the family checks its knobs
            return
        check_compiler_options(self.name, POLICY_SPACE, policy)
        check_tiles(self.name, policy, MIN_TILE)
        comp = policy.compiler
        if comp.get("warp_specialize"):
            if not comp.get("tma"):
                raise PolicyError(
                    f"{self.name}: warp_specialize=1 needs tma=1 (Triton 3.6 specializes "
                    "warps on Hopper only for loops whose loads go through TMA descriptors)"
                )
            if comp.get("num_warps", DEFAULTS["num_warps"]) != 4:
                raise PolicyError(
                    f"{self.name}: warp_specialize=1 needs num_warps=4 (one consumer "
                    f"warpgroup; Triton 3.6 ignores it at num_warps={comp.get('num_warps')})"
                )
        smem = lds_bytes_estimate(policy, elem_bytes=2)
        if smem is not None and smem > self.spec.lds_bytes_per_cu:
            raise PolicyError(
                f"{self.name}: policy {policy.key()!r} needs ~{smem} bytes of shared memory "
                f"for 16-bit operands, over the {self.spec.lds_bytes_per_cu} an sm_90 block "
                "can have; use smaller BM/BN/BK or fewer num_stages"
            )

    def compile(
        self, lowered: LoweredKernel, dtypes: dict[str, str], policy: Policy
    ) -> CompileReport:
        """Compile for sm_90 and read the report from the cubin; a kernel that does not
        compile gives ok=False and the compiler's message."""
        return compile_report(
            lowered,
            dtypes,
            policy,
            target=("cuda", CAPABILITY, self.spec.wave_size),
            options={**DEFAULTS, **self.compiler_options(policy)},
            buffer_ops=False,
            asm_kind="sass",
            fields=lambda compiled: report_fields(compiled.asm["cubin"], compiled.metadata),
            workdir=self.workdir,
        )

    def device_available(self) -> bool:
        """True when torch is a CUDA build and device 0 has compute capability 9.0."""
        try:
            import torch
        except ImportError:
            return False
        if getattr(torch.version, "hip", None) or not torch.cuda.is_available():
            return False
        return torch.cuda.get_device_capability(0) == (9, 0)


def backends() -> list[HopperBackend]:
    return [HopperBackend("h100", H100), HopperBackend("h200", H200)]
