"""Every front-end op lowering (issue #19): for a small task of each template (and each
variant of lower_more's: reversed and middle-dim scans, cumprod, LayerNorm over two dims,
the Frobenius norm, losses, the scalar broadcast, full reductions), the emitted kernel
with its hand-written tags and assertions deleted is proved from the invariants
synthesized from the task's graph, and a data-flow bug planted in it is caught (by a
synthesized invariant where the implied ones miss it: `SYNTH_ONLY`). A lowering whose spec
cannot be derived or written over its kernel's views is listed in `NOT_DERIVED` with the
reason, which the test checks is the one raised (docs/invariants.md, "Not done")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from argus_core.errors import ConfigError
from argus_core.frontend.capture import capture, capture_task
from argus_core.spec.synthesis import strength_report, synthesize
from argus_core.types import Policy
from argus_plugins.dsl.tile.frontend import TileFrontend
from argus_plugins.kernels.kernelbench.family import KernelBenchFamily, emission_spec
from argus_plugins.kernels.kernelbench.match import match, prepack_weights, split_reduction
from argus_plugins.kernels.kernelbench.tasks import load_module
from argus_plugins.verifiers.smt import SmtVerifier
from argus_plugins.verifiers.smt.synth import check, strip_hand_written
from tests.plugins.kernels.kernelbench.test_lower_more import TASKS as LOWER_MORE
from tests.plugins.verifiers.smt.conftest import target_spec

TASKS = Path(__file__).parents[3] / "kernelbench_tasks"
TEMPLATES = Path(__file__).parents[4] / "plugins" / "kernels" / "kernelbench" / "templates"


class Bmm(torch.nn.Module):
    def forward(self, a, b):
        return torch.bmm(a, b) * 2.0


class Bcast(torch.nn.Module):
    def forward(self, x, row):
        return x * row + 1.0


class LayerNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = torch.nn.LayerNorm(64)

    def forward(self, x):
        return self.ln(x)


class Mse(torch.nn.Module):
    def forward(self, a, b):
        return F.mse_loss(a, b)


class Sdpa(torch.nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


class LongSoftmax(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


class FullSum(torch.nn.Module):
    def forward(self, x, y):
        return (x * y).sum()


INLINE = {  # lower_more's templates, on small modules (no task file of theirs here)
    "bmm": (Bmm, lambda: [torch.randn(2, 16, 8), torch.randn(2, 8, 16)]),
    "bcast": (Bcast, lambda: [torch.randn(8, 16), torch.randn(16)]),
    "sdpa": (Sdpa, lambda: [torch.randn(2, 2, 16, 8) for _ in range(3)]),
    "rownorm": (LayerNorm, lambda: [torch.randn(8, 64)]),
    "lossreduce": (Mse, lambda: [torch.randn(8, 64), torch.randn(8, 64)]),
    "fullreduce": (FullSum, lambda: [torch.randn(8, 64), torch.randn(8, 64)]),
    "softmax_long": (LongSoftmax, lambda: [torch.randn(4, 20000)]),  # rows past LONG_ROW
}

# template: (task, the planted bug: (text, replacement) in the emitted source)
CASES = {
    "elementwise": ("level1/8_add_mul", ("al.load(x1.", "al.load(x2.")),
    "matmul": ("level1/3_matmul_bias_relu", ("vec0.tile(BN)[pn]", "vec0.tile(BN)[pm]")),
    "matmul_rows": (
        "level2/5_linear_gelu_softmax",
        ("a.tile(BM, BK)[pm, k]", "a.tile(BM, BK)[pm, 0]"),
    ),
    "rowprog": ("level1/12_rms_norm_rows", ("x0.tile(ROWS, BN)[pm, 0]", "x0.tile(ROWS, BN)[0, 0]")),
    "softmax": ("level1/5_row_softmax", ("x.tile(ROWS, BN)[pm, 0]", "x.tile(ROWS, BN)[0, 0]")),
    "rowreduce": ("level1/6_row_sum", ("x.tile(ROWS, BN)[pm, 0]", "x.tile(ROWS, BN)[0, 0]")),
    "midreduce": (
        "level1/15_max_over_middle_dim",
        ("x.tile(1, BR, BC)[pa, rb, pc]", "x.tile(1, BR, BC)[0, rb, pc]"),
    ),
    # (a scan's column window is matched by role only: a bug reading column tile 0 for
    # every tile is left to the correctness check; a wrong row is caught)
    "scan": ("level1/11_cumsum", ("x0.tile(ROWS, BN)[pm, cc]", "x0.tile(ROWS, BN)[0, cc]")),
    "bmm": ("bmm", ("b[pb].tile(BK, BN)[k, pn]", "b[0].tile(BK, BN)[k, pn]")),
    "bcast": ("bcast", ("al.load(row1.tile(BC)[pc])", "al.load(row1.tile(BC)[0])")),
    "sdpa": ("sdpa", ("al.load(v[b, h]", "al.load(v[0, h]")),
    "rownorm": ("rownorm", ("al.load(b.tile(BL)[c3])", "al.load(w.tile(BL)[c3])")),
    "lossreduce": ("lossreduce", ("al.load(x1.", "al.load(x0.")),
    "fullreduce": ("fullreduce", ("al.load(x1.", "al.load(x0.")),
    "softmax_long": ("softmax_long", ("x.tile(ROWS, BN)[pm, c2]", "x.tile(ROWS, BN)[0, c2]")),
    # a channel program over the channels-last `ngsc:1` view [N, 1, P, C] and its
    # per-channel vectors' `go:1` [1, C]: BatchNorm's bias loaded from its weight
    "chanprog": (
        "level1/20_rms_norm_over_channels",
        ("vec3_t = al.load(vec3[", "vec3_t = al.load(vec2["),
    ),
    # lower_more's variants: test_lower_more.TASKS by name ("lm:" + name)
    "lm:cumsum_masked": ("scan", ("al.load(x1.", "al.load(x0.")),
    # zeros then the narrowed cumsum, concatenated: element o1 reads x[r] for r < o1
    "lm:cumsum_exclusive": ("scan", ("x0.tile(ROWS, BN)[pm, cc]", "x0.tile(ROWS, BN)[0, cc]")),
    "lm:cumsum_reverse": ("scan", ("x0.tile(ROWS, BN)[pm, cc]", "x0.tile(ROWS, BN)[0, cc]")),
    "lm:cumprod_signs_zeros": (
        "scan",
        ("x0.tile(ROWS, BN)[pm, cc]", "x0.tile(ROWS, BN)[0, cc]"),
    ),
    "lm:cumsum_first_dim_reverse": (
        "scan",
        ("x0.tile(BN, ROWS)[cc, pm]", "x0.tile(BN, ROWS)[cc, 0]"),
    ),
    "lm:cumprod_middle_dim": (
        "scan",
        ("x0.tile(1, BN, ROWS)[pa, cc, pm]", "x0.tile(1, BN, ROWS)[0, cc, pm]"),
    ),
    "lm:layer_norm": ("rownorm", ("al.load(b.tile(BL)[c3])", "al.load(w.tile(BL)[c3])")),
    "lm:frobenius": ("rownorm", ("x.tile(ROWS, BL)[pr, c3])", "x.tile(ROWS, BL)[pr, 0])")),
    "lm:smooth_l1": ("lossreduce", ("al.load(x1.", "al.load(x0.")),
    "lm:kl_batchmean": ("lossreduce", ("al.load(x1.", "al.load(x0.")),
    "lm:hinge_row_vector": ("lossreduce", ("vec1.tile(BC)[c]", "vec1.tile(BC)[0]")),
    "lm:l1_norm_long_rows": ("rowlong", ("x0.tile(ROWS, BN)[pm, c2]", "x0.tile(ROWS, BN)[0, c2]")),
    "lm:log_softmax_long_rows": (
        "rowlong",
        ("x0.tile(ROWS, BN)[pm, c2]", "x0.tile(ROWS, BN)[0, c2]"),
    ),
    "lm:mean_of_softmax_minus_max": (
        "rowlong",
        ("x0.tile(ROWS, BN)[pm, c2]", "x0.tile(ROWS, BN)[0, c2]"),
    ),
    # b [K, 1] read as a [K] vector (its 1d view): the output's column of extent 1 is 0
    "lm:matvec_long_rows": ("rowlong", ("vec0.tile(BN)[c1]", "vec0.tile(BN)[0]")),
    "lm:scale_by_number": ("bcast", ("x0.tile(BR, BC)[pr, pc]", "x0.tile(BR, BC)[0, pc]")),
    "lm:einsum_rows": ("bmm", ("a.tile(BM, BK)[pm, k]", "a.tile(BM, BK)[pm, 0]")),
    "lm:triplet": ("lossreduce", ("al.load(x1.", "al.load(x0.")),
    "lm:cross_entropy": ("lossreduce", ("tg1.tile(ROWS)[r]", "tg1.tile(ROWS)[0]")),
    # triu/tril of data: the spec's reads are guarded by the diagonal; the products' reads
    # are proved (a wrong K tile caught); which elements the triangle zeroes is a value,
    # left to the correctness check (a kernel keeping the diagonal verifies)
    "lm:triu_matmul": ("bmm", ("b.tile(BK, BN)[k, pn]", "b.tile(BK, BN)[0, pn]")),
    "lm:tril_matmul": ("bmm", ("a.tile(BM, BK)[pm, k]", "a.tile(BM, BK)[pm, 0]")),
    # GroupNorm / InstanceNorm through the `gns:G` view ([N, C, *S] as [G, C/G, N, S]):
    # the spec over the view reads x[g, r, n, s] (the group's members r < C/G) and the
    # channel's weight w[g * C/G + c] (a `load_scalar`): the wrong channel's weight is
    # read only by a scalar the implied assertions do not pin
    "lm:group_norm": ("rownorm", ("al.load_scalar(w, pg * 2 + cc3)", "al.load_scalar(w, cc3)")),
    "lm:instance_norm_affine": (
        "rownorm",
        ("al.load_scalar(b, pg * 1 + cc3)", "al.load_scalar(b, (pg + 1) % 4)"),
    ),
    # windows over the merged positions of `ngsc:1` (the spec reads x at the row-major
    # position of o·stride - pad + k·dil per spatial dim, the taps bound to the kernel's
    # loop): each bug is planted in the code and in its `rows_for` ghost alike, as an
    # author writing both would, so the implied assertions (and the ghost) prove it
    "conv": (  # the first spatial dim's stride 2 taken as 1
        "level1/17_conv2d_strided_padded_dilated",
        ("* 2 + (t0 * 1 - 1)", "* 1 + (t0 * 1 - 1)"),
    ),
    "pool": (  # the first spatial dim's dilation 2 taken as 1
        "level1/21_maxpool2d_dilated_then_scale",
        ("(t0 * 2 - 1)", "(t0 * 1 - 1)"),
    ),
    "dwconv": ("level1/19_depthwise_conv1d", ("(t0 * 1 - 2)", "(t0 * 1 - 1)")),  # padding 1
}
SYNTH_ONLY = {
    "elementwise",
    "bmm",
    "sdpa",
    "rownorm",
    "lossreduce",
    "fullreduce",
    "lm:cumsum_masked",
    "lm:layer_norm",
    "lm:smooth_l1",
    "lm:kl_batchmean",
    "lm:triplet",
    "chanprog",
    "lm:group_norm",
    "lm:instance_norm_affine",
    "conv",
    "pool",
    "dwconv",
}  # the implied assertions prove the bugged kernel

# lowerings whose spec is not derived or not written over their kernel's views: the task,
# and the reason `emission_spec` gives (a regex of it)
NOT_DERIVED: dict[str, str] = {
    # (since 2026-12-03 none: level1/18, a grouped transposed conv whose output channels are
    # `deconv.weight_1 * 2`, is in WINDOW_BUGS)
}


@pytest.fixture(scope="module")
def lm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lm")
    for name, (text, _) in LOWER_MORE.items():
        (root / f"{name}.py").write_text(text)
    return root


def _capture(case: str, lm: Path):
    """The graph and the emission of case `case` (a task, lower_more's "lm:" name, or an
    INLINE module)."""
    if case.startswith("lm:"):
        path = lm / f"{case[3:]}.py"
        gm, _ = capture_task(load_module(path), path.stem)
        return gm, match(gm, path.stem)
    task = CASES[case][0] if case in CASES else case
    if task in INLINE:
        build, inputs = INLINE[task]
        gm, _ = capture(build, inputs, task)
    else:
        path = TASKS / f"{task}.py"
        gm, _ = capture_task(load_module(path), path.stem)
    return gm, match(gm, task)


def _synth_check(src: str, entry: str, tiles: dict[str, int], spec, label: str):
    """`check` of kernel `entry` of `src` (hand-written tags deleted) against `spec`, at the
    emission's first tile values and 4 warps."""
    ir = TileFrontend().parse(src, entry, label)
    pol = Policy({c.name: tiles[c.name] for c in ir.constexprs}, {"num_warps": 4})
    return check(strip_hand_written(ir), pol, spec, target_spec())


