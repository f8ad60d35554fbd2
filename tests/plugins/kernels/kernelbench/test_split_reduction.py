"""Whole-tensor reductions over many programs (`match.split_reduction`): a loss or a sum of
everything, one program on a GPU of 132 SMs (level1/94: 214 ms, eager 5.9), becomes a
program of two kernels: the template over P programs writing partial sums into a buffer,
and `partials` adding them up (a cross entropy's mean divided there by the rows it
counted). Each kernel is verified on its own, and (slow) the program matches the Model in
the interpreter, with programs that own several row blocks and programs that own none."""

from __future__ import annotations

from pathlib import Path

import pytest

from argus_core.frontend import capture_task
from argus_core.types import Policy
from argus_plugins.backends.mi300x.spec import MI300X
from argus_plugins.dsl.tile.frontend import TileFrontend
from argus_plugins.kernels.kernelbench import match, tasks
from argus_plugins.kernels.kernelbench.family import gpu_reduce_tiles
from argus_plugins.verifiers.smt import SmtVerifier
from tests.plugins.kernels.kernelbench.test_lower_more import TASKS as LOWER_MORE
from tests.plugins.kernels.kernelbench.test_lower_more import _task, interpret_plan

# name -> task source; sizes so that 8 programs of 2-row blocks get 0 to 3 blocks each, and
# rows of a few 16-column tiles and a masked tail (test_lower_more's rows are 150 to 300 wide:
# the interpreter's time goes into column tiles, not into what a split changes)
SPLIT = {
    **{k: LOWER_MORE[k][0] for k in ("cross_entropy", "hinge_row_vector")},
    "smooth_l1": _task("R = 20\nN = 50", "p, t):\n        return F.smooth_l1_loss(p, t, beta=0.5)",
                       "[torch.randn(R, N), torch.randn(R, N)]"),
    "kl_batchmean": _task(
        "R = 20\nN = 50",
        "p, t):\n        return F.kl_div(torch.log(p), t, reduction='batchmean')",
        "[torch.rand(R, N).softmax(-1), torch.rand(R, N).softmax(-1)]"),
    "triplet": _task(
        "R = 21\nD = 50", "a, p, n):\n        return self.loss(a, p, n)",
        "[torch.randn(R, D), torch.randn(R, D), torch.randn(R, D) * 0.5]",
        "        self.loss = nn.TripletMarginLoss(margin=0.5)\n"),
    "cross_entropy_ignored": _task(
        "R = 37\nK = 10", "x, y):\n        return F.cross_entropy(x, y, ignore_index=3)",
        "[torch.randn(R, K) * 3, torch.randint(0, K, (R,))]"),
    "frobenius_then_affine": _task(
        "A = 3\nB = 4\nC = 70", "x):\n        return x / torch.norm(x, p='fro') * 2.0 + 1.0",
        "[torch.randn(A, B, C)]"),
    "sum_of_a_chain": _task(
        "A = 9\nB = 5\nC = 70", "x, y):\n        return ((x - y) * x).mean()",
        "[torch.randn(A, B, C), torch.randn(A, B, C)]"),
}  # fmt: skip
PARTIALS = 8
SMALL = {
    "ROWS": 2,
    "BC": 16,
    "BP": 4,
    "BR": 16,
}  # a few row blocks a program, partials in two tiles


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("kb") / "level1"
    root.mkdir()
    for i, (name, text) in enumerate(SPLIT.items(), start=1):
        (root / f"{i}_{name}.py").write_text(text)
    return root.parent


def _path(task_dir: Path, key: str) -> Path:
    return tasks.resolve(task_dir, f"level1/{list(SPLIT).index(key) + 1}").path


def _split(task_dir: Path, key: str) -> tuple[match.Emission, match.Emission]:
    path = _path(task_dir, key)
    gm, _ = capture_task(tasks.load_module(path), path.stem)
    em = match.match(gm, path.stem)
    return em, match.split_reduction(em, path.stem, PARTIALS)


def _tiles(em: match.Emission) -> dict[str, int]:
    """The small tiles where the kernel takes them (a cross entropy's BC spans a row)."""
    out = {}
    for name, values in em.tiles.items():
        base = name.split("_", 1)[1]
        out[name] = SMALL[base] if SMALL[base] in values or base != "BC" else values[0]
    return out


def _verified(sp: match.Emission, key: str) -> None:
    tiles = _tiles(sp)
    for entry in sp.entries:
        ir = TileFrontend().parse(sp.source, entry, f"<{key}>")
        policy = Policy({c.name: tiles[c.name] for c in ir.constexprs})
        report = SmtVerifier().verify(ir, policy, {"timeout_ms": 20000}, MI300X)
        assert report.status == "verified", (entry, report.summary)


def test_x_over_its_frobenius_norm_is_squares_then_a_root_then_a_division(task_dir):
    em, sp = _split(task_dir, "frobenius_then_affine")
    assert em.template == "rownorm"  # one program over every element, unsplit
    assert [t for t, _ in sp.parts] == ["fullreduce", "partials", "normscale"]
    plan = sp.binding[match.PROGRAM]
    assert plan["buffers"] == {"t0": [PARTIALS], "t1": [1]}
    squares, root, scale = plan["launches"]
    assert squares["binding"]["y"]["name"] == "t0" and root["binding"]["p"]["name"] == "t0"
    assert root["binding"]["y"]["name"] == "t1" and scale["binding"]["n"]["name"] == "t1"
    assert scale["binding"]["y"] == {"from": "output", "view": "2d"}
    assert "al.sqrt(total)" in sp.source and "* 2.0" in sp.source  # the root, the epilogue
    _verified(sp, "frobenius")


