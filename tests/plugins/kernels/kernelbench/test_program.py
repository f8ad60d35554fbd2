"""Programs of several DSL kernels (`match._program`): a graph one kernel cannot hold is cut
where fusion stops, each segment lowered by a template, intermediates in buffers the
launcher allocates (`harness.dsl_runner`), every kernel verified on its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from argus_core.types import Policy
from argus_plugins.backends.mi300x.spec import MI300X
from argus_plugins.dsl.tile.frontend import TileFrontend
from argus_plugins.kernels.kernelbench import fastp, harness, match, tasks
from argus_plugins.verifiers.smt import SmtVerifier

TASKS = Path(__file__).parents[3] / "kernelbench_tasks"


def _captured(key: str) -> tuple[match.Emission, object]:
    from argus_core.frontend import capture_task

    gm, _ = capture_task(tasks.load_module(tasks.resolve(TASKS, key).path), key)
    return match.match(gm, key), gm


def _verify(source: str, em: match.Emission, entry: str, key: str):
    ir = TileFrontend().parse(source, entry, f"<{key}>")
    policy = Policy({c.name: em.tiles[c.name][0] for c in ir.constexprs})
    return SmtVerifier().verify(ir, policy, {"timeout_ms": 20000}, MI300X)


def _plan(em: match.Emission) -> dict:
    return em.binding[match.PROGRAM]


def _extents(shape: list, *inputs: tuple[int, ...]) -> tuple[int, ...]:
    import torch

    return harness.buffer_shape(shape, [torch.empty(s, device="meta") for s in inputs])


def test_a_conv_then_a_spatial_mean_is_a_program_of_two_verified_kernels():
    em, _ = _captured("level2/14")  # conv -> x - mean(x, (2, 3), keepdim) -> tanh
    assert em.template == "program" and em.entries == ("kb_k0", "kb_k1")
    assert em.entry == "kb_k1"
    # each kernel's tile constants carry its index, so the planner tunes them apart
    assert set(em.tiles) == {"k0_BP", "k0_BC", "k0_BK", "k1_ROWS", "k1_BN"}
    assert "def kb_k0(" in em.source and "def kb_k1(" in em.source
    assert match.library_calls(em.source) == []
    first, second = _plan(em)["launches"]
    assert first["entry"] == "kb_k0" and second["entry"] == "kb_k1"
    # the conv writes buffer t0 (channels-last), the row program reads it as [N * C, H * W]
    assert first["binding"]["y"] == {"from": "buffer", "view": "ngsc:1", "name": "t0"}
    assert second["binding"]["x0"] == {"from": "buffer", "view": "rows:2", "name": "t0"}
    assert second["binding"]["y"] == {"from": "output", "view": "rows:2"}
    for entry in em.entries:
        report = _verify(em.source, em, entry, "level2/14")
        assert report.status == "verified", (entry, report.summary)


def test_a_planted_bug_in_one_kernel_of_a_program_is_a_counterexample():
    em, _ = _captured("level2/14")
    load = "al.load(x0.tile(k1_ROWS, k1_BN)[pm, 0])"
    assert load in em.source
    bad = em.source.replace(load, "al.load(x0.tile(k1_ROWS, k1_BN)[0, 0])")  # every program
    report = _verify(bad, em, "kb_k1", "level2/14")  # reads the first rows of the buffer
    assert report.status == "violated"
    assert _verify(bad, em, "kb_k0", "level2/14").status == "verified"  # the other is fine


def test_a_buffer_follows_the_sizes_of_each_call_through_the_convolution():
    import torch

    em, _ = _captured("level2/15")  # ConvTranspose2d(3, s2, p1) -> avgpool(1) -> flatten -> fc
    plan = _plan(em)
    assert em.entries == ("kb_k0", "kb_k1", "kb_k2")
    deconv = torch.nn.ConvTranspose2d(4, 16, 3, stride=2, padding=1)
    for n, size in ((3, 5), (2, 9)):  # the task's sizes, and others
        want = tuple(deconv(torch.randn(n, 4, size, size)).shape)
        assert _extents(plan["buffers"]["t0"], (n, 4, size, size)) == want
        assert _extents(plan["buffers"]["t1"], (n, 4, size, size)) == (n, 16, 1, 1)
    # the flatten is no kernel: the GEMM reads buffer t1 as [N, C]
    a = plan["launches"][2]["binding"]["a"]
    assert a["from"] == "buffer" and a["name"] == "t1"
    assert _extents(a["shape"], (7, 4, 5, 5)) == (7, 16)
    for entry in em.entries:
        assert _verify(em.source, em, entry, "level2/15").status == "verified", entry


def test_a_pooling_after_a_conv_reads_the_conv_buffer_through_its_channels_last_view():
    em, _ = _captured("level2/12")  # conv -> max_pool
    conv, pool = _plan(em)["launches"]
    assert conv["binding"]["y"]["name"] == "t0" and conv["binding"]["ys"]["name"] == "t0"
    assert pool["binding"]["x"] == {"from": "buffer", "view": "ngsc:1", "name": "t0"}
    assert pool["binding"]["y"] == {"from": "output", "view": "ngsc:1"}
    assert _extents(_plan(em)["buffers"]["t0"], (2, 3, 10, 10)) == (2, 8, 8, 8)


def test_a_launch_plan_naming_a_kernel_it_was_not_given_names_the_kernels_given():
    em, _ = _captured("level2/14")
    with pytest.raises(ValueError, match=r"runs \['kb_k0', 'kb_k1'\]; kernels given: \[\]"):
        harness.dsl_runner([], em.binding, {}, {}, {})


def test_a_buffer_extent_that_is_not_a_size_names_the_expression():
    with pytest.raises(ValueError, match=r"buffer extent '\(s\[0\]\[0\]\) - 9' is -7"):
        _extents(["(s[0][0]) - 9"], (2, 3))


def test_a_write_past_a_program_buffer_is_caught_by_its_guard_region():
    buf, inner = harness._guarded(10, *_cpu_f32())
    inner.fill_(1.0)
    harness._check_guards(buf, 10, "buffer t0")  # clean
    buf[harness.GUARD_ELEMS + 10] = 0.0  # one element past the end
    with pytest.raises(harness.OutOfBounds, match="outside buffer t0"):
        harness._check_guards(buf, 10, "buffer t0")


def _cpu_f32() -> tuple:
    import torch

    return torch.float32, torch.device("cpu")


@pytest.mark.slow
def test_programs_are_correct_in_the_interpreter_through_fastp(capsys):
    """A conv then a spatial-mean row program, and a transposed conv, a global average
    pool and a Linear read through a flatten view: verified, lowered, and correct against
    the Model (5 trials, the permuted one), and at sizes the search never saw."""
    keys = "level2/14,level2/15"
    assert (
        fastp.main(["--path", str(TASKS), "--tasks", keys, "--budget", "1", "--trials", "1"]) == 0
    )
    out = capsys.readouterr().out
    for key in keys.split(","):
        assert f"{key:<12} yes" in out, out


RESIDUAL_TASK = """import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 24)
    def forward(self, x):
        y = torch.mean(self.fc(x), dim=1, keepdim=True)
        return torch.nn.functional.gelu(y) + x
