"""An fp32 run lowers its dots with input_precision="ieee": NVIDIA's default for fp32
`tl.dot` is TF32 (10-bit mantissa), which fp32 tolerances (1e-4, KernelBench's) reject.
Found on the H200: KernelBench fp32 matmul tasks failed there and passed on the CPU."""

from __future__ import annotations

import pytest

from argus_core.plugin_manager import Registry, default_plugin_manager
from argus_core.types import Policy

FP32 = {"a": "fp32", "b": "fp32", "c": "fp32"}


@pytest.fixture(scope="module")
def gemm_ir():
    registry = Registry(default_plugin_manager())
    gemm = registry.get("kernel", "gemm")
    return registry.get("dsl", "tile").parse(gemm.source(), "gemm", str(gemm.source_path))


@pytest.fixture(scope="module")
def hopper():
    return Registry(default_plugin_manager()).get("backend", "h200")


def test_fp32_dots_are_ieee_on_hopper_and_bf16_dots_unchanged(hopper, gemm_ir):
    fp32 = hopper.lower(gemm_ir, fp32_policy(), {"dtype": "fp32"})
    assert "input_precision='ieee'" in fp32.source
    rep = hopper.compile(fp32, FP32, fp32_policy())
    assert rep.ok, rep.error
    assert rep.mma_count == 0 and "FFMA" in rep.asm  # fp32 FMAs, no TF32 HGMMA
    # without the run's dtype the same fp32 dot compiles to TF32 HGMMA: the fact matters
    tf32 = hopper.lower(gemm_ir, fp32_policy(), {})
    default = hopper.compile(tf32, FP32, fp32_policy())
    assert default.ok and default.mma_count > 0 and "HGMMA" in default.asm
    bf16 = hopper.lower(gemm_ir, fp32_policy(), {"dtype": "bf16"})
    assert "input_precision" not in bf16.source


def fp32_policy() -> Policy:
    return Policy({"BM": 64, "BN": 64, "BK": 32, "GROUP": 8}, {"num_warps": 4, "num_stages": 2})


@pytest.mark.parametrize("form", ["tf32x3", "bf16x6"])
def test_a_split_fp32_dot_runs_on_tensor_cores(hopper, gemm_ir, form):
    """`kernel.fp32_dot=tf32x3` (or bf16x6): fp32's accuracy from several tensor-core
    products (TF32 or bf16 pieces of each operand) instead of FMAs."""
    low = hopper.lower(gemm_ir, fp32_policy(), {"dtype": "fp32", "fp32_dot": form})
    assert f"input_precision={form!r}" in low.source
    rep = hopper.compile(low, FP32, fp32_policy())
    assert rep.ok, rep.error
    assert rep.mma_count > 0 and "HGMMA" in rep.asm
    ieee = hopper.compile(
        hopper.lower(gemm_ir, fp32_policy(), {"dtype": "fp32"}), FP32, fp32_policy()
    )
    assert rep.mma_count > ieee.mma_count == 0


def test_fp32_dot_is_checked_against_the_target_before_anything_runs():
    from argus_core.config import compose
    from argus_core.errors import ConfigError
    from argus_core.pipeline import Stages

    registry = Registry(default_plugin_manager())
    cfg = compose(["+kernel=gemm", "backend=mi300x", "kernel.fp32_dot=tf32x3", "tracking=none"])
    with pytest.raises(ConfigError, match=r"kernel.fp32_dot on mi300x.*tf32x3.*bf16x6"):
        Stages.from_config(cfg, registry)
    cfg = compose(["+kernel=gemm", "backend=h200", "kernel.fp32_dot=tf32x3", "tracking=none"])
    assert Stages.from_config(cfg, registry).backend.name == "h200"
