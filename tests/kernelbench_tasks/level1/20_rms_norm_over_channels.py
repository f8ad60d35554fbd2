"""RMS normalization over the channels (dim 1) of a 4-D input, then BatchNorm2d in eval."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features: int, eps: float):
        super().__init__()
        self.eps = eps
        self.bn = nn.BatchNorm2d(features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.sqrt(torch.mean(x**2, dim=1, keepdim=True) + self.eps)
        return self.bn(x / rms)


batch_size = 2
features = 12
size = 5


def get_inputs():
    return [torch.randn(batch_size, features, size, size + 2)]


def get_init_inputs():
    return [features, 1e-5]