def _emission(case: str, lm: Path):
    gm, em = _capture(case, lm)
    want = CASES[case][0] if case.startswith("lm:") else case
    assert em.template == want, em.template
    return em, emission_spec(gm, em)


def _parse(em, source: str):
    ir = TileFrontend().parse(source, em.entry, f"<{em.template}>")
    tiles = {k: v[0] for k, v in em.tiles.items()}
    return ir, Policy({c.name: tiles[c.name] for c in ir.constexprs}, {"num_warps": 4})


@pytest.mark.parametrize("case", list(CASES))
def test_template_proved_and_planted_bug_caught(case, lm_dir):
    em, spec = _emission(case, lm_dir)
    ir, pol = _parse(em, em.source)
    r = check(strip_hand_written(ir), pol, spec, target_spec())
    assert r.status == "verified", r.summary
    assert r.synthesized >= 1
    old, new = CASES[case][1]
    assert old in em.source, em.source
    bad, pol = _parse(em, em.source.replace(old, new))
    rb = check(strip_hand_written(bad), pol, spec, target_spec())
    assert rb.status == "violated", rb.summary
    if case in SYNTH_ONLY:
        plain = SmtVerifier().verify(strip_hand_written(bad), pol, {}, target_spec())
        assert plain.status == "verified", plain.summary
        assert rb.counterexamples[0]["assertion"] == "synth_dataflow"


