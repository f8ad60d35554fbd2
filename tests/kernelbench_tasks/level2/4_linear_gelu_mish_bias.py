"""Linear, exact (erf) GELU, a bias parameter, Mish, clamp: a level-2 epilogue chain."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, IN_FEATURES, OUT_FEATURES = 20, 56, 44


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.bias = nn.Parameter(torch.randn(out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.gelu(self.linear(x)) + self.bias
        return torch.clamp(F.mish(x), min=-0.25, max=2.0)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