def get_inputs():
    return [torch.randn(8, 16)]
def get_init_inputs():
    return []
"""


def test_a_row_value_added_to_an_input_of_another_width_is_a_second_kernel(tmp_path):
    """The GEMM's row mean is [M, 1]; adding it to the [M, K] input needs rows of width K,
    not the GEMM's N: a row program reads the buffer as one value per row."""
    from argus_core.frontend import capture_task

    (tmp_path / "level2").mkdir()
    (tmp_path / "level2" / "1_residual.py").write_text(RESIDUAL_TASK)
    gm, _ = capture_task(tasks.load_module(tasks.resolve(tmp_path, "level2/1").path), "r")
    em = match.match(gm, "level2/1")
    assert em.entries == ("kb_k0", "kb_k1")
    gemm, rows = _plan(em)["launches"]
    assert gemm["binding"]["c"] == {"from": "buffer", "view": "1d", "name": "t0"}
    assert {"from": "buffer", "view": "1d", "name": "t0"} in rows["binding"].values()
    assert {"from": "input", "index": 0, "view": "2d"} in rows["binding"].values()
    assert _extents(_plan(em)["buffers"]["t0"], (5, 16)) == (5, 1)
    for entry in em.entries:
        assert _verify(em.source, em, entry, "residual").status == "verified", entry


