"""The PyTorch front end's capture: a module as a shape-annotated graph, on meta tensors."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from argus_core.frontend import CaptureError, capture


class _Big(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(1 << 15, 1 << 14)  # 2 GiB of fp32 weight at full size

    def forward(self, x):
        return torch.relu(self.fc(x)).sum(dim=-1)


def test_capture_annotates_shapes_without_allocating_the_tensors():
    gm, inputs = capture(_Big, lambda: [torch.randn(1 << 16, 1 << 15)], "big")  # 8 GiB input
    assert inputs[0].device.type == "meta" and gm.fc.weight.device.type == "meta"
    shapes = {
        n.name: tuple(n.meta["tensor_meta"].shape)
        for n in gm.graph.nodes
        if "tensor_meta" in n.meta
    }
    assert shapes["fc"] == (1 << 16, 1 << 14) and shapes["sum_1"] == (1 << 16,)


class _DataDependent(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # control flow on a value: not traceable
            return x
        return -x


def test_a_value_dependent_forward_is_a_capture_error_naming_the_module():
    with pytest.raises(CaptureError, match=r"dd: torch.fx cannot trace the forward"):
        capture(_DataDependent, lambda: [torch.randn(4)], "dd")


def test_a_shape_error_is_a_capture_error_naming_the_stage():
    with pytest.raises(CaptureError, match=r"lin: shape propagation on meta tensors failed"):
        capture(lambda: nn.Linear(8, 4), lambda: [torch.randn(3, 5)], "lin")
