"""MaxPool2d with stride, padding and dilation, then a scale."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(3, stride=2, padding=1, dilation=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x) * 2.0


batch_size = 2
size = 11


def get_inputs():
    return [torch.randn(batch_size, 5, size, size + 3)]


def get_init_inputs():
    return []
