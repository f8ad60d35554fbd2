"""AvgPool3d with stride and padding (padding counted, as PyTorch's default)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool3d(3, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


batch_size = 2
size = 6


def get_inputs():
    return [torch.randn(batch_size, 3, size, size + 1, size - 1)]


def get_init_inputs():
    return []