# the normalizations' statistics read through the `gns:G` view: (case, the planted bug:
# replacements in the emitted source, the line of the first) — the mean of the wrong group,
# the mean and variance over the wrong samples (row tile 0 for every program)
STATS_BUGS = [
    ("lm:group_norm", [("x[pg].tile(1, ROWS, BL)[cc1", "x[(pg + 1) % 3].tile(1, ROWS, BL)[cc1")]),
    (
        "lm:group_norm",
        [("[cc1, pr, c1]", "[cc1, 0, c1]"), ("[cc2, pr, c2]", "[cc2, 0, c2]")],
    ),
    (
        "lm:instance_norm_affine",
        [("x[pg].tile(1, ROWS, BL)[cc1", "x[(pg + 1) % 4].tile(1, ROWS, BL)[cc1")],
    ),
    (
        "lm:instance_norm_affine",
        [("[cc1, pr, c1]", "[cc1, 0, c1]"), ("[cc2, pr, c2]", "[cc2, 0, c2]")],
    ),
]


@pytest.mark.parametrize("case,bug", STATS_BUGS, ids=["gn_group", "gn_rows", "in_group", "in_rows"])
def test_norm_statistics_over_the_wrong_group_or_samples_caught(case, bug, lm_dir):
    """The statistics' loads are matched to the spec's group read (x[o0, r0, o2, r1]: the
    output's group, its members summed, the output's sample, every position summed): a
    load of another group's or another sample's elements is a synthesized counterexample
    at that load, naming the read it should make and the element it made."""
    em, spec = _emission(case, lm_dir)
    src = em.source
    for old, new in bug:
        assert old in src, old
        src = src.replace(old, new)
    line = next(i for i, t in enumerate(src.splitlines(), 1) if bug[0][1] in t)
    bad, pol = _parse(em, src)
    rb = check(strip_hand_written(bad), pol, spec, target_spec())
    assert rb.status == "violated", rb.summary
    c = rb.counterexamples[0]
    assert c["assertion"] == "synth_dataflow", c
    assert c["program_point"]["line"] == line, c["text"]
    assert "r0" in c["should_read"], c["should_read"]  # the spec's summed group read
    assert c["reads"], c


