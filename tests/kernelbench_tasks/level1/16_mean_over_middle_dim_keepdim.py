"""Mean over the middle dim of a 3-D input, keepdim=True: a middle-dim reduction."""

import torch
import torch.nn as nn

B, R, C = 3, 33, 20


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x, dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(B, R, C)]


def get_init_inputs():
    return []