@pytest.mark.slow
def test_the_row_value_program_is_correct_in_the_interpreter(tmp_path, capsys):
    (tmp_path / "level2").mkdir()
    (tmp_path / "level2" / "1_residual.py").write_text(RESIDUAL_TASK)
    assert (
        fastp.main(
            ["--path", str(tmp_path), "--tasks", "level2/1", "--budget", "1", "--trials", "1"]
        )
        == 0
    )
    assert f"{'level2/1':<12} yes" in capsys.readouterr().out


def test_the_cost_model_counts_each_buffer_written_once_and_read_once():
    from argus_plugins.kernels.kernelbench import costs
    from argus_plugins.kernels.kernelbench.family import KernelBenchFamily

    em, gm = _captured("level2/14")  # buffer t0: the conv's [2, 8, 6, 10] fp32 output
    family = KernelBenchFamily()
    family._gm, family.emission = gm, em
    assert family.bytes({}, "fp32") == costs.fused_bytes(gm, "fp32") + 2 * (2 * 8 * 6 * 10) * 4


def test_a_convs_weight_is_copied_contiguous_by_a_first_kernel_that_the_verifier_proves():
    """`prepack_weights`: the weight's permuted view [taps, G, C/G, OC/G] has no unit stride;
    a `relayout` kernel copies it into buffer w0, the conv reads that (no view), and both
    kernels verify. A copy that writes one block short is a counterexample."""
    em, gm = _captured("level1/18")  # ConvTranspose2d, 2 groups
    assert em.template == "conv" and em.prepack == {"w": [9, 2, 4, 4]}
    pre = match.prepack_weights(em, "level1/18", gm)
    assert pre.entries == ("kb_k0", "kb_k1") and pre.parts[0][0] == "relayout"
    first, second = _plan(pre)["launches"]
    assert first["binding"] == {
        "w": {"from": "param", "attr": "deconv.weight", "view": "w_convT:2"},
        "y": {"from": "buffer", "name": "w0"},
    }
    assert second["binding"]["w"] == {"from": "buffer", "name": "w0"}
    assert _plan(pre)["buffers"] == {"w0": [9, 2, 4, 4]}
    assert pre.shape == em.shape  # the conv's dims, not the copy's
    for entry in pre.entries:
        assert _verify(pre.source, pre, entry, "level1/18").status == "verified", entry
    short = pre.source.replace("al.cdiv(w.shape[2], k0_BK)", "al.cdiv(w.shape[2], k0_BK) - 1")
    assert short != pre.source
    assert _verify(short, pre, "kb_k0", "level1/18").status == "violated"
    # a program's conv gets its copy too; what has no conv is returned as it is
    prog, gm = _captured("level2/15")
    again = match.prepack_weights(prog, "level2/15", gm)
    assert [t for t, _ in again.parts] == ["relayout", "conv", "rowprog", "matmul"]
    plain, gm = _captured("level1/1")
    assert match.prepack_weights(plain, "level1/1", gm) is plain


