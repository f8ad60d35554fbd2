"""Linear, min with a scalar parameter, minus it again: a one-element parameter in the
epilogue (KernelBench level2/68's shape)."""

import torch
import torch.nn as nn

BATCH, IN_FEATURES, OUT_FEATURES = 14, 36, 28


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, constant: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.constant = nn.Parameter(torch.tensor(constant))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.linear(x)
        return torch.min(x, self.constant) - self.constant


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES, 0.3]
