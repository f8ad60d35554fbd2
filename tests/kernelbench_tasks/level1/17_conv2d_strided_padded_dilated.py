"""Conv2d with stride, padding and dilation, asymmetric kernel and input."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(
            in_channels, out_channels, (3, 2), stride=(2, 1), padding=(1, 2), dilation=(1, 2)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


batch_size = 2
height = 11
width = 9


def get_inputs():
    return [torch.randn(batch_size, 5, height, width)]


def get_init_inputs():
    return [5, 12]
