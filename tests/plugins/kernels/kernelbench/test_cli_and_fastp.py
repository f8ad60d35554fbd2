"""`argus +kernel=kernelbench ...` through the CLI, kernel.source candidates through the
pipeline's stages, and the fast_p report."""

from __future__ import annotations

from pathlib import Path

import pytest

from argus_core.config import compose
from argus_core.pipeline import Stages
from argus_core.plugin_manager import Registry, default_plugin_manager
from argus_plugins.kernels.kernelbench import fastp

TASKS = Path(__file__).parents[3] / "kernelbench_tasks"
CANDIDATES = Path(__file__).with_name("candidates")


@pytest.mark.slow
def test_cli_runs_a_task_and_tracks_it_in_sqlite(run_argus, tmp_path):
    store = tmp_path / "mlflow.db"
    proc = run_argus(
        "+kernel=kernelbench", f"kernel.path={TASKS}", "kernel.task=level1/1", "budget=1",
        "progress=off", f"tracking.uri=sqlite:///{store}",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "kernel=kernelbench" in proc.stdout and "BEST" in proc.stdout
    assert store.is_file() and store.stat().st_size > 0


def test_cli_names_the_valid_tasks_for_a_bad_one(run_argus):
    proc = run_argus("+kernel=kernelbench", f"kernel.path={TASKS}", "kernel.task=level1/404")
    assert proc.returncode == 2
    assert "unknown kernel.task 'level1/404'" in proc.stderr and "level2/1" in proc.stderr


def _evaluate_source(source: Path):
    cfg = compose(["+kernel=kernelbench", f"kernel.path={TASKS}", "kernel.task=level1/1",
                   f"kernel.source={source}", "backend=interpret", "tracking=none"])  # fmt: skip
    stages = Stages.from_config(cfg, Registry(default_plugin_manager()))
    session = Registry(default_plugin_manager()).get("planner", "baseline").create(
        cfg.planner, {"family": stages.family, "dsl": stages.dsl, "backend": stages.backend,
                      "kernel_cfg": cfg.kernel, "backend_cfg": stages.backend_cfg})  # fmt: skip
    cand = session.propose(1)[0]
    return stages.evaluate(cand, 0, None)[0], cfg


@pytest.mark.slow
def test_a_dsl_source_candidate_passes_through_every_stage():
    res, cfg = _evaluate_source(CANDIDATES / "good_dsl_matmul.py")
    assert res.ok, res.failure
    assert res.verify.status == "verified" and res.correctness.ok
    assert res.timing.estimated and res.timing.baseline_ms and res.timing.speedup


@pytest.mark.slow
def test_a_modelnew_source_candidate_is_checked_by_the_family():
    res, _ = _evaluate_source(CANDIDATES / "good_matmul.py")
    assert res.ok, res.failure
    # 5 fresh, 1 permuted and rescaled, 1 at sizes the candidate never saw
    assert res.correctness.ok and res.correctness.trials == 7
    assert res.timing.estimated and res.timing.speedup is not None


def test_a_rejected_modelnew_fails_at_the_static_stage(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        (CANDIDATES / "good_matmul.py").read_text().replace("return C", "return C.sum()")
    )
    res, _ = _evaluate_source(bad)
    assert res.failure.startswith("static: line") and ".sum()" in res.failure


def test_fast_p_counts_correct_and_faster_tasks_only():
    outs = [
        fastp.TaskOutcome("a", True, ms=1.0, torch_ms=2.0),
        fastp.TaskOutcome("b", True, ms=1.0, torch_ms=0.5),
        fastp.TaskOutcome("c", False, note="no template"),
    ]
    assert fastp.fast_p(outs, 0.0) == pytest.approx(2 / 3)
    assert fastp.fast_p(outs, 1.0) == pytest.approx(1 / 3)
    table = fastp.render(outs, 1.0)
    assert "fast_0 = 0.667" in table and "fast_1 = 0.333" in table and "ESTIMATES" in table


@pytest.mark.slow
def test_fastp_cli_reports_a_table_over_tasks(capsys, tmp_path):
    # a task the front end has no lowering for (a sort) beside one it lowers
    (tmp_path / "level1").mkdir()
    (tmp_path / "level1" / "8_add_mul.py").write_text(
        (TASKS / "level1" / "8_add_mul.py").read_text()
    )
    (tmp_path / "level1" / "90_sort.py").write_text(SORT_TASK)
    assert (
        fastp.main(
            [
                "--path",
                str(tmp_path),
                "--tasks",
                "level1/8,level1/90",
                "--budget",
                "1",
                "--trials",
                "2",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "level1/8     yes" in out and "estimated" in out
    assert "level1/90    no" in out and "no template matches" in out
    assert "fast_0 = 0.500" in out


SORT_TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.sort(x, dim=1).values


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return []
"""


@pytest.mark.slow
def test_front_end_programs_are_correct_in_the_interpreter_through_fastp(capsys):
    """Row programs (RMS norm, log_softmax), a transposed GEMM with a LeakyReLU/hardtanh
    epilogue, a Linear with erf-GELU/bias/Mish/clamp, middle-dim reductions, and GEMMs with
    a softmax or logsumexp epilogue over whole rows: each
    lowered from its captured graph, verified, and correct against the Model."""
    keys = ",".join(
        [*(f"level1/{i}" for i in range(12, 17)), *(f"level2/{i}" for i in range(4, 11))]
    )
    assert (
        fastp.main(["--path", str(TASKS), "--tasks", keys, "--budget", "1", "--trials", "1"]) == 0
    )
    out = capsys.readouterr().out
    for key in keys.split(","):
        assert f"{key:<12} yes" in out, out
    assert "fast_0 = 1.000" in out


@pytest.mark.slow
def test_convolutions_and_pooling_are_correct_in_the_interpreter_through_fastp(capsys):
    """Implicit-GEMM convolutions: Conv2d strided/padded/dilated with an asymmetric kernel,
    a grouped ConvTranspose2d with output_padding, a depthwise Conv1d, a Conv3d with
    BatchNorm3d, a residual input, a channel bias and HardSwish fused, a conv with softmax
    and min over the channels, RMS over the channels of an input, and max/avg pooling with
    stride, padding and dilation, and an argmin over a middle dim; each verified and
    correct against the Model, including its trial at sizes it never saw."""
    keys = ",".join([*(f"level1/{i}" for i in range(17, 24)), "level2/11", "level2/13"])
    assert (
        fastp.main(["--path", str(TASKS), "--tasks", keys, "--budget", "1", "--trials", "1"]) == 0
    )
    out = capsys.readouterr().out
    for key in keys.split(","):
        assert f"{key:<12} yes" in out, out


def test_a_bf16x3_run_of_convs_is_correct_in_the_interpreter_with_bf16_weight_halves():
    """A run whose fp32 dots are bf16x3 binds conv tasks to the halves form (a first kernel
    splits the weight into bf16 buffers, the conv takes three bf16 dots): in the
    interpreter, a strided/padded Conv2d and a grouped ConvTranspose2d with output_padding
    are verified and correct against the Model, trials at unseen sizes included."""
    for key in ("level1/17", "level1/18"):
        out = fastp.evaluate_task(str(TASKS), key, "interpret", 1, None, fp32_dot="bf16x3")
        assert out.correct, (key, out.note)
        assert "ieee dots" not in out.note, out.note  # no retry with IEEE dots was needed
        ok, checked = out.unseen.split("/")
        assert ok == checked and int(checked) >= 1, (key, out.unseen)


def test_scale_outside_zero_one_is_a_template_stage_error_naming_the_value():
    out = fastp.evaluate_task(str(TASKS), "level1/4", "interpret", 1, None, scale=2.0)
    assert not out.correct and out.reached == "template" and "scale=2.0" in out.note


def test_prepack_weights_is_on_by_default_off_on_request_and_checked(run_argus):
    """A conv task binds as a program whose first kernel copies the weight; with
    kernel.options.prepack_weights=false it is the conv kernel alone; any other value is a
    ConfigError naming it and the valid ones (the CLI exits 2 in its first seconds)."""
    base = ["+kernel=kernelbench", f"kernel.path={TASKS}", "kernel.task=level1/17",
            "backend=interpret", "tracking=none"]  # fmt: skip
    reg = Registry(default_plugin_manager())
    on = Stages.from_config(compose(base), reg).family
    assert on.emission.template == "program" and on.emission.parts[0][0] == "relayout"
    # a run with bf16x3 fp32 dots: the weight's bf16 halves instead, for three bf16 dots
    split = Stages.from_config(compose([*base, "kernel.fp32_dot=bf16x3"]), reg).family
    assert [t for t, _ in split.emission.parts] == ["relayout_halves", "conv"]
    off = Stages.from_config(compose([*base, "kernel.options.prepack_weights=false"]), reg)
    assert off.family.emission.template == "conv"
    proc = run_argus(*base, "kernel.options.prepack_weights=maybe")
    assert proc.returncode == 2
    assert "invalid kernel.options.prepack_weights 'maybe'; valid choices: True, False" in (
        proc.stderr
    )
