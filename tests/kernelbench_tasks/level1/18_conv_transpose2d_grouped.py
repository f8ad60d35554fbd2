"""ConvTranspose2d with stride, padding, output_padding and 2 groups (no bias)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(
            channels, channels, 3, stride=2, padding=1, output_padding=1, groups=2, bias=False
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.deconv(x)


batch_size = 2
size = 6


def get_inputs():
    return [torch.randn(batch_size, 8, size, size)]


def get_init_inputs():
    return [8]
