"""Linear, scale, BatchNorm1d (eval: running statistics), ReLU: a per-feature epilogue."""

import torch
import torch.nn as nn

BATCH, IN_FEATURES, OUT_FEATURES = 26, 32, 48


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.bn = nn.BatchNorm1d(out_features, eps=1e-4)
        with torch.no_grad():  # statistics a trained layer would have, so eval is not identity
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.3, 0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.gemm(x) * 1.5))


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
