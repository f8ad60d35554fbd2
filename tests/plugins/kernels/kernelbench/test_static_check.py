"""Static rejection of PyTorch compute and foreign imports in ModelNew candidates."""

from __future__ import annotations

from pathlib import Path

import pytest

from argus_plugins.kernels.kernelbench.static_check import violations

CANDIDATES = Path(__file__).with_name("candidates")

HEADER = "import torch\nimport torch.nn as nn\nimport triton\n\n\nclass ModelNew(nn.Module):\n"


def body(forward: str, init: str = "") -> str:
    init_src = f"    def __init__(self):\n        super().__init__()\n{init}\n"
    return HEADER + init_src + f"    def forward(self, x, w):\n        {forward}\n"


@pytest.mark.parametrize(
    "forward, init, op",
    [
        ("return torch.matmul(x, w)", "", "torch.matmul"),
        ("return x @ w", "", "@"),
        ("return torch.nn.functional.softmax(x, dim=1)", "", "torch.nn.functional.softmax"),
        ("return x.sum(dim=1)", "", ".sum()"),
        ("return x.softmax(-1)", "", ".softmax()"),
        ("return self.fc(x)", "        self.fc = nn.Linear(4, 4)", "self.fc"),
        ("return x + w", "", "tensor Add"),
        ("return torch.compile(lambda a: a)(x)", "", "torch.compile"),
        ("return getattr(torch, 'mat' + 'mul')(x, w)", "", "getattr()"),
    ],
)
def test_pytorch_compute_is_rejected_naming_the_line_and_op(forward, init, op):
    found = violations(body(forward, init))
    assert found, forward
    line = len(body(forward, init).splitlines())  # forward's statement is the last line
    assert any(v.op == op and v.line == line for v in found), [str(v) for v in found]


@pytest.mark.parametrize(
    "stmt", ["import os", "import subprocess", "from torch.nn import functional as F"]
)
def test_imports_outside_the_allowlist_are_rejected(stmt):
    found = violations(stmt + "\n" + body("return x"))
    assert [v for v in found if v.line == 1 and "allowed imports" in v.why]


def test_a_correct_triton_candidate_and_allocation_and_views_pass():
    assert violations((CANDIDATES / "good_matmul.py").read_text()) == []
    ok = body(
        "y = torch.empty_like(x).view(-1, x.shape[-1]).contiguous()\n        return y.reshape(x.shape)"
    )
    assert violations(ok) == []


def test_a_file_without_modelnew_is_rejected():
    assert [v.op for v in violations("import torch\n")] == ["ModelNew"]
