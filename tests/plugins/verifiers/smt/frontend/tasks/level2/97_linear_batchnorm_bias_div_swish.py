"""A small task shaped like KernelBench level2/97 (Linear, BatchNorm1d, + a bias parameter
of shape (1,), / a constant, Swish), written for the verifier's tests: the matmul template
emits a scalar parameter (`al.load_scalar`) and an `al.sqrt` of a tile typed like a tensor,
which made the verifier's value tracking index a missing operand (IndexError)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, bias_shape=(1,), divide_value=1.0):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.bn = nn.BatchNorm1d(out_features)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.divide_value = divide_value

    def forward(self, x):
        x = self.bn(self.matmul(x))
        x = (x + self.bias) / self.divide_value
        return x * torch.sigmoid(x)


def get_inputs():
    return [torch.rand(16, 80)]


def get_init_inputs():
    return [80, 80, (1,), 1.0]