LOSSES = [k for k in SPLIT if not k.startswith("frobenius")]


@pytest.mark.parametrize("key", LOSSES)
def test_a_whole_tensor_reduction_is_partial_sums_then_their_sum_each_verified(task_dir, key):
    em, sp = _split(task_dir, key)
    assert em.template in ("lossreduce", "fullreduce") and em.split
    assert sp.template == "program" and sp.entries == ("kb_k0", "kb_k1")
    assert [t for t, _ in sp.parts] == [em.template, "partials"]
    plan = sp.binding[match.PROGRAM]
    assert plan["buffers"] == {"t0": [PARTIALS]}
    first, last = plan["launches"]
    assert first["binding"]["y"] == {"from": "buffer", "name": "t0", "view": "1d"}
    assert last["binding"]["p"] == first["binding"]["y"]
    assert last["binding"]["y"] == {"from": "output", "view": "1d"}
    # a cross entropy's mean: the last kernel counts the rows whose target is not ignored
    counts = "tg" in last["binding"]
    assert counts == key.startswith("cross_entropy")
    assert match.library_calls(sp.source) == []
    _verified(sp, key)


def test_a_planted_partial_written_to_the_wrong_slot_is_a_counterexample(task_dir):
    _, sp = _split(task_dir, "smooth_l1")
    bad = sp.source.replace("al.store(y.tile(1)[pid]", "al.store(y.tile(1)[0]")
    assert bad != sp.source
    ir = TileFrontend().parse(bad, "kb_k0", "<planted>")
    tiles = _tiles(sp)
    policy = Policy({c.name: tiles[c.name] for c in ir.constexprs})
    report = SmtVerifier().verify(ir, policy, {"timeout_ms": 20000}, MI300X)
    assert report.status != "verified"


def test_anything_else_is_left_as_it_is(task_dir):
    root = task_dir / "level1"
    (root / "90_relu.py").write_text(_task("R = 4\nN = 8", "x):\n        return torch.relu(x)",
                                           "[torch.randn(R, N)]"))  # fmt: skip
    path = tasks.resolve(task_dir, "level1/90").path
    gm, _ = capture_task(tasks.load_module(path), "relu")
    em = match.match(gm, "relu")
    assert not em.split and match.split_reduction(em, "relu") is em


def test_gpu_tiles_of_a_reduction_take_4096_elements_a_step():
    # level1/95's [16, 4096] steps (a row-spanning BC) spilled 6882 registers' worth on sm_90
    ce = gpu_reduce_tiles({"ROWS": [16, 8, 4, 2, 1], "BC": [4096]})
    assert (ce["ROWS"][0], ce["BC"][0]) == (1, 4096)
    mse = gpu_reduce_tiles({"ROWS": [16, 8, 4, 2, 1], "BC": [128, 256, 64, 512, 32, 16]})
    assert (mse["ROWS"][0], mse["BC"][0]) == (16, 256)
    assert sorted(mse["BC"]) == [16, 32, 64, 128, 256, 512]  # the rest stay reachable


CHILD = r"""
import json, pickle, sys
import torch
from argus_core.types import LoweredKernel
from argus_plugins.kernels.kernelbench import evaluate, harness, reference, tasks
out = {}
for key, d in pickle.load(open(sys.argv[1], "rb")).items():
    mod = tasks.load_module(d["path"])
    model = reference.build_model(mod, 42, "fp32", "cpu")
    run = harness.dsl_runner([LoweredKernel.from_dict(k) for k in d["lowered"]], d["binding"],
                             {}, d["tiles"], {})
    res = []
    ins = reference.make_inputs(mod, 7, "fp32", "cpu")
    trials = [(ins, reference.run_model(model, ins))]
    other = evaluate.unseen_trial(d["path"], mod, model, 11, 42, "fp32", "cpu")
    if other is not None:
        trials.append((other.inputs, other.expected[0]))
    for x, ref in trials:
        got = run(x, torch.empty_like(ref))
        res.append([list(x[0].shape), bool(torch.allclose(got, ref, atol=1e-4, rtol=1e-4)),
                    float((got - ref).abs().max())])
    out[key] = res
print(json.dumps(out))
"""


@pytest.mark.slow
def test_split_reductions_are_correct_in_the_interpreter_at_two_sizes(task_dir, tmp_path):
    from argus_core.plugin_manager import Registry, default_plugin_manager

    reg = Registry(default_plugin_manager())
    interp, _ = reg.get("backend", "interpret").resolve(reg, {"options": {}})
    plan = {}
    for key in SPLIT:
        _, sp = _split(task_dir, key)
        tiles = _tiles(sp)
        lowered = []
        for entry in sp.entries:
            ir = TileFrontend().parse(sp.source, entry, key)
            own = {c.name: tiles[c.name] for c in ir.constexprs}
            lowered.append(interp.lower(ir, Policy(own), {"dtype": "fp32"}).to_dict())
        plan[key] = {"path": str(_path(task_dir, key)), "lowered": lowered,
                     "binding": sp.binding, "tiles": tiles}  # fmt: skip
    results = interpret_plan(CHILD, plan, tmp_path, timeout=600)
    for key in SPLIT:
        assert results[key], key
        for shape, ok, err in results[key]:
            assert ok, (key, shape, err)
