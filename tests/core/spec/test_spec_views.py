"""A spec written over the views kernels are launched through (`argus_core.spec.views`):
each view's layout is the index map `harness._view` applies, and the spec rewritten over a
view reads, at every view element, exactly the elements the reference reads at the
tensor element it is (checked by enumeration on small shapes)."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from argus_core.ir.expr import Expr
from argus_core.spec import spec_of_module
from argus_core.spec.views import spec_over_views, view_layout
from argus_plugins.kernels.kernelbench.harness import _view

LAYOUTS = [  # (view, a tensor shape it applies to)
    ("gns:3", (2, 6, 5)),
    ("gns:2", (2, 4, 3, 5)),
    ("gns:4", (3, 4, 2, 3)),
    ("ngsc:2", (2, 4, 3, 5)),
    ("w_conv:2", (6, 3, 2, 3)),
    ("w_convT:3", (6, 2, 3)),
    ("go:2", (6,)),
    ("go:2", (6, 1, 1)),  # a conv's channel bias [C, 1, 1]
    ("n1s", (2, 3, 4)),
    ("w_dw", (4, 1, 3)),
    ("2d", (2, 3, 4)),
    ("rows:2", (2, 3, 4)),
    ("mid:1", (2, 3, 4)),
    ("1d", (2, 3)),
]


@pytest.mark.parametrize("view,shape", LAYOUTS, ids=[v for v, _ in LAYOUTS])
def test_layout_is_the_harness_view(view, shape):
    """Every element of the view the harness launches on is the tensor's element the
    layout maps its coordinate to."""
    t = torch.arange(math.prod(shape)).reshape(shape)
    v = _view(t, view)
    lay = view_layout(view, len(shape))
    assert lay is not None
    for q in itertools.product(*[range(n) for n in v.shape]):
        assert int(v[q]) == int(t[lay.source(q, shape)]), (view, q)


def test_unknown_layout_is_none():
    assert view_layout("gns:2", 1) is None  # a channel split needs [N, C, ...]
    assert view_layout("go:2", 0) is None


def test_go_of_a_channel_bias_drops_its_dims_of_one_only():
    """`go:G` is `reshape(G, -1)`: of a [C, 1, 1] bias its dims of 1 (read at 0) are in no
    piece; a read indexing such a dim elsewhere, or a dim wider than 1, is refused."""
    from argus_core.ir.expr import Sym
    from argus_core.spec import OutputSpec, Read, Spec, out_sym

    lay = view_layout("go:2", 3)
    assert lay is not None and lay.pieces == (("split", 0, 2, 0), ("split", 0, 2, 1))
    c = Sym("c", "shape")
    o0, o1 = out_sym(0), out_sym(1)
    for dims, index, ok in (
        ((c, 1, 1), (o0, 0, 0), True),
        ((c, 1, 1), (o0, o1, 0), False),  # a dim of 1 read at another coordinate
        ((c, 3, 1), (o0, 0, 0), False),  # a dim of 3 the view would drop
    ):
        y = OutputSpec("y", (c, 4), [Read("b", index)])
        spec = Spec({"y": y}, {}, params={"b": dims})
        if ok:
            over = spec_over_views(spec, {"b": "go:1"})
            assert over.outputs["y"].reads[0].text() == "b[0, o0]"
        else:
            with pytest.raises(ValueError, match="go:1 view drops dim 1, not one of extent 1"):
                spec_over_views(spec, {"b": "go:1"})
    assert view_layout("nope", 3) is None


class _Gn(torch.nn.Module):
    def __init__(self, groups: int, c: int):
        super().__init__()
        self.n = torch.nn.GroupNorm(groups, c)

    def forward(self, x):
        return self.n(x)


class _In(torch.nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.n = torch.nn.InstanceNorm2d(c, affine=True)

    def forward(self, x):
        return self.n(x)


def _ev(e, env):
    return int(e.evaluate(env)) if isinstance(e, Expr) else int(e)


def _elements(out, o, env):
    """{(tensor, element)}: what output element `o` reads, every bound variable enumerated."""
    got = set()
    names = sorted(out.bounds, key=lambda s: s.name)
    for vals in itertools.product(*[range(_ev(out.bounds[b].extent, env)) for b in names]):
        e = {
            **env,
            **{f"o{d}": x for d, x in enumerate(o)},
            **{b.name: x for b, x in zip(names, vals)},
        }
        for r in out.reads:
            if r.guard is None or _ev(r.guard, e):
                got.add((r.tensor, tuple(_ev(i, e) for i in r.index)))
    return got


class _ChanRms(torch.nn.Module):
    def forward(self, x):
        return x / x.pow(2).mean(1, keepdim=True)


NORM = {"n.weight": "1d", "n.bias": "1d"}
CASES = [  # (module, input shape, the views of the input, the output and the parameters)
    (lambda: _Gn(3, 6), (2, 6, 5), {"x": "gns:3", "y": "gns:3", **NORM}),
    (lambda: _Gn(2, 4), (2, 4, 3, 2), {"x": "gns:2", "y": "gns:2", **NORM}),
    (lambda: _Gn(1, 4), (2, 4, 3), {"x": "gns:1", "y": "gns:1", **NORM}),
    (lambda: _In(4).eval(), (2, 4, 3, 2), {"x": "gns:4", "y": "gns:4", **NORM}),
    (lambda: _In(3).eval(), (2, 3, 2, 2), {"x": "ngsc:1", "y": "ngsc:1", "n.weight": "go:1"}),
    (_ChanRms, (2, 3, 2, 2), {"x": "ngsc:1", "y": "ngsc:1"}),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_spec_over_a_split_view_reads_what_the_reference_reads(case):
    build, shape, views = CASES[case]
    spec = spec_of_module(build, lambda: [torch.randn(*shape)], ["x"], ["y"])
    over = spec_over_views(spec, views)
    g = int(views["x"].split(":")[1])
    env = {f"x_{d}": n for d, n in enumerate(shape)}
    env[f"x_1_over{g}"] = shape[1] // g
    lay = view_layout(views["x"], len(shape))
    assert lay is not None
    vshape = tuple(_ev(n, env) for n in over.outputs["y"].shape)
    assert vshape == tuple(_view(torch.empty(shape), views["x"]).shape)
    assert tuple(_ev(n, env) for n in over.dims["x"]) == vshape
    # the split of C: its own symbol for C/G (the dim itself for one group)
    split = [str(n) for n in over.dims["x"] if "x_1" in str(n)]
    assert split == [f"x_1_over{g}" if g > 1 else "x_1"]
    layouts = {t: view_layout(v, 1 if t.startswith("n.") else len(shape)) for t, v in views.items()}
    seen = 0
    for q in itertools.product(*[range(n) for n in vshape]):
        o = lay.source(q, shape)
        want = _elements(spec.outputs["y"], o, env)
        got = {
            (t, layouts[t].source(i, shape if t == "x" else (shape[1],)) if t in layouts else i)
            for t, i in _elements(over.outputs["y"], q, env)
        }
        assert got == want, (q, o)
        seen += len(got)
    assert seen > math.prod(shape)  # the statistics' reads were enumerated too


def test_group_norm_over_gns_reads_its_group_members_and_channel():
    spec = spec_of_module(lambda: _Gn(3, 6), lambda: [torch.randn(2, 6, 5)], ["x"], ["y"])
    over = spec_over_views(spec, {"x": "gns:3", "y": "gns:3", "n.weight": "1d", "n.bias": "1d"})
    assert {r.text() for r in over.outputs["y"].reads} == {
        "x[o0, o1, o2, o3]",
        "x[o0, r0, o2, r1]",  # group o0's members r0 < C/G, of sample o2, every position
        "n.weight[o0 * x_1_over3 + o1]",
        "n.bias[o0 * x_1_over3 + o1]",
    }
    extents = {b.name: str(x.extent) for b, x in over.outputs["y"].bounds.items()}
    assert extents == {"r0": "x_1_over3", "r1": "x_2"}


def test_a_view_splitting_by_another_group_count_is_refused():
    """A kernel whose view splits C into 2 groups cannot carry a GroupNorm(4)'s spec: the
    group members (o1 // (C/4)) * (C/4) + r are not a (group, member) pair of its view."""
    spec = spec_of_module(lambda: _Gn(4, 8), lambda: [torch.randn(2, 8, 5)], ["x"], ["y"])
    with pytest.raises(ValueError, match=r"its gns:2 view splits dim 1 into \(2, x_1_over2\)"):
        spec_over_views(spec, {"x": "gns:2", "y": "gns:2"})


def test_views_without_a_layout_name_the_supported_ones():
    spec = spec_of_module(lambda: _Gn(2, 4), lambda: [torch.randn(2, 4, 5)], ["x"], ["y"])
    with pytest.raises(
        ValueError, match=r"views \['xyz:2'\] are not supported; supported: .*'gns:G'"
    ):
        spec_over_views(spec, {"x": "xyz:2", "y": "xyz:2"})


class _Wrap(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        return self.m(x)


CONV = {"x": "ngsc:1", "y": "ngsc:1", "m.weight": "w_conv:1", "m.bias": "go:1"}
POOL = {"x": "ngsc:1", "y": "ngsc:1"}
WINDOWS = {  # a window module, its input shape, the views its kernel is launched on
    "conv2d_strided_padded_dilated": (
        lambda: torch.nn.Conv2d(3, 4, (3, 2), stride=(2, 1), padding=(1, 2), dilation=(1, 2)),
        (2, 3, 7, 5),
        CONV,
    ),
    "conv3d": (lambda: torch.nn.Conv3d(2, 3, 2, stride=(1, 2, 1)), (1, 2, 3, 5, 3), CONV),
    "maxpool2d_dilated": (
        lambda: torch.nn.MaxPool2d(3, stride=2, padding=1, dilation=2),
        (1, 2, 7, 8),
        POOL,
    ),
    "avgpool3d_padded": (lambda: torch.nn.AvgPool3d(3, stride=2, padding=1), (1, 2, 4, 5, 3), POOL),
    "conv1d_depthwise": (
        lambda: torch.nn.Conv1d(3, 3, 3, padding=2, groups=3),
        (2, 3, 6),
        {"x": "ngsc:1", "y": "ngsc:1", "m.weight": "w_dw", "m.bias": "go:1"},
    ),
    # G > 1 groups: the channels split (G, C/G); a transposed conv's output channels are
    # `w_1 * G` (divided by the view), its weight's dim 0 the input's channels (`w_convT:G`)
    "conv2d_grouped": (
        lambda: torch.nn.Conv2d(4, 6, 2, stride=2, padding=1, groups=2),
        (1, 4, 5, 4),
        {"x": "ngsc:2", "y": "ngsc:2", "m.weight": "w_conv:2", "m.bias": "go:2"},
    ),
    "conv_transpose2d_grouped": (
        lambda: torch.nn.ConvTranspose2d(6, 9, 3, stride=2, padding=1, output_padding=1, groups=3),
        (1, 6, 3, 2),
        {"x": "ngsc:3", "y": "ngsc:3", "m.weight": "w_convT:3", "m.bias": "go:3"},
    ),
}


@pytest.mark.parametrize("case", list(WINDOWS))
def test_a_window_over_merged_positions_reads_what_the_reference_reads(case):
    """A conv's or a pool's input position `o·stride - pad + k·dil` per spatial dim, over
    `ngsc:1` (the spatial dims one merged position): the view's entry is the row-major
    position of the per-dim entries, the output's merged position unravelled, under the
    same guard (padding), and the weight's taps through `w_conv`/`w_dw` are the taps
    row-major. At every view element, the elements it reads (taps enumerated, guard
    evaluated) mapped back through the layouts are exactly the reference's."""
    make, shape, views = WINDOWS[case]
    spec = spec_of_module(lambda: _Wrap(make()), lambda: [torch.randn(*shape)], ["x"], ["y"])
    over = spec_over_views(spec, views)
    env = {f"x_{d}": n for d, n in enumerate(shape)} | {s.name: v for s, v in spec.sizes.items()}
    env |= {f"{k}_over{g}": v // g for k, v in list(env.items()) for g in (2, 3)}  # split dims
    yshape = tuple(_ev(n, env) for n in spec.outputs["y"].shape)
    assert yshape == tuple(_Wrap(make())(torch.randn(*shape)).shape)
    shapes = {"x": shape, "y": yshape}
    shapes |= {t: tuple(_ev(n, env) for n in ds) for t, ds in spec.params.items()}
    layouts = {t: view_layout(v, len(shapes[t])) for t, v in views.items()}
    vshape = tuple(_ev(n, env) for n in over.outputs["y"].shape)
    assert vshape == tuple(_view(torch.empty(yshape), views["y"]).shape)
    x_reads = [r for r in over.outputs["y"].reads if r.tensor == "x"]
    assert len(x_reads) == 1 and x_reads[0].guard is not None or "padding" not in case
    seen = 0
    for q in itertools.product(*[range(n) for n in vshape]):
        o = layouts["y"].source(q, yshape)
        want = _elements(spec.outputs["y"], o, env)
        got = {
            (t, layouts[t].source(i, shapes[t])) for t, i in _elements(over.outputs["y"], q, env)
        }
        assert got == want, (q, o)
        seen += len(got)
    assert seen > math.prod(yshape)


def test_a_window_over_merged_positions_reads_a_row_major_position():
    """The text: Conv2d(4, 6, 3, padding=1) over `ngsc:1` reads x at the row-major
    position of (o2 // 5 - 1 + k1, o2 % 5 - 1 + k2) (the output is 5 x 5), inside the input,
    and its weight at tap k1 * 3 + k2 (the taps are read apart: no merged variable)."""

    class Conv(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c = torch.nn.Conv2d(4, 6, 3, padding=1)

        def forward(self, x):
            return self.c(x)

    spec = spec_of_module(Conv, lambda: [torch.randn(2, 4, 5, 5)], ["x"], ["y"])
    over = spec_over_views(spec, {"x": "ngsc:1", "y": "ngsc:1", "c.weight": "w_conv:1"})
    text = over.text()
    ow = "(x_3 + 2 - (c.weight_3 - 1) - 1 + 1)"  # the output's width, of the input's
    assert f"x[o0, 0, (o2 // {ow} - 1 + k1) * x_3 + o2 % {ow} - 1 + k2, k0] if" in text
    assert "c.weight[k1 * c.weight_3 + k2, 0, k0, o3] if" in text
    assert {b.name for b in over.outputs["y"].bounds} == {"k0", "k1", "k2"}
    assert over.base["x"] == spec.dims["x"] and over.views["x"] == "ngsc:1"
    sizes = {s.name: n for s, n in spec.sizes.items()}
    assert sizes == {
        "c.weight_0": 6,
        "c.weight_1": 4,
        "c.weight_2": 3,
        "c.weight_3": 3,
        "c.bias_0": 6,
    }