# more window bugs, each planted in the code and its ghost alike (the plain verifier proves
# every one): (task, replacements, what the synthesized counterexample says); the tasks
# here are proved as emitted first
WINDOW_BUGS = {
    "conv_padding": (  # the second dim's padding 2 taken as 1: reads past the window
        "level1/17_conv2d_strided_padded_dilated",
        [("(t1 * 2 - 2)", "(t1 * 2 - 1)")],
        r"y\[0, 0, \d+, 0\] reads x\[0, 0, \d+, 0\], where the reference reads no element",
    ),
    "conv_taps_swapped": (  # the first dim's tap taken from the second's
        "level1/17_conv2d_strided_padded_dilated",
        [("(t0 * 1 - 1)", "(t1 * 1 - 1)")],
        r"y\[\d+, 0, \d+, 0\] .*x\[",
    ),
    "conv_edge_masked": (  # the last column masked as padding (the code only: a guard)
        "level1/17_conv2d_strided_padded_dilated",
        [("(s1 < xs.shape[3])", "(s1 < xs.shape[3] - 1)")],
        r"wherever its guard holds, but at element .* the load masks an element there",
    ),
    "conv_short_loop": (  # one tap never summed
        "level1/17_conv2d_strided_padded_dilated",
        [("al.range(6)", "al.range(5)")],
        r"over 6 taps \(k1, k2\); the loops around the load read w at taps \[0, 1, 2, 3, 4\]",
    ),
    "conv_relu_taps_swapped": (  # no padding: the window read unguarded
        "level2/2_conv_relu",
        [("(t1 * 1 - 0)", "(t0 * 1 - 0)")],
        r"y\[\d+, 0, \d+, 0\] should read x\[\d+, 0, \d+, 0\] \(x\[o0, 0, .*\) but reads",
    ),
    "maxpool_stride": (  # the second dim's stride 2 taken as 1
        "level1/21_maxpool2d_dilated_then_scale",
        [("* 2 + (t1 * 2 - 1)", "* 1 + (t1 * 2 - 1)")],
        r"y\[\d+, 0, \d+, 0\] should read x\[\d+, 0, \d+, 0\]",
    ),
    "avgpool3d_stride": (
        "level1/22_avgpool3d_padded",
        [("* 2 + (t1 * 1 - 1)", "* 1 + (t1 * 1 - 1)")],
        r"should read x\[",
    ),
    "avgpool3d_short_loop": (  # the loop folds 26 of the 27 taps: the loop binding
        "level1/22_avgpool3d_padded",
        [("al.range(27)", "al.range(26)")],
        r"folds a window of 27 taps \(r0, r1, r2\); the loops folding it into the "
        r"accumulator make 26 iterations",
    ),
    # a channel bias [C, 1, 1, 1] / [C, 1, 1] through `go:1` (reshape(1, -1)): the bias
    # loaded from another per-channel vector (BatchNorm's bias; the conv's own bias)
    "conv3d_channel_bias": (
        "level2/11_conv3d_batchnorm_residual_hardswish",
        [("vec5_t = al.load(vec5[", "vec5_t = al.load(vec4[")],
        r"y\[o\] should read vec5\[0, o3\]; no load feeding the store",
    ),
    # a grouped transposed conv (2 groups: `ngsc:2`, the weight through `w_convT:2`, its
    # output channels `deconv.weight_1 * 2` divided by the view): every group reading the
    # weight of group 0, and the taps of the two dims swapped (code and ghost)
    "deconv_grouped_weight_group": (
        "level1/18_conv_transpose2d_grouped",
        [("w[kk, pz % 2]", "w[kk, 0]")],
        r"y\[0, 1, 0, 0\] should read w\[0, 1, 0, 0\] \(w\[kk // 3 \* 3 \+ kk % 3, o1, k0, "
        r"o3\] .*\) but reads w\[0, 0, 0, 0\]",
    ),
    "deconv_grouped_taps_swapped": (
        "level1/18_conv_transpose2d_grouped",
        [("(1 - t0 * 1)", "(1 - t1 * 1)")],
        r"reads x\[0, 0, 0, 0\], where the reference reads no element of x",
    ),
    "conv_softmax_channel_bias": (
        "level2/13_conv_softmax_min_over_channels",
        [("vec1_t = al.load(vec1[", "vec1_t = al.load(vec0[")],
        r"y\[o\] should read vec1\[0, r\d\]; no load feeding the store",
    ),
}


