"""Implicit-GEMM convolution variants side by side: what made the `conv` template slow.

    python benchmarks/conv_lab.py static           # cross-compile each for sm_90: smem, wgmma, waits
    python benchmarks/conv_lab.py gpu OUT.json     # on the H200: time each against cuDNN

KernelBench level2/1's convolution (N 128, 64 -> 128 channels, 128 x 128, 3 x 3, fp32) as
hand-written Triton variants of the template's loop: how the fp32 product is taken (MODE:
0 Triton's bf16x3, 1 the bf16 halves split per step, 2 the weight's halves prepacked,
5 one dot over joined halves, 6 tf32x3; 3 tf32 and 4 bf16 are speed references that miss
fp32's 1e-4), the gathered input block's layout (ORDER 0: positions fastest, transposed for
the dot; 1: the compiler's own), tiles, warps and stages. Each is checked against the fp32
convolution (err/tol: the worst error over KernelBench's 1e-4 + 1e-4 |ref|; <= 1 passes)
and timed beside eager PyTorch (cuDNN at PyTorch's TF32 defaults) in the same process.
A lab, not the product: the template (plugins/kernels/kernelbench/match.py `_conv`) took
MODE 2 + ORDER 1 from it (docs/performance.md, 2026-12-03 15:2x UTC).
"""

import json
import sys
import time

import triton
import triton.language as tl


@triton.jit
def conv_k(
    x,
    whi,
    wlo,
    wf,
    y,
    I0,
    I1,
    O0,
    O1,
    S,
    P,
    xs0,
    xs2,
    xs3,
    ws0,
    ws2,
    ws3,
    ys0,
    ys2,
    ys3,
    KH: tl.constexpr,
    KW: tl.constexpr,
    CG: tl.constexpr,
    OC: tl.constexpr,
    BP: tl.constexpr,
    BC: tl.constexpr,
    BK: tl.constexpr,
    MODE: tl.constexpr,
    ORDER: tl.constexpr,
):
    pid = tl.program_id(0)
    nc: tl.constexpr = OC // BC
    pc = pid % nc
    pp = pid // nc % tl.cdiv(P, BP)
    pz = pid // nc // tl.cdiv(P, BP)
    p = pp * BP + tl.arange(0, BP)
    inrow = p < P
    o0 = p // O1
    o1 = p % O1
    acc = tl.zeros((BP, BC), dtype=tl.float32)
    KCH: tl.constexpr = CG // BK
    for kk in range(0, KH * KW * KCH):
        k = kk % KCH
        t = kk // KCH
        s0 = o0 + t // KW
        s1 = o1 + t % KW
        ok = inrow & (s0 < I0) & (s1 < I1)
        src = s0 * I1 + s1
        ch = k * BK + tl.arange(0, BK)
        if ORDER == 0:
            a = tl.trans(
                tl.load(
                    x + pz * xs0 + src[None, :] * xs2 + ch[:, None] * xs3,
                    mask=ok[None, :],
                    other=0.0,
                )
            )
        else:
            a = tl.load(
                x + pz * xs0 + src[:, None] * xs2 + ch[None, :] * xs3, mask=ok[:, None], other=0.0
            )
        cols = pc * BC + tl.arange(0, BC)
        if MODE == 0:
            b = tl.load(wf + t * ws0 + ch[:, None] * ws2 + cols[None, :] * ws3)
            acc = tl.dot(a, b, acc, input_precision="bf16x3")
        elif MODE == 1:
            b = tl.load(wf + t * ws0 + ch[:, None] * ws2 + cols[None, :] * ws3)
            bh = b.to(tl.bfloat16)
            bl = (b - bh.to(tl.float32)).to(tl.bfloat16)
            ah = a.to(tl.bfloat16)
            al_ = (a - ah.to(tl.float32)).to(tl.bfloat16)
            acc = tl.dot(al_, bh, acc)
            acc = tl.dot(ah, bl, acc)
            acc = tl.dot(ah, bh, acc)
        elif MODE == 2:
            bh = tl.load(whi + t * ws0 + ch[:, None] * ws2 + cols[None, :] * ws3)
            bl = tl.load(wlo + t * ws0 + ch[:, None] * ws2 + cols[None, :] * ws3)
            ah = a.to(tl.bfloat16)
            al_ = (a - ah.to(tl.float32)).to(tl.bfloat16)
            acc = tl.dot(al_, bh, acc)
            acc = tl.dot(ah, bl, acc)
            acc = tl.dot(ah, bh, acc)
        elif MODE == 6:
            b = tl.load(wf + t * ws0 + ch[:, None] * ws2 + cols[None, :] * ws3)
            acc = tl.dot(a, b, acc, input_precision="tf32x3")
        elif (
            MODE == 3
        ):  # 2 dots: (ah+al) * bh  + ah*bl  via concatenated K? plain: tf32 single for reference speed
            b = tl.load(wf + t * ws0 + ch[:, None] * ws2 + cols[None, :] * ws3)
            acc = tl.dot(a, b, acc, input_precision="tf32")
        elif MODE == 5:  # one bf16 dot over [a_hi, a_lo] x [b_hi, b_lo] pairs (4 products)
            ch4 = k * 4 * BK + tl.arange(0, 4 * BK)
            b4 = tl.load(whi + t * ws0 + ch4[:, None] * ws2 + cols[None, :] * ws3)
            ah = a.to(tl.bfloat16)
            al_ = (a - ah.to(tl.float32)).to(tl.bfloat16)
            xx = tl.join(ah, al_)
            a4 = tl.reshape(tl.join(xx, xx), (BP, 4 * BK))
            acc = tl.dot(a4, b4, acc)
        else:  # MODE 4: bf16 single (speed ceiling)
            bh = tl.load(whi + t * ws0 + ch[:, None] * ws2 + cols[None, :] * ws3)
            acc = tl.dot(a.to(tl.bfloat16), bh, acc)
    rows = pp * BP + tl.arange(0, BP)
    cols = pc * BC + tl.arange(0, BC)
    tl.store(y + pz * ys0 + rows[:, None] * ys2 + cols[None, :] * ys3, acc, mask=rows[:, None] < P)


