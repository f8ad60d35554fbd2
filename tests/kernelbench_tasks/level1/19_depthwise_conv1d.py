"""Depthwise Conv1d (groups = channels) with padding."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv1d(channels, channels, 5, padding=2, groups=channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


batch_size = 3
length = 20


def get_inputs():
    return [torch.randn(batch_size, 6, length)]


def get_init_inputs():
    return [6]
