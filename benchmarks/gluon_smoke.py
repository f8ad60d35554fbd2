"""One launch of each explicit attention variant at a small shape, checked against the
family's reference (o and lse), and the MoE layer around the explicit grouped GEMM at the
family's check shapes: a quick look for a hang or a wrong result before the full
`benchmarks/gluon_bench.py` run. Prints one line per variant; exit 1 when any is wrong.

    bash benchmarks/on_device.sh timeout 120 python3 benchmarks/gluon_smoke.py
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--consumers",
        default="1,2,2o,2p,2op",
        help="attention variants to run (comma-separated subset of 1,2,2o,2p,2op)",
    )
    ap.add_argument("--no-moe", action="store_true", help="skip the MoE layer")
    args = ap.parse_args(argv)
    wanted = set(args.consumers.split(","))
    bad_forms = wanted - {"1", "2", "2o", "2p", "2op", ""}
    if bad_forms:
        ap.error(f"invalid consumers {sorted(bad_forms)[0]!r}; valid choices: 1, 2, 2o, 2p, 2op")
    from argus_core.evaluate.outputs import compare
    from argus_plugins.backends.hopper.gluon import lower
    from argus_plugins.kernels.attention.family import AttentionFamily
    from argus_plugins.kernels.attention.kernel_explicit import build, launcher

    fam = AttentionFamily()
    bad = 0
    variants = [
        (cons, d, causal, hkv, 128)
        for cons in ("1", "2", "2o", "2p", "2op")
        if cons in wanted
        for d, causal, hkv in ((128, True, 2), (128, False, 8), (64, False, 8), (64, True, 8))
    ] + [
        v
        for v in (("2", 64, False, 8, 256), ("2", 64, True, 8, 256), ("2p", 64, True, 8, 256))
        if v[0] in wanted
    ]
    for cons, d, causal, hkv, bn in variants:
        shape = dict(B=2, HQ=8, HKV=hkv, S=512, SKV=512, D=d, CAUSAL=int(causal), VARLEN=0)
        inputs = fam.make_inputs(shape, "bf16", 0, "cuda")
        kernel = build(d, causal, 2, int(cons[0]), "o" in cons, "p" in cons).with_consts(BN=bn)
        launcher(kernel, lower(kernel))(inputs)
        ref = fam.reference(inputs)
        atol, rtol = fam.tolerance("bf16")
        res = [compare(inputs[n], ref[n], atol, rtol) for n in ("o", "lse")]
        ok = all(r[0] for r in res)
        bad += not ok
        print(f"consumers={cons} BN={bn} {shape}: {'ok' if ok else 'WRONG'} "
              f"o err {res[0][1]:.3g} lse err {res[1][1]:.3g} {res[0][3]} {res[1][3]}", flush=True)  # fmt: skip
    if not args.no_moe:
        bad += moe_smoke()
    return 1 if bad else 0


def moe_smoke() -> int:
    """The MoE layer around the explicit grouped GEMM at the family's check shapes (ragged
    T, H, I; many experts; decode), BN 256 with two consumer warpgroups and BN 128 with one,
    compared with the family's reference; the number of wrong variants."""
    from argus_core.evaluate.outputs import compare
    from argus_plugins.backends.hopper.gluon import lower
    from argus_plugins.kernels.moe.family import CHECK_SHAPES, MoEFamily
    from argus_plugins.kernels.moe.kernel_explicit import build, launcher

    fam = MoEFamily()
    bad = 0
    for warps, consts, fused in (
        (8, dict(BM=128, BN=256, STAGES=3), False),
        (4, dict(BM=64, BN=128, STAGES=4), False),
        (8, dict(BM=128, BN=128, STAGES=3), True),  # the gate/up + SiLU epilogue
    ):
        kernel = build(warps, 1, fused).with_consts(**consts)
        run = launcher(kernel, lower(kernel))
        for shape in [
            *CHECK_SHAPES,
            {"T": 256, "E": 8, "TOPK": 2, "H": 512, "I": 384, "RENORM": 1},
        ]:
            inputs = fam.make_inputs(shape, "bf16", 0, "cuda")
            run(inputs)
            ref = fam.reference(inputs)
            ok, err, _, why = compare(inputs["out"], ref["out"], *fam.tolerance("bf16"))
            bad += not ok
            print(f"moe w{warps} {consts}{' silu' if fused else ''} {shape}: {'ok' if ok else 'WRONG'} err {err:.3g} {why}",
                  flush=True)  # fmt: skip
    return bad


if __name__ == "__main__":
    sys.exit(main())