@pytest.mark.parametrize("bug", list(WINDOW_BUGS))
def test_window_bug_caught_by_a_synthesized_invariant_only(bug, lm_dir):
    """Conv and pool windows over merged positions (and a conv's channel bias [C, 1, ...]
    under `go:1`): the kernel as emitted is proved from synthesized invariants
    (hand-written tags deleted); each planted bug, which the
    implied assertions and the kernel's own `rows_for` ghost prove, is a synthesized
    counterexample saying what the output element should read."""
    task, reps, said = WINDOW_BUGS[bug]
    gm, em = _capture(task, lm_dir)
    spec = emission_spec(gm, em)
    ir, pol = _parse(em, em.source)
    r = check(strip_hand_written(ir), pol, spec, target_spec())
    assert r.status == "verified", r.summary
    src = em.source
    for old, new in reps:
        assert old in src, old
        src = src.replace(old, new)
    bad, pol = _parse(em, src)
    plain = SmtVerifier().verify(strip_hand_written(bad), pol, {}, target_spec())
    assert plain.status == "verified", plain.summary
    rb = check(strip_hand_written(bad), pol, spec, target_spec())
    assert rb.status == "violated", rb.summary
    c = rb.counterexamples[0]
    assert c["assertion"] == "synth_dataflow", c
    assert re.search(said, c["text"]), c["text"]


def test_window_spec_binds_the_taps_to_the_loop(lm_dir):
    """The conv's taps are bound through its weight's `w_conv` entry (kk: k1 = kk // 2,
    k2 = kk % 2), the pool's (no weight) through the loop folding the window into the
    accumulator; the input read's guard is asserted both ways (read only inside, and
    wherever inside)."""
    for task, taps in (
        ("level1/17_conv2d_strided_padded_dilated", "k1 = kk // 2, k2 = kk % 2"),
        ("level1/21_maxpool2d_dilated_then_scale", "r0 = kk // 3, r1 = kk % 3"),
    ):
        gm, em = _capture(task, lm_dir)
        ir, _ = _parse(em, em.source)
        syn = synthesize(strip_hand_written(ir), emission_spec(gm, em))
        assert not syn.mismatches, [m.text for m in syn.mismatches]
        assert f"y: the window's taps {taps}" in syn.pinned, syn.pinned
        assert any(p.endswith("read wherever its guard holds") for p in syn.pinned)


@pytest.mark.parametrize("case", list(NOT_DERIVED))
def test_lowering_without_a_spec_names_the_reason(case, lm_dir):
    gm, em = _capture(case, lm_dir)
    with pytest.raises((ConfigError, ValueError)) as exc:
        emission_spec(gm, em)
    assert re.search(NOT_DERIVED[case], str(exc.value)), str(exc.value)


# programs of several kernels (`match._program`): each kernel's spec is the part of the
# graph it computes (`Emission.segments`), from graph inputs and earlier kernels' buffers
# (`t<k>`, under the views the kernel launches them through) to its buffer or the output.
# A bug planted in one kernel: (task, its entry, replacements, the implied assertions
# prove it, what the synthesized counterexample says)
PROGRAM_BUGS = {
    "maxpool_stride": (  # the pool (kb_k1, reading buffer t0) with stride 1 for 2
        "level2/12_conv_maxpool",
        "kb_k1",
        [("* 2 + (t0 * 1 - 0)", "* 1 + (t0 * 1 - 0)")],  # code and ghost alike
        True,
        r"y\[0, 0, \d+, 0\] should read x\[0, 0, \d+, 0\] .* but reads x\[",
    ),
    "spatial_mean_rows": (  # the spatial mean of buffer t0, every program's from row tile 0
        "level2/14_conv_spatial_mean_subtract_tanh",
        "kb_k1",
        [("x0.tile(k1_ROWS, k1_BN)[pm, 0]).to", "x0.tile(k1_ROWS, k1_BN)[0, 0]).to")],
        False,
        r"y\[\d+, 0\] should read x0\[\d+, 0\] \(x0\[o0, o1\]\) but reads x0\[0, 0\]",
    ),
    "deconv_taps_swapped": (  # the transposed conv writing buffer t0: taps swapped
        "level2/15_convtranspose_global_avgpool_flatten_linear",
        "kb_k0",
        [("(1 - t0 * 1)", "(1 - t1 * 1)")],
        True,
        r"y\[0, 0, 0, 0\] reads x\[0, 0, 0, 0\], where the reference reads no element of x",
    ),
    "global_mean_rows": (  # the global mean of buffer t0 into t1, from row tile 0
        "level2/15_convtranspose_global_avgpool_flatten_linear",
        "kb_k1",
        [("x0.tile(k1_ROWS, k1_BN)[pm, 0]", "x0.tile(k1_ROWS, k1_BN)[0, 0]")],
        False,
        r"y\[\d+\] should read x0\[\d+, 0\] .* but reads x0\[0, 0\]",
    ),
}
PROGRAMS = sorted({task for task, *_ in PROGRAM_BUGS.values()})


