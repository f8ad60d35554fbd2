"""Forward idioms the programs' tasks use, lowered into one kernel's epilogue: a
`torch.tensor(c, device=x.device)` constant, a 0-d parameter, a parameter's view, a
`.values` field, a keepdim reduction over extents of 1, `x @ self.weight.T`; each emitted
kernel is verified."""

from __future__ import annotations

from argus_core.types import Policy
from argus_plugins.backends.mi300x.spec import MI300X
from argus_plugins.dsl.tile.frontend import TileFrontend
from argus_plugins.kernels.kernelbench import match, tasks
from argus_plugins.verifiers.smt import SmtVerifier

HEAD = "import torch\nimport torch.nn as nn\n"
CONV_CONSTANTS = (
    HEAD
    + """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 1)
        self.scale = nn.Parameter(torch.tensor(0.5))
        self.bias = nn.Parameter(torch.randn(8))

    def forward(self, x):
        x = self.conv(x) * self.scale
        x = torch.min(x, torch.tensor(0.25, device=x.device))
        return x + self.bias.view(1, -1, 1, 1)

def get_inputs():
    return [torch.randn(2, 3, 8, 8)]

def get_init_inputs():
    return []
"""
)
GEMM_FIELDS = (
    HEAD
    + """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(24, 16))

    def forward(self, x):
        x = torch.matmul(x, self.weight.T)
        x = torch.max(x, dim=1, keepdim=True).values
        x = torch.logsumexp(x, dim=1, keepdim=True)  # over one element: x itself
        return x - 1.0

def get_inputs():
    return [torch.randn(8, 16)]

def get_init_inputs():
    return []
"""
)


def _emit(tmp_path, text: str) -> match.Emission:
    from argus_core.frontend import capture_task

    (tmp_path / "level2").mkdir(exist_ok=True)
    (tmp_path / "level2" / "1_task.py").write_text(text)
    gm, _ = capture_task(tasks.load_module(tasks.resolve(tmp_path, "level2/1").path), "t")
    return match.match(gm, "level2/1")


def _verified(em: match.Emission) -> str:
    ir = TileFrontend().parse(em.source, em.entry, "<t>")
    policy = Policy({c.name: em.tiles[c.name][0] for c in ir.constexprs})
    return SmtVerifier().verify(ir, policy, {"timeout_ms": 20000}, MI300X).status


def test_constants_a_scalar_parameter_and_a_parameter_view_fuse_into_the_conv(tmp_path):
    em = _emit(tmp_path, CONV_CONSTANTS)
    assert em.template == "conv" and not em.entries
    assert "al.minimum(" in em.source and "0.25" in em.source  # torch.tensor(0.25): a constant
    scalars = [b for b in em.binding.values() if b.get("attr") == "scale"]
    assert scalars == [{"from": "param", "attr": "scale", "view": "1d"}]  # the 0-d parameter
    views = [b for b in em.binding.values() if b.get("attr") == "bias"]
    assert views == [{"from": "param", "attr": "bias", "view": "go:1"}]  # bias.view(1,-1,1,1)
    assert _verified(em) == "verified"


def test_a_transposed_parameter_and_a_values_field_lower_into_the_gemm(tmp_path):
    em = _emit(tmp_path, GEMM_FIELDS)
    assert em.template == "matmul_rows"
    assert em.binding["b"] == {"from": "param", "attr": "weight"}  # self.weight.T: [N, K]
    assert "logsumexp" not in em.source.split('"""')[-1]  # the one-element logsumexp is x
    assert _verified(em) == "verified"


def test_a_tensor_fx_made_while_tracing_is_its_number_never_a_parameter(tmp_path):
    # fx stores `torch.tensor(c)` of a Model attribute as `_tensor_constant0`, a real
    # one-element tensor (no device given: not the meta inputs'), which the Model has no
    # parameter of: the epilogue reads its number (level2/31 had no template)
    text = CONV_CONSTANTS.replace("torch.tensor(0.25, device=x.device)", "torch.tensor(0.5)")
    em = _emit(tmp_path, text)
    assert "0.5" in em.source and "_tensor_constant" not in str(em.binding)