def sig(mode):
    s = {"x": "*fp32", "whi": "*bf16", "wlo": "*bf16", "wf": "*fp32", "y": "*fp32"}
    for n in "I0 I1 O0 O1 S P xs0 xs2 xs3 ws0 ws2 ws3 ys0 ys2 ys3".split():
        s[n] = "i32"
    return s


VARIANTS = [  # name, BP, BC, BK, MODE, ORDER, warps, stages
    ("tc3 128x64 w4 trans (now)", 128, 64, 32, 0, 0, 4, 3),
    ("tc3 128 w8", 128, 128, 32, 0, 1, 8, 3),
    ("tc3 128 w8 s4", 128, 128, 32, 0, 1, 8, 4),
    ("tc3 128 w8 s2", 128, 128, 32, 0, 1, 8, 2),
    ("tc3 128 w8 BK16", 128, 128, 16, 0, 1, 8, 3),
    ("tc3 128 w8 BK64", 128, 128, 64, 0, 1, 8, 3),
    ("tc3 256x128 w8", 256, 128, 32, 0, 1, 8, 3),
    ("tc3 128x64 w4", 128, 64, 32, 0, 1, 4, 3),
    ("tc3 64x128 w4", 64, 128, 32, 0, 1, 4, 3),
    ("tc3 128 w4", 128, 128, 32, 0, 1, 4, 3),
    ("man 128 w8", 128, 128, 32, 1, 1, 8, 3),
    ("man-prew 128 w8", 128, 128, 32, 2, 1, 8, 3),
    ("join4 128 w8 BK16", 128, 128, 16, 5, 1, 8, 3),
    ("join4 128 w8 BK32", 128, 128, 32, 5, 1, 8, 3),
    ("join4 256x128 w8 BK16", 256, 128, 16, 5, 1, 8, 3),
    ("join4 128 w4 BK16", 128, 128, 16, 5, 1, 4, 3),
    ("tf32x3 128 w8", 128, 128, 32, 6, 1, 8, 3),
    ("tf32 128 w8 (not 1e-4)", 128, 128, 32, 3, 1, 8, 3),
    ("bf16 128 w8 (ceiling, not 1e-4)", 128, 128, 32, 4, 1, 8, 3),
]


