"""C[M, N] = A[M, K] @ B[K, N] with ragged sizes (no multiple of a tile)."""

import torch
import torch.nn as nn

M, K, N = 48, 80, 40


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return A @ B


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
