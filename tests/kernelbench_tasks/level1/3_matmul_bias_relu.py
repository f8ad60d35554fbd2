"""relu(x @ w + b): a matmul with a broadcast bias and an activation."""

import torch
import torch.nn as nn

M, K, N = 32, 64, 48


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.matmul(x, w) + b)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N), torch.randn(N)]


def get_init_inputs():
    return []
