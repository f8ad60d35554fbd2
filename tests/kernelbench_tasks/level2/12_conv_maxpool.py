"""Conv2d then MaxPool2d (pooling after a convolution is not fused: no template)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(self.conv(x))


def get_inputs():
    return [torch.randn(2, 3, 10, 10)]


def get_init_inputs():
    return [3, 8]
