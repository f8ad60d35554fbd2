"""Specifications derived from captured PyTorch graphs: per output element, the input
elements it reads, symbolic in the shapes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from argus_core.spec import CannotDerive, spec_of_module


class _M1(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, a):
        return self.fn(a)


class _M2(_M1):
    def forward(self, a, b):
        return self.fn(a, b)


class _M3(_M1):
    def forward(self, a, b, c):
        return self.fn(a, b, c)


def derive(fn, *shapes, inputs=None, outputs=None, dims=None):
    cls = (_M1, _M2, _M3)[len(shapes) - 1]
    return spec_of_module(
        lambda: cls(fn), lambda: [torch.randn(*s) for s in shapes], inputs, outputs, dims
    )


def text(spec):
    return spec.text()


def test_matmul_contracts_k_symbolically():
    s = derive(lambda a, b: a @ b, (64, 32), (32, 48), inputs=["a", "b"], outputs=["c"])
    assert text(s) == (
        "c[o0, o1] <- a[o0, k0] for k0 < a_1 (contract); b[k0, o1] for k0 < a_1 (contract)"
    )
    assert [str(d) for d in s.outputs["c"].shape] == ["a_0", "b_1"]


def test_einsum_maps_letters_to_output_coordinates_and_contractions():
    """Each output letter an output coordinate, each other letter one contracted variable
    shared by the operands that have it; the implicit form's output is the letters seen
    once; a dim of 1 broadcasts; ellipses are refused, naming the equation."""
    s = derive(lambda a, b: torch.einsum("bijl,lk->bijk", a, b), (2, 3, 5, 7), (7, 4),
               inputs=["a", "b"], outputs=["c"])  # fmt: skip
    assert {r.text() for r in s.outputs["c"].reads} == {"a[o0, o1, o2, k0]", "b[k0, o3]"}
    assert [str(d) for d in s.outputs["c"].shape] == ["a_0", "a_1", "a_2", "b_1"]
    s = derive(lambda a, b: torch.einsum("ij,jk", a, b), (4, 6), (6, 5), inputs=["a", "b"])
    assert {r.text() for r in s.outputs["out0"].reads} == {"a[o0, k0]", "b[k0, o1]"}
    s = derive(lambda a, b: torch.einsum("ij,ij->i", a, b), (4, 6), (1, 6), inputs=["a", "b"])
    assert {r.text() for r in s.outputs["out0"].reads} == {"a[o0, k0]", "b[0, k0]"}
    with pytest.raises(CannotDerive, match=r"einsum '\.\.\.ij,jk'.*ellipses"):
        derive(lambda a, b: torch.einsum("...ij,jk", a, b), (2, 4, 6), (6, 5))


def test_triplet_margin_loss_sums_each_distance_over_its_own_rows_elements():
    """d(a, p) and d(a, n) are separate sums (a kernel reading n inside d(a, p)'s sum is
    wrong), over shared rows: one loss a row with reduction "none"."""

    class T(torch.nn.Module):
        def __init__(self, red: str):
            super().__init__()
            self.loss = torch.nn.TripletMarginLoss(margin=0.5, reduction=red)

        def forward(self, a, p, n):
            return self.loss(a, p, n)

    shapes = [torch.randn(5, 7) for _ in range(3)]
    s = spec_of_module(lambda: T("mean"), lambda: shapes, ["a", "p", "n"], ["y"])
    assert {r.text() for r in s.outputs["y"].reads} == {
        "a[r0, r1]", "p[r0, r1]", "a[r0, r2]", "n[r0, r2]"
    }  # fmt: skip
    s = spec_of_module(lambda: T("none"), lambda: shapes, ["a", "p", "n"], ["y"])
    assert {r.text() for r in s.outputs["y"].reads} == {
        "a[o0, r0]", "p[o0, r0]", "a[o0, r1]", "n[o0, r1]"
    }  # fmt: skip


def test_cross_entropy_reads_each_rows_logits_and_its_targets_logit():
    """Row r: every logit (the log-sum-exp) and x[r, y[r]] through the target's value;
    weights are refused by name."""

    class CE(torch.nn.Module):
        def __init__(self, **kw):
            super().__init__()
            self.kw = kw

        def forward(self, x, y):
            return F.cross_entropy(x, y, **self.kw)

    def inputs():
        return [torch.randn(6, 4), torch.randint(0, 4, (6,))]

    s = spec_of_module(CE, inputs, ["x", "y"], ["l"])
    got = {r.text() for r in s.outputs["l"].reads}
    assert got == {"x[r0, r1]", "x[r0, @y[r0]]", "y[r0]"}, got
    s = spec_of_module(lambda: CE(reduction="none"), inputs, ["x", "y"], ["l"])
    assert {r.text() for r in s.outputs["l"].reads} == {"x[o0, r0]", "x[o0, @y[o0]]", "y[o0]"}
    with pytest.raises(CannotDerive, match=r"cross_entropy\): weight"):
        spec_of_module(lambda: CE(weight=torch.ones(4)), inputs, ["x", "y"], ["l"])


def test_triu_of_data_guards_the_reads_by_the_diagonal():
    s = derive(lambda a, b: torch.triu(a @ b, diagonal=1), (5, 3), (3, 5), inputs=["a", "b"],
               outputs=["c"])  # fmt: skip
    assert {r.text() for r in s.outputs["c"].reads} == {
        "a[o0, k0] if o1 >= o0 + 1", "b[k0, o1] if o1 >= o0 + 1"
    }  # fmt: skip
    s = derive(lambda x: torch.tril(x), (4, 4), inputs=["x"], outputs=["y"])
    assert {r.text() for r in s.outputs["y"].reads} == {"x[o0, o1] if o1 <= o0"}


def test_cat_narrow_and_select_read_their_pieces():
    """cat: each operand's range of the dim reads it there (guarded); narrow shifts by
    its start; select drops the dim at its index; zeros read nothing."""
    s = derive(lambda a, b: torch.cat((a, b), dim=1), (2, 3), (2, 4), inputs=["a", "b"],
               outputs=["c"])  # fmt: skip
    assert {r.text() for r in s.outputs["c"].reads} == {
        "a[o0, o1] if ((o1 >= 0) & (o1 < a_1))",
        "b[o0, o1 - a_1] if ((o1 >= a_1) & (o1 < a_1 + b_1))",
    }
    s = derive(lambda x: x.narrow(1, 2, 3), (4, 6), inputs=["x"], outputs=["y"])
    assert {r.text() for r in s.outputs["y"].reads} == {"x[o0, o1 + 2]"}
    assert [str(e) for e in s.outputs["y"].shape] == ["x_0", "3"]
    s = derive(lambda x: x.select(1, -1), (4, 6), inputs=["x"], outputs=["y"])
    assert {r.text() for r in s.outputs["y"].reads} == {"x[o0, x_1 + (-1)]"}
    s = derive(lambda x: torch.cat((torch.zeros_like(x.narrow(1, 0, 1)), x), 1), (4, 6),
               inputs=["x"])  # fmt: skip
    got = {r.text() for r in s.outputs["out0"].reads}
    assert got == {"x[o0, o1 - 1] if ((o1 >= 1) & (o1 < 1 + x_1))"}, got
    s = derive(lambda x: x[:, 2:-1] + x[:, :1], (4, 6), inputs=["x"], outputs=["y"])
    assert {r.text() for r in s.outputs["y"].reads} == {"x[o0, o1 + 2]", "x[o0, 0]"}


def test_dims_name_the_shape_symbols():
    from argus_core.ir import Sym

    M, K, N = (Sym(n, "shape") for n in "MKN")
    s = derive(
        lambda a, b: a @ b, (4, 3), (3, 5), inputs=["a", "b"], dims={"a": (M, K), "b": (K, N)}
    )
    assert "k0 < K (contract)" in text(s)


def test_gqa_attention_reads_kv_head_h_div_group():
    s = derive(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
        (2, 4, 16, 8),
        (2, 2, 16, 8),
        (2, 2, 16, 8),
        inputs=["q", "k", "v"],
        outputs=["o"],
    )
    o = s.outputs["o"]
    assert {r.text() for r in o.reads} == {
        "q[o0, o1, o2, k0]",
        "k[o0, o1 // (q_1 // k_1), k1, k0]",
        "v[o0, o1 // (q_1 // k_1), k1, o3]",
    }
    assert {b.kind for b in o.bounds.values()} == {"contract"}


def test_repeat_interleave_and_logsumexp():
    def f(q, k):
        return torch.logsumexp(q @ k.repeat_interleave(2, dim=1).transpose(-1, -2), dim=-1)

    s = derive(f, (2, 4, 16, 8), (2, 2, 16, 8), inputs=["q", "k"], outputs=["lse"])
    assert "k[o0, o1 // 2, r1, k0]" in text(s) and "(reduce)" in text(s)


def test_softmax_reads_its_element_and_its_row():
    s = derive(lambda x: torch.softmax(x, dim=-1), (8, 16), inputs=["x"], outputs=["y"])
    assert text(s) == "y[o0, o1] <- x[o0, o1]; x[o0, r0] for r0 < x_1 (reduce)"


def test_broadcast_vector_and_keepdim_reduction():
    s = derive(lambda x, b: x.sum(-1, keepdim=True) * b, (8, 16), (16,), inputs=["x", "b"])
    assert {r.text() for r in s.outputs["out0"].reads} == {"x[o0, r0]", "b[o1]"}


def test_linear_module_reads_weight_rows_and_bias():
    class L(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = torch.nn.Linear(16, 8)

        def forward(self, x):
            return torch.relu(self.l(x))

    s = spec_of_module(L, lambda: [torch.randn(4, 16)], ["x"], ["y"])
    assert {r.text() for r in s.outputs["y"].reads} == {
        "x[o0, k0]",
        "l.weight[o1, k0]",
        "l.bias[o1]",
    }


def test_transpose_and_permute():
    s = derive(lambda x: x.transpose(0, 1).permute(1, 0) + x.t().t(), (3, 4), inputs=["x"])
    assert {r.text() for r in s.outputs["out0"].reads} == {"x[o0, o1]"}


def test_unsupported_op_names_itself_and_the_choices():
    with pytest.raises(CannotDerive, match=r"roll.*supported: .*matmul"):
        derive(lambda x: torch.roll(x, 1, 1), (4, 4))


def test_shape_changing_view_is_refused():
    with pytest.raises(CannotDerive, match="changes the shape"):
        derive(lambda x: x.view(2, 8), (4, 4))


def test_group_norm_reads_its_group_and_channel_parameters():
    class G(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.g = torch.nn.GroupNorm(4, 32)

        def forward(self, x):
            return self.g(x)

    s = spec_of_module(G, lambda: [torch.randn(16, 32)], ["x"], ["y"])
    got = {r.text() for r in s.outputs["y"].reads}
    assert got == {
        "x[o0, o1]",
        "x[o0, o1 // (x_1 // 4) * (x_1 // 4) + r0]",
        "g.weight[o1]",
        "g.bias[o1]",
    }


def test_instance_norm_reads_its_sample_and_channels_positions():
    """InstanceNorm (eval, no running statistics: each (sample, channel)'s own over its
    positions) reads the element, its (n, c) plane and the affine per-channel parameters;
    one that tracks running statistics reads those, as BatchNorm in eval."""

    class Inst(torch.nn.Module):
        def __init__(self, track: bool):
            super().__init__()
            self.n = torch.nn.InstanceNorm2d(8, affine=True, track_running_stats=track)

        def forward(self, x):
            return self.n(x)

    s = spec_of_module(lambda: Inst(False).eval(), lambda: [torch.randn(2, 8, 5, 6)], ["x"], ["y"])
    assert {r.text() for r in s.outputs["y"].reads} == {
        "x[o0, o1, o2, o3]",
        "x[o0, o1, r0, r1]",
        "n.weight[o1]",
        "n.bias[o1]",
    }
    s = spec_of_module(lambda: Inst(True).eval(), lambda: [torch.randn(2, 8, 5, 6)], ["x"], ["y"])
    assert {r.text() for r in s.outputs["y"].reads} == {
        "x[o0, o1, o2, o3]",
        "n.running_mean[o1]",
        "n.running_var[o1]",
        "n.weight[o1]",
        "n.bias[o1]",
    }


def test_batch_norm_eval_is_per_channel():
    class B(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = torch.nn.BatchNorm1d(8)

        def forward(self, x):
            return self.bn(x)

    s = spec_of_module(B, lambda: [torch.randn(4, 8)], ["x"], ["y"])
    assert {r.text() for r in s.outputs["y"].reads} == {
        "x[o0, o1]",
        "bn.running_mean[o1]",
        "bn.running_var[o1]",
        "bn.weight[o1]",
        "bn.bias[o1]",
    }


def test_causal_mask_becomes_a_guard():
    def f(q, k, v):
        s, skv = q.size(2), k.size(2)
        mask = torch.ones((s, skv), dtype=torch.bool, device=q.device).tril(diagonal=skv - s)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    s = derive(f, (1, 2, 4, 8), (1, 2, 6, 8), (1, 2, 6, 8), inputs=["q", "k", "v"])
    v = s.outputs["out0"].reads_of("v")[0]
    assert v.text() == "v[o0, o1, k1, o3] if k1 <= o2 + k_2 - q_2"


class _Chain(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 8)

    def forward(self, x, y):
        h = torch.relu(self.lin(x))  # the first kernel's result
        return h.sum(-1) + y  # the second kernel reads h and y


def test_segment_graph_cuts_a_kernels_part():
    """A program's kernel computes a part of the graph: from graph inputs and earlier
    kernels' results (inputs of their nodes' shapes) to its own result."""
    from argus_core.frontend.capture import capture
    from argus_core.spec import spec_of_graph
    from argus_core.spec.derive import segment_graph

    gm, _ = capture(_Chain, lambda: [torch.randn(4, 16), torch.randn(4)], "chain")
    nodes = list(gm.graph.nodes)
    x, y = (n for n in nodes if n.op == "placeholder")
    h = next(n for n in nodes if n.op != "placeholder" and "relu" in str(n.target))
    out = next(n for n in nodes if n.op == "output").args[0]
    first = spec_of_graph(segment_graph(gm, [x, y], h), ["x", "y"], ["t0"])
    assert {r.tensor for r in first.outputs["t0"].reads} == {"x", "lin.weight", "lin.bias"}
    second = spec_of_graph(segment_graph(gm, [x, y, h], out), ["x", "y", "t0"], ["out0"])
    assert text(second) == "out0[o0] <- t0[o0, r0] for r0 < t0_1 (reduce); y[o0]"
    assert len(second.dims["t0"]) == 2  # h's shape, its own symbols
    with pytest.raises(CannotDerive, match="reads graph input y"):
        segment_graph(gm, [x, h], out)  # y is no input of the kernel's
