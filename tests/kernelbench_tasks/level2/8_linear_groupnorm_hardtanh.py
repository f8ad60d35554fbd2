"""Linear, GroupNorm (4 groups of 12 features, affine), HardTanh: group statistics in the
GEMM's epilogue."""

import torch
import torch.nn as nn

BATCH, IN_FEATURES, OUT_FEATURES, GROUPS = 22, 30, 48, 4


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, groups: int):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.gn = nn.GroupNorm(groups, out_features)
        with torch.no_grad():  # a trained layer's affine parameters, not the identity
            self.gn.weight.uniform_(0.5, 1.5)
            self.gn.bias.uniform_(-0.3, 0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.hardtanh(self.gn(self.gemm(x)), -1.5, 1.5)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES, GROUPS]
