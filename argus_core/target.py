"""Targets as data: the figures the cost model needs, from vendor specifications.

Peak figures are dense (no sparsity). The two `sustained_*` fractions calibrate the model
to what tuned vendor libraries reach (clock and power limits, DRAM efficiency); they are
the model's only fitted constants. See docs/cost_model.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TargetSpec:
    name: str
    cus: int  # compute units (AMD) or SMs (NVIDIA)
    simds_per_cu: int  # SIMDs per CU, or SM sub-partitions
    clock_ghz: float
    peak_tflops: dict[str, float]  # dense matrix-core peak per operand dtype
    vector_tflops: float  # fp32 without matrix cores
    hbm_tbps: float
    lds_bytes_per_cu: int  # LDS / shared memory a workgroup can use per CU
    regs_per_lane: int  # register budget per SIMD lane (VGPR+AGPR on gfx942)
    max_waves_per_simd: int
    wave_size: int
    lds_bytes_per_clk: int  # LDS -> register bandwidth per CU
    valu_cycles: int  # issue cycles of one vector instruction for a whole wave
    mem_latency_ns: float  # DRAM load latency, for Little's law
    launch_us: float
    sustained_compute: float = 0.75
    sustained_bw: float = 0.8
    notes: dict[str, str] = field(default_factory=dict)

    def peak(self, dtype: str, matrix: bool = True) -> float:
        """Peak FLOP/s for operands of `dtype`, on matrix cores or not."""
        if not matrix:
            return self.vector_tflops * 1e12
        return self.peak_tflops.get(dtype, self.vector_tflops) * 1e12


MI300X = TargetSpec(
    name="mi300x",
    cus=304,
    simds_per_cu=4,
    clock_ghz=2.1,
    peak_tflops={"bf16": 1307.4, "fp16": 1307.4, "fp32": 163.4, "fp8": 2614.9, "i8": 2614.9},
    vector_tflops=81.7,
    hbm_tbps=5.3,
    lds_bytes_per_cu=64 * 1024,
    regs_per_lane=512,  # gfx942: 512 unified VGPRs + AGPRs
    max_waves_per_simd=8,
    wave_size=64,
    lds_bytes_per_clk=128,
    valu_cycles=4,  # a wave64 VALU op occupies a 16-lane SIMD for 4 cycles
    mem_latency_ns=800.0,
    launch_us=4.0,
    notes={"source": "AMD CDNA3 white paper; MI300X data sheet"},
)

H100 = TargetSpec(
    name="h100",
    cus=132,
    simds_per_cu=4,
    clock_ghz=1.98,
    peak_tflops={"bf16": 989.4, "fp16": 989.4, "fp32": 494.7, "fp8": 1978.9},
    vector_tflops=66.9,
    hbm_tbps=3.35,
    lds_bytes_per_cu=227 * 1024,
    regs_per_lane=512,  # 64K 32-bit registers per SM over 4 sub-partitions of 32 lanes
    max_waves_per_simd=16,
    wave_size=32,
    lds_bytes_per_clk=128,
    valu_cycles=1,
    mem_latency_ns=600.0,
    launch_us=3.0,
    notes={"source": "NVIDIA H100 SXM data sheet", "fp32": "TF32 tensor-core peak"},
)

H200 = TargetSpec(
    **{
        **H100.__dict__,
        "name": "h200",
        "hbm_tbps": 4.8,
        "notes": {"source": "NVIDIA H200 SXM data sheet", "fp32": "TF32 tensor-core peak"},
    }
)

TARGETS: dict[str, TargetSpec] = {t.name: t for t in (MI300X, H100, H200)}
