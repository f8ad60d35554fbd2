"""Probe: PDL, deeper rings and a split epilogue for the explicit Hopper GEMM (#15).

    python3 benchmarks/pdl_probe.py [--rounds 5] [--shapes MxNxK,...] [--plain]   # on the H200
    python benchmarks/pdl_probe.py --compile-only     # CPU: cross-compile for sm_90

Back-to-back kernels in one stream (a model's layers, a CUDA graph of them) each pay the
launch and the ramp of their CTAs after the previous kernel has drained. Under PDL (Hopper,
`cudaLaunchAttributeProgrammaticStreamSerialization`; Triton's `launch_pdl=True`) the next
kernel may be scheduled before the previous one ends: it sets up (shared memory, mbarriers)
and then waits in `griddepcontrol.wait` until the previous grid has finished and its writes
are visible, so correctness holds whatever the previous kernel wrote. CUTLASS's Hopper GEMMs,
TensorRT-LLM and DeepGEMM launch this way. The skinny M=128 GEMMs run 14-35 us, so a
microsecond of ramp is 3-7% of them.

Variants of the shipped data-parallel schedule (`streamk_probe.gemm_streamk` with no
stream-K region, the lowered explicit kernel's structure): `pdl0` plain; `pdl1` launched
with PDL, waiting after its set-up (the previous kernel's tail hides the launch and set-up;
the next kernel is scheduled when this one ends); `pdl2` also issues
`griddepcontrol.launch_dependents` at once, so the next kernel's CTAs take the SMs this grid
leaves idle and wait there. Each variant is checked against torch (the kernel before it in
the stream writes its inputs: a missing wait shows as wrong results), then all and cuBLAS
(`torch.mm`, as torch launches it) are timed in turn `--rounds` times, as replays of a CUDA
graph of 20 calls (`--plain`: plain launches, where the previous kernel is do_bench's L2
flush). For the M=128 shapes also deeper rings (`DEEP`: the bytes in flight of cuBLAS's own
kernels there), plain and `pdl1`; for the 128x256 shapes the epilogue stored in column
halves through a buffer of half the tile (`epi2`: 32 KiB freed, a fourth 48 KiB ring stage
fits, as in cuBLAS's 256x128 kernels' four), at the shipped three stages and at four.
Table printed last; `--out` writes JSON.
"""

from __future__ import annotations

import sys

from streamk_probe import (
    SHAPES,
    compile_kernel,
    make_runner,
    probe_main,
    tile_label,
)

VARIANTS = (0, 1, 2)
DEEP = {  # deeper rings for the memory-bound M=128 shapes: cuBLAS keeps 180-210 KB in flight
    # (its kernels there: 64x64x64 with 13 stages, 64x224x64 with 5), the shipped 160 KB
    "128x4096x4096": [(64, 64, 64, 13, 4), (64, 64, 128, 6, 4)],
    "128x14336x4096": [(128, 128, 64, 6, 4)],
}


def compile_only() -> int:
    """Cross-compile the M=128 configurations with each PDL variant, and the 128x256 one with
    the split epilogue at four stages, for sm_90 (no GPU)."""
    for name in ("128x14336x4096", "128x4096x4096"):
        for pdl in VARIANTS:
            rep = compile_kernel(SHAPES[name], pdl=pdl)
            ptx = rep.pop("ptx")
            rep["wait"] = ptx.count("griddepcontrol.wait")
            rep["launch_dependents"] = ptx.count("griddepcontrol.launch_dependents")
            print(name, f"pdl{pdl}", rep)
    bm, bn, bk, stages, warps = SHAPES["4096x4096x4096"]
    rep = compile_kernel((bm, bn, bk, stages + 1, warps), epi=2)
    rep.pop("ptx")
    print("4096x4096x4096", f"epi2 s{stages + 1}", rep)
    return 0


def build(name, shape, sms, torch, rows):
    """The candidates of shape `name` (label -> (run, info, counters or None))."""
    cands = {}
    for cfg in [SHAPES[name], *DEEP.get(name, [])]:
        for p in VARIANTS if cfg == SHAPES[name] else (0, 1):
            cands[f"pdl{p} {tile_label(cfg)}"] = make_runner(shape, cfg, False, sms, torch, pdl=p)
    bm, bn, bk, stages, warps = SHAPES[name]
    if bn == 256:  # the epilogue in halves, at the shipped ring and one stage deeper
        for cfg in ((bm, bn, bk, stages, warps), (bm, bn, bk, stages + 1, warps)):
            cands[f"epi2 {tile_label(cfg)}"] = make_runner(shape, cfg, False, sms, torch, epi=2)
    return cands


def main(argv=None) -> int:
    return probe_main(__doc__, SHAPES, "pdl_probe.json", 5, compile_only, build, argv)


if __name__ == "__main__":
    sys.exit(main())