def static():
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    for name, bp, bc, bk, mode, order, w, s in VARIANTS:
        ce = dict(
            KH=3,
            KW=3,
            CG=64,
            OC=128,
            BP=bp,
            BC=bc,
            BK=bk,
            MODE=mode,
            ORDER=order,
            xs2=1,
            ws3=1,
            ys2=1,
        )
        src = ASTSource(
            fn=conv_k,
            signature={**sig(mode), **{k: "constexpr" for k in ce}},
            constexprs=ce,
            attrs={(i,): [["tt.divisibility", 16]] for i in range(20)},
        )
        t0 = time.time()
        c = triton.compile(
            src, target=GPUTarget("cuda", 90, 32), options={"num_warps": w, "num_stages": s}
        )
        g = c.asm["ttgir"]
        ptx = c.asm["ptx"]
        print(
            f"{name:34s} smem {c.metadata.shared:6d} wgmma {ptx.count('wgmma.mma_async'):3d} waits {ptx.count('wgmma.wait_group'):2d} "
            f"pend>0 {g.count('pendings = 1') + g.count('pendings = 2'):2d} local_alloc-in-loop {g.count('ttg.local_alloc %'):2d} {time.time() - t0:.1f}s"
        )


def gpu(out):
    import torch

    torch.manual_seed(0)
    N, C, OC, H, W, K = 128, 64, 128, 128, 128, 3
    x = torch.rand(N, C, H, W, device="cuda")
    conv = torch.nn.Conv2d(C, OC, K, bias=False).cuda()
    wt = conv.weight.detach()  # [OC, C, KH, KW]
    torch.backends.cudnn.allow_tf32 = False
    ref = conv(x)
    torch.backends.cudnn.allow_tf32 = True
    eager = triton.testing.do_bench(lambda: conv(x), warmup=50, rep=300)
    wp = wt.permute(2, 3, 1, 0).reshape(K * K, C, OC).contiguous()  # [T, CG, OC]
    whi = wp.to(torch.bfloat16)
    wlo = (wp - whi.float()).to(torch.bfloat16)
    w4 = torch.stack([whi, wlo, whi, wlo], dim=2).reshape(K * K, 4 * C, OC).contiguous()
    O0 = O1 = H - K + 1
    P = O0 * O1
    y = torch.empty(N, OC, O0, O1, device="cuda")
    xv = x.view(N, C, H * W)
    yv = y.view(N, OC, P)
    rows = [
        {
            "variant": "eager cuDNN (TF32 default)",
            "ms": eager,
            "tflops": 2 * N * P * OC * C * K * K / eager / 1e9,
        }
    ]
    for name, bp, bc, bk, mode, order, w, s in VARIANTS:
        grid = (N * triton.cdiv(P, bp) * (OC // bc),)

        def run(bp=bp, bc=bc, bk=bk, mode=mode, order=order, w=w, s=s, grid=grid):
            wsel = w4 if mode == 5 else wp
            conv_k[grid](
                xv,
                w4 if mode == 5 else whi,
                wlo,
                wp,
                yv,
                H,
                W,
                O0,
                O1,
                H * W,
                P,
                xv.stride(0),
                xv.stride(2),
                xv.stride(1),
                wsel.stride(0),
                wsel.stride(1),
                wsel.stride(2),
                yv.stride(0),
                yv.stride(2),
                yv.stride(1),
                KH=K,
                KW=K,
                CG=C,
                OC=OC,
                BP=bp,
                BC=bc,
                BK=bk,
                MODE=mode,
                ORDER=order,
                num_warps=w,
                num_stages=s,
            )

        try:
            run()
            torch.cuda.synchronize()
            err = ((y - ref).abs() / (1e-4 + 1e-4 * ref.abs())).max().item()
            ms = triton.testing.do_bench(run, warmup=50, rep=300)
            rows.append(
                {
                    "variant": name,
                    "ms": ms,
                    "tflops": 2 * N * P * OC * C * K * K / ms / 1e9,
                    "vs_eager": eager / ms,
                    "err/tol": err,
                }
            )
        except Exception as e:
            rows.append({"variant": name, "error": str(e)[:200]})
        print(json.dumps(rows[-1]), flush=True)
    json.dump(rows, open(out, "w"), indent=1)
    from tabulate import tabulate

    print(tabulate(rows, headers="keys", floatfmt=".3f"))


if __name__ == "__main__":
    if sys.argv[1] == "static":
        static()
    else:
        gpu(sys.argv[2])
