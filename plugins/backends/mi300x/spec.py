"""The AMD Instinct MI300X (gfx942, CDNA3) as data: what the verifier, the cost model and
the planners read of it (`argus_core.target.TargetSpec`, docs/cost_model.md)."""

from __future__ import annotations

from argus_core.target import TargetSpec

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
    # 16-bit operands; `matrix_instr_nonkdim` picks 16 or 32 (CDNA3 ISA guide, ch. 7)
    matrix_instructions=("v_mfma_f32_16x16x16_bf16", "v_mfma_f32_32x32x8_bf16"),
    fp32_dots=("ieee", "bf16x6", "bf16x3"),  # Triton 3.6's AMD input_precision (no tf32x3)
    notes={"source": "AMD CDNA3 white paper; MI300X data sheet"},
)
