"""Reference modules (plain PyTorch, as a task or a family would give them) and their
specifications, derived through the front end's capture on meta tensors."""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from argus_core.spec import Spec, spec_of_module


class Gemm(torch.nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


class Bmm(torch.nn.Module):
    def forward(self, a, b):
        return torch.bmm(a, b)


class Attention(torch.nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)


class Elementwise(torch.nn.Module):
    def forward(self, x0, x1):
        return torch.relu(x0) + x1 * 2


class LinearScale(torch.nn.Module):
    def forward(self, a, w, bias, scale):
        return F.linear(a, w, bias) * scale


class RowsumPlus(torch.nn.Module):
    def forward(self, x, z):
        return x.sum(-1) + z


def _r(*shape):
    return lambda: torch.randn(*shape)


REFERENCES = {
    "gemm": (Gemm, lambda: [torch.randn(64, 32), torch.randn(32, 48)], ["a", "b"], ["c"]),
    "bmm": (Bmm, lambda: [torch.randn(2, 64, 32), torch.randn(2, 32, 48)], ["a", "b"], ["c"]),
    "attention": (
        Attention,
        lambda: [torch.randn(2, 4, 16, 8), torch.randn(2, 2, 16, 8), torch.randn(2, 2, 16, 8)],
        ["q", "k", "v"],
        ["o"],
    ),
    "elementwise": (
        Elementwise,
        lambda: [torch.randn(8, 64), torch.randn(8, 64)],
        ["x0", "x1"],
        ["y"],
    ),
    "linear_scale": (
        LinearScale,
        lambda: [torch.randn(16, 64), torch.randn(32, 64), torch.randn(32), torch.randn(32)],
        ["a", "w", "bias", "scale"],
        ["c"],
    ),
    "rowsum_plus": (
        RowsumPlus,
        lambda: [torch.randn(2, 8, 64), torch.randn(2, 8)],
        ["x", "z"],
        ["y"],
    ),
}


@functools.cache
def spec(name: str) -> Spec:
    build, make, ins, outs = REFERENCES[name]
    return spec_of_module(build, make, ins, outs, name=name)
