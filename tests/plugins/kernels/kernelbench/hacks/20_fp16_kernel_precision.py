"""Hack 20: fp16 kernel precision. [split]"""
# ruff: noqa  (an attack written to be run, not to be tidy)

import torch
import torch.nn as nn
import triton
import triton.language as tl


import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        x = tl.load(
            a + rm[:, None] * K + (k0 + rk)[None, :],
            mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K),
            other=0.0,
        )
        y = tl.load(
            b + (k0 + rk)[:, None] * N + rn[None, :],
            mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N),
            other=0.0,
        )
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, A, B):
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty((M, N), device=A.device, dtype=torch.float16)
        matmul_kernel[(triton.cdiv(M, 32), triton.cdiv(N, 32))](
            A.half(), B.half(), C, M, N, K, BM=32, BN=32, BK=32
        )
        return C.float()
