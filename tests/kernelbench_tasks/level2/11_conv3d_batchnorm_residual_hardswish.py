"""Conv3d, BatchNorm3d (eval), a residual add of an input and a channel bias, HardSwish."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, 3, padding=1)
        self.bn = nn.BatchNorm3d(out_channels)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1, 1) * 0.1)

    def forward(self, x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        y = self.bn(self.conv(x)) + skip + self.bias
        return torch.nn.functional.hardswish(y) * 0.5


batch_size = 2
depth = 4
size = 6


def get_inputs():
    return [
        torch.randn(batch_size, 3, depth, size, size),
        torch.randn(batch_size, 4, depth, size, size),
    ]


def get_init_inputs():
    return [3, 4]
