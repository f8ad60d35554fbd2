"""An fp32 run lowers its dots with input_precision="ieee": NVIDIA's default for fp32
`tl.dot` is TF32 (10-bit mantissa), which fp32 tolerances (1e-4, KernelBench's) reject.
Found on the H200: KernelBench fp32 matmul tasks failed there and passed on the CPU."""

from __future__ import annotations

from argus_core.pipeline import Stages
from argus_core.plugin_manager import Registry, default_plugin_manager
from argus_core.target import H200
from argus_core.types import Policy
from argus_plugins.backends.hopper.backend import HopperBackend


def _stages_ir(argus_config, dtype: str):
    cfg = argus_config("+kernel=gemm", f"kernel.dtype={dtype}", "tracking=none")
    stages = Stages.from_config(cfg, Registry(default_plugin_manager()))
    fam = stages.family
    return stages, stages.dsl.parse(fam.source(), "gemm", str(fam.source_path))


def _lowered(argus_config, dtype: str, backend):
    stages, ir = _stages_ir(argus_config, dtype)
    return stages.dsl.lower(ir, fp32_policy(), backend.lowering, stages._lowering_options(backend))


def test_fp32_dots_are_ieee_on_hopper_and_bf16_dots_unchanged(argus_config):
    hopper = HopperBackend("h200", H200)
    fp32 = _lowered(argus_config, "fp32", hopper)
    assert "input_precision='ieee'" in fp32.source
    rep = hopper.compile(fp32, {"a": "fp32", "b": "fp32", "c": "fp32"}, fp32_policy())
    assert rep.ok, rep.error
    assert rep.mma_count == 0 and "FFMA" in rep.asm  # fp32 FMAs, no TF32 HGMMA
    # without the option the same fp32 dot compiles to TF32 HGMMA: the option matters
    stages, ir = _stages_ir(argus_config, "fp32")
    tf32 = stages.dsl.lower(ir, fp32_policy(), hopper.lowering, dict(hopper.lowering_options))
    default = hopper.compile(tf32, {"a": "fp32", "b": "fp32", "c": "fp32"}, fp32_policy())
    assert default.ok and default.mma_count > 0 and "HGMMA" in default.asm
    bf16 = _lowered(argus_config, "bf16", hopper)
    assert "input_precision" not in bf16.source


def fp32_policy() -> Policy:
    return Policy({"BM": 64, "BN": 64, "BK": 32, "GROUP": 8}, {"num_warps": 4, "num_stages": 2})