@pytest.mark.parametrize("prepack", [False, True], ids=["emitted", "prepacked"])
@pytest.mark.parametrize("task", PROGRAMS)
def test_program_kernels_proved_from_their_part_of_the_graph(task, prepack, lm_dir):
    """Every kernel of a program, hand-written tags deleted, is proved from the spec of
    the part of the graph it computes; with its weights copied contiguous first (the
    family's default, `prepack_weights`) too, the copy read as the parameter under the
    copy's view; the weight copy itself from its own spec (the copy is the parameter under
    that view, element for element: `_copy_spec`)."""
    gm, em = _capture(task, lm_dir)
    if prepack:
        em = prepack_weights(em, task, gm)
    assert em.template == "program" and len(em.entries) >= 2, em.entries
    proved = copies = 0
    for entry, (template, _) in zip(em.entries, em.parts, strict=True):
        copies += template == "relayout"
        assert prepack or template != "relayout"
        spec = emission_spec(gm, em, entry)
        ir = TileFrontend().parse(em.source, entry, f"<{task}>")
        tiles = {k: v[0] for k, v in em.tiles.items()}
        pol = Policy({c.name: tiles[c.name] for c in ir.constexprs}, {"num_warps": 4})
        r = check(strip_hand_written(ir), pol, spec, target_spec())
        assert r.status == "verified", (entry, r.summary)
        assert r.synthesized >= 1, entry
        proved += 1
    assert proved == len(em.segments) + copies and len(em.segments) >= 2


@pytest.mark.parametrize("bug", list(PROGRAM_BUGS))
def test_program_kernel_bug_caught_by_a_synthesized_invariant(bug, lm_dir):
    """A data-flow bug planted in one kernel of a program is a synthesized counterexample
    of that kernel's spec (its part of the graph, reading the buffers earlier kernels
    wrote); where the implied assertions prove the bugged kernel, only it catches it."""
    task, entry, reps, implied_miss, said = PROGRAM_BUGS[bug]
    gm, em = _capture(task, lm_dir)
    spec = emission_spec(gm, em, entry)
    src = em.source
    for old, new in reps:
        assert old in src, old
        src = src.replace(old, new)
    bad = TileFrontend().parse(src, entry, f"<{task}>")
    tiles = {k: v[0] for k, v in em.tiles.items()}
    pol = Policy({c.name: tiles[c.name] for c in bad.constexprs}, {"num_warps": 4})
    plain = SmtVerifier().verify(strip_hand_written(bad), pol, {}, target_spec())
    assert (plain.status == "verified") == implied_miss, plain.summary
    rb = check(strip_hand_written(bad), pol, spec, target_spec())
    assert rb.status == "violated", rb.summary
    c = rb.counterexamples[0]
    assert c["assertion"] == "synth_dataflow", c
    assert re.search(said, c["text"]), c["text"]


def test_program_spec_reads_the_buffers(lm_dir):
    """level2/15's kernels: the transposed conv reads x and writes buffer t0, the spatial
    mean reads t0 (as rows: `rows:2`) and writes t1, the Linear reads t1 through the
    flatten ([N, C], the plan's extents) and writes the output; each spec names those
    tensors (a kernel's spec of the whole graph, or of another kernel's part, would not)."""
    gm, em = _capture("level2/15_convtranspose_global_avgpool_flatten_linear", lm_dir)
    specs = {e: emission_spec(gm, em, e) for e in em.entries}
    assert emission_spec(gm, em).outputs.keys() == {"out0"}  # the entry's: the last kernel
    got = {e: (sorted(s.names), sorted(s.outputs)) for e, s in specs.items()}
    assert got == {
        "kb_k0": (["deconv.bias", "deconv.weight", "in0", "t0"], ["t0"]),
        "kb_k1": (["t0", "t1"], ["t1"]),
        "kb_k2": (["fc.bias", "fc.weight", "out0", "t1"], ["out0"]),
    }, got
    assert specs["kb_k1"].names["t0"] == ("x0",) and specs["kb_k1"].views["t0"] == "rows:2"
    assert len(specs["kb_k2"].dims["t1"]) == 2  # the flatten's view of t1, as launched
    assert {r.tensor for r in specs["kb_k2"].outputs["out0"].reads} >= {"t1", "fc.weight"}
    assert not {r.tensor for r in specs["kb_k2"].outputs["out0"].reads} & {"in0", "t0"}


def test_weight_copy_read_as_the_parameter(lm_dir):
    """A one-kernel conv with its weight copied contiguous first (a program of the copy and
    the conv, the family's default): the conv's spec reads the parameter under the copy's
    view (`w_conv:G`), proved, and the conv bug of `CASES` is still caught by it alone;
    read as bf16 halves (`relayout_halves`), the kernel has no spec, and says so."""
    task = "level1/17_conv2d_strided_padded_dilated"
    gm, em = _capture(task, lm_dir)
    pre = prepack_weights(em, task, gm)
    assert [t for t, _ in pre.parts] == ["relayout", "conv"]
    spec = emission_spec(gm, pre)
    assert spec.names["conv.weight"] == ("w",) and spec.views["conv.weight"] == "w_conv:1"
    for src, want in (
        (pre.source, "verified"),
        (pre.source.replace(*CASES["conv"][1]), "violated"),
    ):
        ir = TileFrontend().parse(src, pre.entry, f"<{task}>")
        tiles = {k: v[0] for k, v in pre.tiles.items()}
        pol = Policy({c.name: tiles[c.name] for c in ir.constexprs}, {"num_warps": 4})
        r = check(strip_hand_written(ir), pol, spec, target_spec())
        assert r.status == want, r.summary
    assert r.counterexamples[0]["assertion"] == "synth_dataflow"
    # read as bf16 halves (`relayout_halves` first): both halves are the parameter, each
    # read at the weight's index; the halves kernel writes each from it, element for element
    halves = prepack_weights(em, task, gm, halves=True)
    assert [t for t, _ in halves.parts] == ["relayout_halves", "conv"]
    tiles = {k: v[0] for k, v in halves.tiles.items()}
    copy, conv = halves.entries
    bugs = {
        copy: ("yl[pz // 1, pz % 1].tile(k0_BK", "yl[0, pz % 1].tile(k0_BK"),  # tap 0's place
        conv: ("bl = al.load(wl[kk,", "bl = al.load(wl[0,"),  # the low half of tap 0 only
    }
    for entry in halves.entries:
        spec = emission_spec(gm, halves, entry)
        assert halves.source.count(bugs[entry][0]) == 1, bugs[entry]
        for code, want in (
            (halves.source, "verified"),
            (halves.source.replace(*bugs[entry]), "violated"),
        ):
            r = _synth_check(code, entry, tiles, spec, f"<{task}>")
            assert r.status == want, (entry, r.summary)


