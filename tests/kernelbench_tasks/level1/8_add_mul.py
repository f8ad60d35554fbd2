"""(a + b) * c, elementwise."""

import torch
import torch.nn as nn

SHAPE = (24, 70)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return (a + b) * c


def get_inputs():
    return [torch.randn(*SHAPE), torch.randn(*SHAPE), torch.randn(*SHAPE)]


def get_init_inputs():
    return []
