"""Linear, then a scaled copy plus the detached original (KernelBench level2/40's shape):
clone and detach are aliases, the product is used twice in the epilogue."""

import torch
import torch.nn as nn

BATCH, IN_FEATURES, OUT_FEATURES = 12, 20, 34


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, scaling: float):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling = scaling

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.matmul(x)
        original = x.clone().detach()
        return x * self.scaling + original


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES, 0.5]