def test_grouped_transposed_conv_weight_copy_read_as_the_parameter(lm_dir):
    """level1/18 (2 groups) with its weight copied contiguous first: the copy is read as
    `deconv.weight` through `w_convT:2` (the parameter's dim 0 split into the input's
    channel groups), proved; every group reading group 0's weight is caught by it alone."""
    task = "level1/18_conv_transpose2d_grouped"
    gm, em = _capture(task, lm_dir)
    pre = prepack_weights(em, task, gm)
    assert [t for t, _ in pre.parts] == ["relayout", "conv"]
    spec = emission_spec(gm, pre)
    assert spec.views["deconv.weight"] == "w_convT:2" and spec.views["out0"] == "ngsc:2"
    tiles = {k: v[0] for k, v in pre.tiles.items()}
    for src, want in (
        (pre.source, "verified"),
        (pre.source.replace("w[kk, pz % 2]", "w[kk, 0]"), "violated"),
    ):
        ir = TileFrontend().parse(src, pre.entry, f"<{task}>")
        pol = Policy({c.name: tiles[c.name] for c in ir.constexprs}, {"num_warps": 4})
        r = check(strip_hand_written(ir), pol, spec, target_spec())
        assert r.status == want, r.summary
    assert r.counterexamples[0]["assertion"] == "synth_dataflow"
    plain = SmtVerifier().verify(strip_hand_written(ir), pol, {}, target_spec())
    assert plain.status == "verified", plain.summary


SPLIT_BUGS = {  # (case, kernel, (text, replacement)): each a data-flow bug in one kernel
    "partial-sums-read-x0-twice": ("fullreduce", "kb_k0", ("al.load(x1.", "al.load(x0.")),
    "normscale-reads-column-0": ("lm:frobenius", "kb_k2", ("x.tile(k2_BR, k2_BC)[pr, pc]", "x.tile(k2_BR, k2_BC)[pr, 0]")),
}  # fmt: skip


@pytest.mark.parametrize("case", ["fullreduce", "lossreduce", "lm:cross_entropy", "lm:frobenius"])
def test_split_reduction_kernels_proved_from_the_reduction(case, lm_dir):
    """A split reduction (`match.split_reduction`: partial sums, then their sum; a norm's
    division by it last), whose buffers no graph node is: each kernel, hand-written tags
    deleted, is proved from a spec cut from the graph's own (`_split_spec`): a partial
    reads the reduction's elements under its reduced variables, their sum reads the
    partials (and a cross entropy's targets it counts), the division reads the element
    and the norm."""
    gm, em = _capture(case, lm_dir)
    split = split_reduction(em, case)
    assert len(split.entries) >= 2 and not split.segments
    tiles = {k: v[0] for k, v in split.tiles.items()}
    for entry in split.entries:
        spec = emission_spec(gm, split, entry)
        r = _synth_check(split.source, entry, tiles, spec, f"<{case}>")
        assert r.status == "verified", (entry, r.summary)
        assert r.synthesized >= 1, entry
    specs = {e: emission_spec(gm, split, e) for e in split.entries}
    (last,) = specs[split.entries[1]].outputs.values()  # the sum of the partials
    assert {r.tensor for r in last.reads} >= {"t0"}


@pytest.mark.parametrize("bug", list(SPLIT_BUGS))
def test_split_reduction_bug_caught_by_a_synthesized_invariant(bug, lm_dir):
    case, entry, (old, new) = SPLIT_BUGS[bug]
    gm, em = _capture(case, lm_dir)
    split = split_reduction(em, case)
    assert split.source.count(old) == 1, old
    spec = emission_spec(gm, split, entry)
    tiles = {k: v[0] for k, v in split.tiles.items()}
    r = _synth_check(split.source.replace(old, new), entry, tiles, spec, f"<{case}>")
    assert r.status == "violated", r.summary
    assert r.counterexamples[0]["assertion"] == "synth_dataflow"


def test_program_reference_specs_per_entry(lm_dir):
    """The family gives each kernel of its (prepacked) program its spec, the weight copy
    too."""
    task = "level2/12_conv_maxpool"
    gm, em = _capture(task, lm_dir)
    fam = KernelBenchFamily()
    fam._gm, fam.emission = gm, prepack_weights(em, task, gm)
    got = {e: len(fam.reference_specs(e)) for e in fam.emission.entries}
    assert got == {"kb_k0": 1, "kb_k1": 1, "kb_k2": 1}, got  # kb_k0: the weight copy
    assert fam.reference_specs("kb_k9") == []


