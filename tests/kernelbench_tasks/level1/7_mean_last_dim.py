"""Mean over the last dim of a 3-D tensor."""

import torch
import torch.nn as nn

B, S, D = 8, 16, 50


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=-1)


def get_inputs():
    return [torch.randn(B, S, D)]


def get_init_inputs():
    return []
