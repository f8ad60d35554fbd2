"""Spec rules for convolution and pooling windows (issue #19): for every output element
checked, the input elements the derived spec says it reads (its bound variables
enumerated, the guard evaluated) are exactly those its gradient reaches — stride, padding,
dilation and groups included — and the weight elements likewise."""

from __future__ import annotations

import itertools

import pytest
import torch

from argus_core.ir.expr import Expr
from argus_core.spec import spec_of_module


class Wrap(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        return self.m(x)


def _reads(spec, name: str, out_index: tuple[int, ...], env: dict[str, int]) -> set[tuple]:
    o = spec.outputs["y"]
    env = {**env, **{f"o{d}": v for d, v in enumerate(out_index)}}
    bs = sorted(o.bounds.values(), key=lambda b: b.sym.name)
    ev = lambda e, m: e.evaluate(m) if isinstance(e, Expr) else e  # noqa: E731
    got: set[tuple] = set()
    for r in o.reads_of(name):
        mine = [b for b in bs if b.sym in r.bound_syms(o.bounds)]
        for vals in itertools.product(*[range(ev(b.extent, env)) for b in mine]):
            m = {**env, **{b.sym.name: v for b, v in zip(mine, vals)}}
            if r.guard is None or ev(r.guard, m):
                got.add(tuple(ev(i, m) for i in r.index))
    return got


def _env(module, x) -> dict[str, int]:
    env = {f"x_{d}": s for d, s in enumerate(x.shape)}
    for pname, p in module.named_parameters():
        env |= {f"{pname}_{d}": s for d, s in enumerate(p.shape)}
    return env


LAYERS = {
    "conv2d_strided_padded_dilated_grouped": (
        lambda: torch.nn.Conv2d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2),
        (1, 4, 9, 8),
    ),
    "conv1d_depthwise": (lambda: torch.nn.Conv1d(4, 4, 3, padding=2, groups=4), (1, 4, 7)),
    "conv3d": (lambda: torch.nn.Conv3d(2, 3, 2, stride=(1, 2, 1)), (1, 2, 4, 5, 3)),
    "conv_transpose2d_grouped": (
        lambda: torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, groups=2),
        (1, 4, 4, 5),
    ),
    "avgpool2d_padded": (lambda: torch.nn.AvgPool2d(3, stride=2, padding=1), (1, 2, 7, 6)),
    "avgpool3d": (lambda: torch.nn.AvgPool3d(2), (1, 2, 4, 4, 4)),
    "adaptive_avgpool2d": (lambda: torch.nn.AdaptiveAvgPool2d((3, 2)), (1, 2, 7, 5)),
}


@pytest.mark.parametrize("layer", list(LAYERS))
def test_window_reads_are_what_the_gradient_reaches(layer):
    make, shape = LAYERS[layer]
    torch.manual_seed(0)
    model = Wrap(make()).double()
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    spec = spec_of_module(lambda: Wrap(make()), lambda: [torch.randn(*shape)], ["x"], ["y"])
    y = model(x)
    assert tuple(y.shape) == tuple(
        s.evaluate(_env(model, x)) if isinstance(s, Expr) else s for s in spec.outputs["y"].shape
    )
    env = _env(Wrap(make()), x)
    weight = getattr(model.m, "weight", None)
    for idx in itertools.islice(itertools.product(*[range(s) for s in y.shape]), 0, None, 7):
        x.grad = None
        if weight is not None:
            weight.grad = None
        y[idx].backward(retain_graph=True)
        want = {tuple(i) for i in (x.grad != 0).nonzero().tolist()}
        assert _reads(spec, "x", idx, env) == want, (layer, idx)
        if weight is not None:
            want_w = {tuple(i) for i in (weight.grad != 0).nonzero().tolist()}
            assert _reads(spec, "m.weight", idx, env) == want_w, (layer, idx)


def test_max_pool_window_and_errors():
    spec = spec_of_module(
        lambda: Wrap(torch.nn.MaxPool2d(3, stride=2, padding=1, dilation=2)),
        lambda: [torch.randn(1, 2, 9, 9)],
        ["x"],
        ["y"],
    )
    text = spec.text()
    assert "x[o0, o1, o2 * 2 - 1 + r0 * 2, o3 * 2 - 1 + r1 * 2] if" in text
    assert "(reduce)" in text
    from argus_core.spec import CannotDerive

    with pytest.raises(CannotDerive, match="ceil_mode"):
        spec_of_module(
            lambda: Wrap(torch.nn.MaxPool2d(2, ceil_mode=True)),
            lambda: [torch.randn(1, 2, 5, 5)],
        )
