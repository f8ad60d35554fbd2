"""One launch of each explicit attention variant at a small shape, checked against the
family's reference (o and lse): a quick look for a hang or a wrong result before the full
`benchmarks/gluon_bench.py` run. Prints one line per variant; exit 1 when any is wrong.

    bash benchmarks/on_device.sh timeout 120 python3 benchmarks/gluon_smoke.py
"""

from __future__ import annotations

import sys


def main() -> int:
    from argus_core.evaluate.outputs import compare
    from argus_plugins.backends.hopper.gluon import lower
    from argus_plugins.kernels.attention.family import AttentionFamily
    from argus_plugins.kernels.attention.kernel_explicit import build, launcher

    fam = AttentionFamily()
    bad = 0
    variants = [
        (cons, d, causal, hkv, 128)
        for cons in ("1", "2", "2o")
        for d, causal, hkv in ((128, True, 2), (128, False, 8), (64, False, 8), (64, True, 8))
    ] + [("2", 64, False, 8, 256), ("2", 64, True, 8, 256)]
    for cons, d, causal, hkv, bn in variants:
        shape = dict(B=2, HQ=8, HKV=hkv, S=512, SKV=512, D=d, CAUSAL=int(causal), VARLEN=0)
        inputs = fam.make_inputs(shape, "bf16", 0, "cuda")
        kernel = build(d, causal, 2, int(cons[0]), cons.endswith("o")).with_consts(BN=bn)
        launcher(kernel, lower(kernel))(inputs)
        ref = fam.reference(inputs)
        atol, rtol = fam.tolerance("bf16")
        res = [compare(inputs[n], ref[n], atol, rtol) for n in ("o", "lse")]
        ok = all(r[0] for r in res)
        bad += not ok
        print(f"consumers={cons} BN={bn} {shape}: {'ok' if ok else 'WRONG'} "
              f"o err {res[0][1]:.3g} lse err {res[1][1]:.3g} {res[0][3]} {res[1][3]}", flush=True)  # fmt: skip
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
