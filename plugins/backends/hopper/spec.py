"""NVIDIA H100 and H200 (SXM, sm_90) as data: what the verifier, the cost model and the
planners read of them (`argus_core.target.TargetSpec`, docs/cost_model.md). The H200 is an
H100 with faster, larger HBM."""

from __future__ import annotations

from dataclasses import replace

from argus_core.target import TargetSpec

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
    # warpgroup MMA (N = 8..256 in steps of 8), and the warp-level MMA Triton falls back to
    matrix_instructions=("wgmma.mma_async.m64nNk16.f32.bf16", "mma.sync.m16n8k16.f32.bf16"),
    fp32_dots=("ieee", "tf32x3", "bf16x6", "bf16x3"),  # Triton 3.6's NVIDIA input_precision
    notes={"source": "NVIDIA H100 SXM data sheet", "fp32": "TF32 tensor-core peak"},
)

H200 = replace(
    H100,
    name="h200",
    hbm_tbps=4.8,
    notes={"source": "NVIDIA H200 SXM data sheet", "fp32": "TF32 tensor-core peak"},
)
