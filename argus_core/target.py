"""A target as data: what the verifier, the cost model and the planners know of a GPU.

Every backend declares its `spec: TargetSpec` (the MI300X's in the `mi300x` backend, the
H100's and H200's in `hopper`); nothing here names a vendor's part. Peak figures are dense
(no sparsity). The two `sustained_*` fractions calibrate the cost model to what tuned
vendor libraries reach (clock and power limits, DRAM efficiency); they are the model's only
fitted constants. See docs/cost_model.md.
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
    wave_size: int  # lanes of a wavefront (AMD) or warp (NVIDIA)
    lds_bytes_per_clk: int  # LDS -> register bandwidth per CU
    valu_cycles: int  # issue cycles of one vector instruction for a whole wave
    mem_latency_ns: float  # DRAM load latency, for Little's law
    launch_us: float
    sustained_compute: float = 0.75
    sustained_bw: float = 0.8
    # the matrix-core instructions the target's code generator picks from (MFMA shapes on
    # CDNA3, wgmma on Hopper), by ISA name; the explicit level's distributed layouts
    matrix_instructions: tuple[str, ...] = ()
    # how an fp32 `dot` may compute (`kernel.fp32_dot`, Triton's input_precision): "ieee"
    # everywhere (FMA, no matrix cores); the split forms keep fp32's accuracy on matrix
    # cores: "tf32x3" (NVIDIA), "bf16x6" (NVIDIA and AMD), "bf16x3" (coarser, ~1e-5)
    fp32_dots: tuple[str, ...] = ("ieee",)
    notes: dict[str, str] = field(default_factory=dict)

    def peak(self, dtype: str, matrix: bool = True) -> float:
        """Peak FLOP/s for operands of `dtype`, on matrix cores or not."""
        if not matrix:
            return self.vector_tflops * 1e12
        return self.peak_tflops.get(dtype, self.vector_tflops) * 1e12
