"""Conv2d, softmax over the channels plus a channel bias, then the min over the channels."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.softmax(self.conv(x), dim=1) + self.bias
        return torch.tanh(torch.min(x, dim=1, keepdim=True)[0])


batch_size = 2
size = 7


def get_inputs():
    return [torch.randn(batch_size, 3, size, size)]


def get_init_inputs():
    return [3, 10]
