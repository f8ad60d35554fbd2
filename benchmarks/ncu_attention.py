"""One explicit-level attention configuration and SDPA (cuDNN) on one case, for Nsight Compute.

    ncu --clock-control none --section SpeedOfLight ... -k regex:attn_fwd --launch-skip 3 \
        --launch-count 1 python3 benchmarks/ncu_attention.py --case "B4 H32 S4k D128" \
        --config "c2 s3 128x128" --no-timing

Builds the case's inputs (`benchmarks/gluon_bench.py` ATTN_CASES), checks our output against
the family's reference (o and lse), then runs ours and SDPA with the cuDNN backend
`--runs` times each (the first runs warm the caches and compile; ncu's --launch-skip picks
the one it profiles; SDPA's cuDNN kernel matches `-k regex:cudnn`, while `fmha` would
match the family's fp32 reference kernel instead). Without `--no-timing` it prints both
median times (one after the other, not alternated: a first-run figure on a cool GPU). The profile is for reading where the time goes (issue
stalls, tensor-pipe utilization) on the H200: docs/performance.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv: list[str] | None = None) -> int:
    import gluon_bench as gb
    import torch
    import triton

    from argus_core.evaluate.outputs import compare
    from argus_plugins.kernels.attention.family import AttentionFamily

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", default="B4 H32 S4k D128", choices=[c[0] for c in gb.ATTN_CASES])
    ap.add_argument("--config", default="c2 s3 128x128", help="c<consumers> s<stages> <BM>x<BN>")
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--no-timing", action="store_true", help="under a profiler: the runs only")
    args = ap.parse_args(argv)
    shape = dict(gb.ATTN_CASES)[args.case]
    cons, stages, bm, bn = gb._aparse(f"D{shape['D']} {args.config}")
    fam = AttentionFamily()
    inputs = fam.make_inputs(shape, "bf16", 0, "cuda")
    ours = gb.GluonAttention(shape["D"], bool(shape["CAUSAL"]), cons, stages, bm, bn)
    ours(inputs)
    ref = fam.reference(inputs)
    atol, rtol = fam.tolerance("bf16")
    for out in ("o", "lse"):
        ok, err, _, why = compare(inputs[out], ref[out], atol, rtol)
        if not ok:
            print(f"{args.case} {args.config}: {out} wrong: {why}")
            return 1
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    gqa = q.shape[1] != k.shape[1]

    def sdpa() -> None:
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
            torch.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=bool(shape["CAUSAL"]), enable_gqa=gqa
            )

    for _ in range(args.runs):
        ours(inputs)
        sdpa()
    torch.cuda.synchronize()
    if args.no_timing:
        return 0
    t_ours = triton.testing.do_bench(lambda: ours(inputs), return_mode="median")
    t_lib = triton.testing.do_bench(sdpa, return_mode="median")
    print(f"{args.case} {args.config}: ours {t_ours:.4f} ms, SDPA cuDNN {t_lib:.4f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
