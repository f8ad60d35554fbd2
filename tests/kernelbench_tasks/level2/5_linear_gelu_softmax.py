"""Linear, GELU, softmax over the features: a GEMM whose epilogue normalizes whole rows."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, IN_FEATURES, OUT_FEATURES = 18, 40, 50


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(F.gelu(self.linear(x)), dim=1)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
