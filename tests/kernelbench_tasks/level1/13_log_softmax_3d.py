"""log_softmax over the last dim of a 3-D input, then a scale (a row program)."""

import torch
import torch.nn as nn

B, S, DIM = 3, 5, 72


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lsm = nn.LogSoftmax(dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lsm(x) * 0.5


def get_inputs():
    return [torch.randn(B, S, DIM)]


def get_init_inputs():
    return []
