"""F.scaled_dot_product_attention of [B, H, S, D] inputs, no mask (template `sdpa`)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch = 2
heads = 2
seq = 40
dim = 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v)


def get_inputs():
    return [torch.randn(batch, heads, seq, dim) for _ in range(3)]


def get_init_inputs():
    return []
