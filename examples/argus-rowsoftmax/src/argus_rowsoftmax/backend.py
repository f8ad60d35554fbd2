"""`mi300x_lowocc`: the MI300X backend with `waves_per_eu` held at 1 or 2.

`waves_per_eu` is the fewest waves per SIMD the register allocator must fit, so it caps
the VGPRs of a wave (512 / waves_per_eu). A kernel that keeps whole rows in registers
(row_softmax with BN = 1024 holds BM * BN / 256 fp32 values per lane at 4 warps) spills
when asked for 4 waves; asking for 1-2 leaves each wave 256-512 VGPRs. Everything else
(gfx942 cross-compilation, the static report, the cost model) is the `mi300x` backend's.
"""

from __future__ import annotations

from typing import Any

from argus_core.lowering.triton_compile import check_compiler_options
from argus_core.types import Policy
from argus_plugins.backends.mi300x import Mi300xBackend

# the options a row-wise kernel uses: no MFMA (no dot), no software pipelining (no K loop)
POLICY_SPACE: dict[str, list[Any]] = {
    "num_warps": [1, 2, 4, 8, 16],
    "num_stages": [1],
    "waves_per_eu": [1, 2],
}


class Mi300xLowOccBackend(Mi300xBackend):
    name = "mi300x_lowocc"

    def policy_space(self) -> dict[str, list[Any]]:
        return {k: list(v) for k, v in POLICY_SPACE.items()}

    def validate_policy(self, policy: Policy) -> None:
        """PolicyError for an option outside this backend's space (waves_per_eu 0, kpack,
        ...), then the `mi300x` checks (tile extents, LDS capacity)."""
        check_compiler_options(self.name, POLICY_SPACE, policy)
        super().validate_policy(policy)
