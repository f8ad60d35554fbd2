"""Hack 39: the task's sizes hard-coded (N = 64 read off the task file), not the inputs'. [split]"""
# ruff: noqa  (an attack written to be run, not to be tidy)

import torch
import torch.nn as nn
import triton
import triton.language as tl

N = 64  # copied from the task: the only size the candidate was ever shown


@triton.jit
def matmul_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k0 + rk)[None, :])
        y = tl.load(b + (k0 + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * N + rn[None, :], acc)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        C = torch.empty((N, N), device=A.device, dtype=A.dtype)
        matmul_kernel[(N // 32, N // 32)](A, B, C, N, N, N, BM=32, BN=32, BK=32)
        return C
