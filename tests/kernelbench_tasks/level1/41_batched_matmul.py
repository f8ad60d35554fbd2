"""Batched matrix product torch.bmm([B, M, K], [B, K, N]) (template `bmm`)."""

import torch
import torch.nn as nn

batch = 3
m = 20
k = 24
n = 18


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bmm(a, b)


def get_inputs():
    return [torch.randn(batch, m, k), torch.randn(batch, k, n)]


def get_init_inputs():
    return []
