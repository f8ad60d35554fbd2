"""Every shipped kernel, lowered by every target at a golden policy, against its golden file
(`golden/<target>/<kernel>.triton.expected`). A change in any rule, generic or a target's,
shows up here as a readable diff; refresh with ARGUS_UPDATE_GOLDEN=1 and read it."""

from __future__ import annotations

from pathlib import Path

import pytest
from golden_files import check_golden

from argus_core.plugin_manager import Registry, default_plugin_manager
from argus_core.types import Policy

GOLDEN = Path(__file__).parent / "golden"

# the kernels of each family's program at a golden policy (gemm twice: split-K is two kernels)
PROGRAMS: dict[str, tuple[str, dict[str, int]]] = {
    "gemm": ("gemm", {"BM": 64, "BN": 64, "BK": 32, "GROUP": 8}),
    "gemm-splitk": ("gemm", {"BM": 16, "BN": 64, "BK": 64, "SPLIT": 4}),
    "attention": ("attention", {"BM": 64, "BN": 32, "HEAD_D": 128}),
    "moe": ("moe", {"BM": 16, "BN": 32, "BK": 32, "BT": 32, "BE": 128, "BS": 256, "BH": 64}),
}
# target variant -> (backend, the policy's compiler options)
TARGETS: dict[str, tuple[str, dict[str, int]]] = {
    "mi300x": ("mi300x", {"num_warps": 4}),
    "interpret": ("interpret", {"num_warps": 4}),
    "h200-tma": ("h200", {"num_warps": 4, "tma": 1}),
    "h200-tma-ws": ("h200", {"num_warps": 4, "tma": 1, "warp_specialize": 1}),
    "h200-persistent": ("h200", {"num_warps": 8, "persistent": 1}),
}


@pytest.fixture(scope="module")
def registry():
    return Registry(default_plugin_manager())


def backend_for(registry, name: str):
    """The backend as a run of `backend=name` uses it (the interpreter bound to its target)."""
    backend, _ = registry.get("backend", name).resolve(registry, {"name": name})
    return backend


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("program", PROGRAMS)
def test_shipped_kernels_lower_to_their_golden_triton(registry, program, target):
    family_name, tiles = PROGRAMS[program]
    backend_name, compiler = TARGETS[target]
    backend = backend_for(registry, backend_name)
    family = registry.get("kernel", family_name)
    dsl = registry.get("dsl", "tile")
    for entry in family.entries_for(tiles):
        ir = dsl.parse(family.source(), entry, str(family.source_path))
        names = {c.name for c in ir.constexprs}
        policy = Policy({k: v for k, v in tiles.items() if k in names}, compiler)
        lowered = backend.lower(ir, policy, {"dtype": "bf16"})
        check_golden(GOLDEN / target / f"{entry}.triton.expected", lowered.source)
        compile(lowered.source, f"{entry}.py", "exec")  # valid Python, whatever the target
        if lowered.tma_tensors:
            assert lowered.constexprs["USE_TMA"] == 1 and "if USE_TMA:" in lowered.source


def test_persistent_programs_are_persistent_times_the_targets_sms(registry):
    """`persistent` programs per SM of the backend's own spec (no default SM count)."""
    family = registry.get("kernel", "gemm")
    ir = registry.get("dsl", "tile").parse(family.source(), "gemm", str(family.source_path))
    tiles = PROGRAMS["gemm"][1]
    for name in ("h100", "h200"):
        backend = registry.get("backend", name)
        lowered = backend.lower(ir, Policy(tiles, {"persistent": 2}), {"dtype": "bf16"})
        programs = 2 * backend.spec.cus
        assert lowered.grid == f"(min(triton.cdiv(M, BM) * triton.cdiv(N, BN), {programs}),)"
        assert "tl.range(tl.program_id(0), tl.cdiv(M, BM) * tl.cdiv(N, BN)" in lowered.source
