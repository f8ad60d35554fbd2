"""argmin over the middle dim of a 3-D input (int64 indices)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmin(x, dim=self.dim)


def get_inputs():
    return [torch.randn(3, 10, 20)]


def get_init_inputs():
    return [1]