def test_every_lowering_is_covered_or_says_why():
    """Every lower_more task and every template is proved here or listed in NOT_DERIVED."""
    covered = {c for c in CASES if not c.startswith("lm:")} | {
        t for c, (t, _) in CASES.items() if c.startswith("lm:")
    }
    covered |= {"relayout", "relayout_halves"}  # test_weight_copy_*
    named = {c[3:] for c in [*CASES, *NOT_DERIVED] if c.startswith("lm:")}
    assert set(LOWER_MORE) <= named, sorted(set(LOWER_MORE) - named)
    templates = {p.name.removesuffix(".py.tmpl") for p in TEMPLATES.glob("*.py.tmpl")}
    # conv, pool, dwconv, midreduce, chanprog etc. here (a transposed conv in NOT_DERIVED);
    # (partials and normscale: the last kernels of a split reduction: `_split_spec`)
    # (relayout, relayout_halves: a conv's weight copied, or split into bf16 halves, by
    # match.prepack_weights: `_copy_spec`, test_weight_copy_*)
    # (sdpa_scores / sdpa_pv: a wide-head attention's program: `_sdpa_wide_spec`)
    covered |= {"partials", "normscale"}  # test_split_reduction_*
    covered |= {"sdpa_scores", "sdpa_pv"}  # test_wide_head_attention_*
    without: set[str] = set()
    assert templates - covered == without, sorted(templates - covered)


def test_strength_report_names_the_norms_scalar_channel_reads(lm_dir):
    """GroupNorm's per-channel weight and bias are `load_scalar`s: the strength report
    lists them as pinned by the synthesized assertion; with no spec, by nothing."""
    em, spec = _emission("lm:group_norm", lm_dir)
    ir, _ = _parse(em, em.source)
    ir = strip_hand_written(ir)
    rep = strength_report(ir, synthesize(ir, spec), list(spec.outputs))
    reads = {r["tensor"]: r["dims"] for r in rep["outputs"]["y"]["reads"]}
    assert [d["pinned_by"] for d in reads["w"]] == [["synthesized"]]
    assert [d["pinned_by"] for d in reads["b"]] == [["synthesized"]]
    bare = strength_report(ir, None)
    reads = {r["tensor"]: r["dims"] for r in bare["outputs"]["y"]["reads"]}
    assert [d["pinned_by"] for d in reads["w"]] == [["correctness check"]]


@pytest.mark.parametrize(
    "task, bug",
    [
        ("level1/17_conv2d_strided_padded_dilated", ("w[pz // 1, pz % 1]", "w[0, pz % 1]")),
        ("level1/18_conv_transpose2d_grouped", ("w[pz // 2, pz % 2]", "w[pz // 2, 0]")),
    ],
)
def test_weight_copy_is_proved_from_its_own_spec(task, bug, lm_dir):
    """The weight copy (`relayout`) before a conv, hand-written tags deleted: its buffer is
    the parameter under the copy's view element for element, proved; a copy that reads
    tap 0 (or group 0) for every program is a synthesized counterexample."""
    gm, em = _capture(task, lm_dir)
    pre = prepack_weights(em, task, gm)
    entry = pre.entries[0]
    spec = emission_spec(gm, pre, entry)
    (out,) = spec.outputs
    assert spec.names[out] == ("y",) and out.startswith("w")
    (param,) = [t for t in spec.names if t != out]
    assert spec.views[param] == spec.views[out] and spec.views[out].startswith("w_conv")
    tiles = {k: v[0] for k, v in pre.tiles.items()}
    assert bug[0] in pre.source
    for src, want in ((pre.source, "verified"), (pre.source.replace(*bug), "violated")):
        r = _synth_check(src, entry, tiles, spec, f"<{task}>")
        assert r.status == want, r.summary
    assert r.counterexamples[0]["assertion"] == "synth_dataflow"


class WideSdpa(torch.nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


@pytest.mark.parametrize(
    "entry, bug",
    [
        ("kb_k0", ("k[b, h].tile(k0_BT", "k[b, 0].tile(k0_BT")),  # head 0's keys
        ("kb_k1", ("v[b, h].tile(k1_BK", "v[b, 0].tile(k1_BK")),  # head 0's values
    ],
)
def test_wide_head_attention_kernels_proved_and_bug_caught(entry, bug):
    """A head dim past one tile's (`lower_more._sdpa_wide`): `sdpa_scores` writes the
    weights P to a buffer no graph node is, `sdpa_pv` multiplies them by V. Each kernel is
    proved from its step's spec (`_sdpa_wide_spec`: softmax(q kᵀ), then P @ v, derived as
    modules); a kernel reading head 0's keys or values is a synthesized counterexample."""
    shapes = [(2, 2, 16, 512), (2, 2, 24, 512), (2, 2, 24, 512)]
    gm, _ = capture(WideSdpa, lambda: [torch.randn(*s) for s in shapes], "wide")
    em = match(gm, "wide")
    assert [t for t, _ in em.parts] == ["sdpa_scores", "sdpa_pv"]
    spec = emission_spec(gm, em, entry)
    assert em.source.count(bug[0]) == 1, bug
    tiles = {k: v[0] for k, v in em.tiles.items()}
    for src, want in ((em.source, "verified"), (em.source.replace(*bug), "violated")):
        r = _synth_check(src, entry, tiles, spec, "<wide>")
        assert r.status == want, r.summary
    assert r.counterexamples[0]["assertion"] == "synth_dataflow"