def test_bf16x3_convs_take_three_bf16_dots_on_halves_split_by_a_first_kernel():
    """`prepack_weights(halves=True)` (the run's fp32 dots are bf16x3): the conv runs its
    `halves` form (a_hi*b_hi + a_hi*b_lo + a_lo*b_hi as three bf16 dots) and a
    `relayout_halves` kernel first writes the weight's bf16 halves into buffers w0, w1,
    whose dtype the plan names (the family types the tensors bound to them bf16). Both
    kernels verify; a split that writes one block short is a counterexample."""
    from argus_plugins.kernels.kernelbench.family import KernelBenchFamily

    em, gm = _captured("level1/18")  # ConvTranspose2d, 2 groups
    assert em.halves is not None and em.halves.prepack == {"wh": [9, 2, 4, 4], "wl": [9, 2, 4, 4]}
    pre = match.prepack_weights(em, "level1/18", gm, halves=True)
    assert [t for t, _ in pre.parts] == ["relayout_halves", "conv"]
    first, second = _plan(pre)["launches"]
    assert first["binding"]["yh"] == {"from": "buffer", "name": "w0"}
    assert first["binding"]["yl"] == {"from": "buffer", "name": "w1"}
    assert second["binding"]["wh"] == {"from": "buffer", "name": "w0"}
    assert "w" not in second["binding"]
    assert _plan(pre)["dtypes"] == {"w0": "bf16", "w1": "bf16"}
    kernel = pre.source.split("# ---- kernel kb_k1")[1]
    assert kernel.count("al.dot(") == 3 and "acc = al.dot(ah, bh, acc)" in kernel
    for entry in pre.entries:
        assert _verify(pre.source, pre, entry, "level1/18").status == "verified", entry
    short = pre.source.replace("al.cdiv(w.shape[2], k0_BK)", "al.cdiv(w.shape[2], k0_BK) - 1")
    assert short != pre.source
    assert _verify(short, pre, "kb_k0", "level1/18").status == "violated"
    family = KernelBenchFamily()
    family.emission = pre
    assert family.tensor_dtypes("fp32") == {"yh": "bf16", "yl": "bf16", "wh": "bf16", "wl": "bf16"}
    # without halves, or for a kernel with no halves form, the plain copy
    plain = match.prepack_weights(em, "level1/18", gm)
    assert [t for t, _ in plain.parts] == ["relayout", "conv"] and "dtypes" not in _plan(plain)
    family.emission = plain
    assert family.tensor_dtypes("fp32") == {}


def test_a_cross_compile_specializes_the_strides_the_conv_is_given():
    """A conv reads its input and writes its output channels-last ([N, G, S, C/G] views of
    [N, C, *S]: stride 1 on dim 2) and its weight copy contiguous; the weight copy reads the
    permuted weight (stride 1 on dim 0). The family says so per kernel, and the compile
    signature makes those strides the constant 1 (the runtime JIT's specialization), not
    the last dim's (which would have Triton see channels as contiguous)."""
    from argus_core.config import compose
    from argus_core.lowering.triton_compile import specialized_signature
    from argus_core.pipeline import Stages, _policy_for
    from argus_core.plugin_manager import Registry, default_plugin_manager

    cfg = compose(["+kernel=kernelbench", f"kernel.path={TASKS}", "kernel.task=level1/17",
                   "backend=h200", "tracking=none"])  # fmt: skip
    stages = Stages.from_config(cfg, Registry(default_plugin_manager()))
    family = stages.family
    assert family.emission.entries == ("kb_k0", "kb_k1")
    assert family.unit_strides("kb_k0") == {"w": 0}
    assert family.unit_strides("kb_k1") == {"x": 2, "y": 2}
    ir = TileFrontend().parse(family.source(), "kb_k1", "<level1/17>")
    policy = _policy_for(ir, Policy({k: v[0] for k, v in cfg.kernel.tiles.items()}))
    lowered = stages.backend.lower(ir, policy, stages._lowering_facts())
    dtypes = {t.name: "fp32" for t in ir.tensors}
    _, consts, _ = specialized_signature(lowered, dtypes, policy, False)
    assert consts.get("x_stride3") == 1 and "x_stride2" not in consts  # as if contiguous
    lowered.unit_stride = family.unit_strides("kb_k1")
    _, consts, _ = specialized_signature(lowered, dtypes, policy, False)
    assert consts.get("x_stride2") == 1 and consts.get("y_stride2") == 1
    assert "x_stride3" not in consts and consts.get("w_stride3") == 1


