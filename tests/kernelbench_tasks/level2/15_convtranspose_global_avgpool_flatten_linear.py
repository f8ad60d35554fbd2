"""ConvTranspose2d, global average pooling, flatten, Linear with a ReLU: a program of three
kernels (the transposed convolution, the spatial mean, the GEMM), the flatten between the
last two a view of the buffer (no kernel, no copy)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, channels: int, features: int):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(in_channels, channels, 3, stride=2, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(channels, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.deconv(x))
        x = torch.flatten(x, 1)
        return torch.relu(self.fc(x))


batch_size = 3
size = 5


def get_inputs():
    return [torch.randn(batch_size, 4, size, size)]


def get_init_inputs():
    return [4, 16, 12]
