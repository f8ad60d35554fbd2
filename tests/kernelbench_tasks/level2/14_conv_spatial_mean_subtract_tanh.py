"""Conv2d, then each channel's spatial mean subtracted, then tanh: a program of two kernels
(the convolution, then a row program over its output's [N * C, H * W] rows)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        x = x - torch.mean(x, dim=(2, 3), keepdim=True)
        return torch.tanh(x)


batch_size = 2
height = 6
width = 10


def get_inputs():
    return [torch.randn(batch_size, 3, height, width)]


def get_init_inputs():
    return [3, 8]