def test_a_bf16x3_conv_cross_compiles_its_halves_as_bf16_matrix_products():
    """The halves form on sm_90: the three dots take bf16 operands (no fp32 input precision
    on them), the weight halves are bf16 pointers, and the conv compiles to HGMMA without
    spills; Triton's own bf16x3 (the plain form) splits in registers per step instead."""
    from argus_core.config import compose
    from argus_core.pipeline import Stages, _policy_for, _tensor_dtypes
    from argus_core.plugin_manager import Registry, default_plugin_manager

    cfg = compose(["+kernel=kernelbench", f"kernel.path={TASKS}", "kernel.task=level1/17",
                   "backend=h200", "tracking=none", "kernel.fp32_dot=bf16x3"])  # fmt: skip
    stages = Stages.from_config(cfg, Registry(default_plugin_manager()))
    family = stages.family
    irs = [TileFrontend().parse(family.source(), e, "<level1/17>") for e in ("kb_k0", "kb_k1")]
    dtypes = _tensor_dtypes(family, "fp32", irs)
    assert dtypes["wh"] == dtypes["wl"] == dtypes["yh"] == "bf16" and dtypes["x"] == "fp32"
    policy = _policy_for(irs[1], Policy({k: v[0] for k, v in cfg.kernel.tiles.items()},
                                        {"num_warps": 4, "num_stages": 3}))  # fmt: skip
    lowered = stages.backend.lower(irs[1], policy, stages._lowering_facts())
    assert "tl.dot(ah, bh, acc_2)" in lowered.source and "input_precision" not in lowered.source
    lowered.unit_stride = family.unit_strides("kb_k1")
    rep = stages.backend.compile(lowered, dtypes, policy)
    assert rep.ok, rep.error
    assert rep.mma_count > 0 and "HGMMA" in rep.asm and not rep.spills


@pytest.mark.parametrize("groups", [1, 2, 3, 4, 16])
def test_the_stride_1_dim_of_each_view_at_any_number_of_groups(groups):
    """(dim of stride 1, rank) of a contiguous tensor through each view: channels-last
    activations on the positions, conv weights on the taps; any group count (level1/72's
    ConvTranspose3d has 4: a probe tensor the groups did not divide was refused)."""
    g = f":{groups}"
    assert harness.unit_stride_dim("ngsc" + g) == (2, 4)
    assert harness.unit_stride_dim("w_conv" + g) == (0, 4)
    assert harness.unit_stride_dim("w_convT" + g) == (0, 4)
    assert harness.unit_stride_dim("gns" + g) == (3, 4)
    assert harness.unit_stride_dim("w_dw") == (0, 2)
    assert harness.unit_stride_dim("2d") == (1, 2) and harness.unit_stride_dim(None) == (3, 4)


def test_a_view_by_the_traced_sizes_follows_them_at_other_sizes():
    """`b, c, d, h, w = x.shape; x.view(b, c, -1) ... .view(b, c, d, h, w)` (level2/38): the
    view's extents are the source's extent expressions and the rest of its elements, not
    the traced literals, so a buffer seen through it fits a trial at other sizes (the
    unseen-size trial failed: "shape '[32, 64, 131072]' is invalid")."""
    import torch
    from torch.fx.passes.shape_prop import ShapeProp

    class M(torch.nn.Module):
        def forward(self, x):
            b, c, d, h, w = x.shape
            y = torch.softmax(x.view(b, c, -1), dim=2)
            return y.view(b, c, d, h, w) + x.size(1)

    gm = torch.fx.symbolic_trace(M())
    ShapeProp(gm).propagate(torch.empty(2, 3, 4, 5, 6))
    nodes = {n.name: n for n in gm.graph.nodes}
    ext = {nodes["x"]: ["s[0][0]", 3, "s[0][2]", "s[0][3]", "s[0][4]"]}
    flat = match._view_shape_expr(nodes["view"], ext[nodes["x"]], ext.get)
    back = match._view_shape_expr(nodes["view_1"], flat, ext.get)
    s = [[7, 3, 2, 9, 4]]  # other sizes than the traced ones

    def at(exprs):
        return [eval(e, {"__builtins__": {}}, {"s": s}) if isinstance(e, str) else e for e in exprs]

    assert at(flat) == [7, 3, 2 * 9 * 4] and at(back) == [7, 3, 2, 9, 4]
    # without the sizes' source, or with a size from no traced tensor: the literal shape
    assert match._view_shape_expr(nodes["view"], ext[nodes["x"]]) == [2, 3, 120]
