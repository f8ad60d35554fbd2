"""diag(d) @ B written as a broadcast, d.unsqueeze(1) * B (template `bcast`: d is read as
a column of the output)."""

import torch
import torch.nn as nn

rows = 36
cols = 50


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, d: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return d.unsqueeze(1) * b


def get_inputs():
    return [torch.randn(rows), torch.randn(rows, cols)]


def get_init_inputs():
    return []
