"""torch.max over the middle dim of a 3-D input (values only): a middle-dim reduction."""

import torch
import torch.nn as nn

B, R, C = 4, 19, 45


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.max(x, dim=self.dim)[0]


def get_inputs():
    return [torch.randn(B, R, C)]


def get_init_inputs():
    return [1]
