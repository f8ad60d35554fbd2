"""The DSL check where the kernel runs (`evaluate._check_dsl`, `worker.check_here`): the
child makes the inputs from seeds, compares there and sends back only a verdict; the
memory estimate; the chunked comparison; the fingerprint of the reference's outputs; the
re-checks at unseen sizes; the baselines by name in the pipeline's timing report."""

from __future__ import annotations

import io
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from argus_core import sandbox
from argus_core.evaluate.outputs import compare, unpack_arrays
from argus_core.frontend import capture_task
from argus_core.pipeline import _measured
from argus_plugins.kernels.kernelbench import costs, evaluate, fastp, tasks

TASKS = Path(__file__).parents[3] / "kernelbench_tasks"
needs_sandbox = pytest.mark.skipif(
    sandbox.isolation_problem() is not None, reason=f"{sandbox.isolation_problem()}"
)


@pytest.mark.parametrize("chunk", [7, 64, 1 << 25])
def test_the_chunked_comparison_gives_compares_verdict(monkeypatch, chunk):
    monkeypatch.setattr(evaluate, "CHUNK", chunk)
    gen = torch.Generator().manual_seed(0)
    ref = torch.randn(5, 9, 11, generator=gen)
    cases = [ref.clone(), ref + 1e-6, ref.clone(), ref.clone(), ref[:4]]
    cases[2][3, 4, 5] += 0.5  # one wrong element
    cases[3][1, 2, 3] = float("nan")  # one element never written
    for out in cases:
        got = evaluate.compare_on_device(out, ref, 1e-4, 1e-4)
        want = compare(out, ref, 1e-4, 1e-4)
        assert got[0] == want[0]
        assert got[1] == pytest.approx(want[1]) or (math.isinf(got[1]) and math.isinf(want[1]))
        assert got[3] == want[3]  # the same message: count, first index, values
    assert "first at [3, 4, 5]" in evaluate.compare_on_device(cases[2], ref, 1e-4, 1e-4)[3]


def test_the_fingerprint_sees_one_changed_element_and_a_moved_one(monkeypatch):
    monkeypatch.setattr(evaluate, "CHUNK", 16)
    x = torch.randn(100)
    base = evaluate.fingerprint([x])
    assert evaluate.fingerprint([x.clone()]) == base
    y = x.clone()
    y[37] += 1.0
    assert evaluate.fingerprint([y]) != base
    swapped = x.clone()
    swapped[[3, 90]] = swapped[[90, 3]]  # same sum, other positions
    assert evaluate.fingerprint([swapped]) != base


def test_the_memory_estimate_counts_inputs_params_and_the_live_intermediates(tmp_path):
    task = tmp_path / "level1" / "1_chain.py"
    task.parent.mkdir()
    task.write_text(
        "import torch\nimport torch.nn as nn\n"
        "class Model(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(64, 32)\n"
        "    def forward(self, x):\n        return torch.relu(self.fc(x)) * 2\n"
        "def get_inputs():\n    return [torch.randn(1000, 64)]\n"
        "def get_init_inputs():\n    return []\n"
    )
    gm, _ = capture_task(tasks.load_module(task))
    mem = costs.memory_estimate(gm)
    assert mem["inputs"] == 1000 * 64 * 4
    assert mem["params"] == (64 * 32 + 32) * 4
    assert mem["output"] == 1000 * 32 * 4
    # fc's output and relu's are alive together at most (fc's is freed after relu)
    assert mem["intermediates"] == 2 * 1000 * 32 * 4
    assert mem["peak"] == mem["inputs"] + mem["params"] + mem["intermediates"]


@needs_sandbox
def test_a_task_too_large_for_the_machine_is_reported_not_run(tmp_path):
    task = tmp_path / "level1" / "1_huge.py"
    task.parent.mkdir()
    task.write_text(  # 4 TiB of input: never allocated, the row says why
        "import torch\nimport torch.nn as nn\n"
        "class Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
        "def get_inputs():\n    return [torch.randn(1 << 20, 1 << 20)]\n"
        "def get_init_inputs():\n    return []\n"
    )
    out = fastp.evaluate_task(str(tmp_path), "level1/1", "interpret", 1, None, timeout_s=60)
    assert not out.correct and out.reached == "correctness"
    assert "memory: the check needs about" in out.note and "GiB" in out.note


@needs_sandbox
def test_a_dsl_check_sends_no_tensor_and_gets_only_a_verdict(monkeypatch):
    sent: list[dict] = []
    real = evaluate.run_worker_bytes

    def spy(module, request, runner, timeout_s, result_bytes=0, pass_fds=()):
        sent.append(torch.load(io.BytesIO(request), weights_only=False))
        out = real(module, request, runner, timeout_s, result_bytes, pass_fds)
        sent[-1]["_reply"] = out
        return out

    monkeypatch.setattr(evaluate, "run_worker_bytes", spy)
    out = fastp.evaluate_task(str(TASKS), "level2/1", "interpret", 1, None)
    assert out.correct, out.note
    assert len(sent) == 1 and sent[0]["mode"] == "check"

    def tensors(x):
        if isinstance(x, torch.Tensor):
            return 1
        if isinstance(x, dict):
            return sum(tensors(v) for v in x.values())
        if isinstance(x, list | tuple):
            return sum(tensors(v) for v in x)
        return 0

    request = {k: v for k, v in sent[0].items() if k != "_reply"}
    assert tensors(request) == 0  # seeds and the task's text, no inputs or parameters
    assert len(set(request["seeds"])) == len(request["seeds"]) == 5
    meta, arrays = unpack_arrays(sent[0]["_reply"]["stdout"])
    assert arrays == [] and meta["ok"] and meta["trials"] == 6  # 5 seeds + the permuted one
    # re-checked at two unseen size sets, each smaller than the task's and different
    assert out.unseen == "2/2"
    sizes = [u["sizes"] for u in out.unseen_sizes]
    assert sizes[0] != sizes[1]
    assert all(new < old for s in sizes for old, new in s.values())

    # the same kernel against a Model that computes something else: wrong, found there
    request["task"]["text"] += (
        "\n_forward = Model.forward\n"
        "Model.forward = lambda self, *args: _forward(self, *args) * 1.01\n"
    )
    buf = io.BytesIO()
    torch.save(request, buf)
    reply = real(evaluate.WORKER, buf.getvalue(), "interpret", 120)
    meta, _ = unpack_arrays(reply["stdout"])
    assert not meta["ok"] and "trial 0" in meta["error"] and "elements wrong" in meta["error"]


def test_the_eager_baseline_stays_baseline_ms_and_torch_compile_is_carried():
    spec = SimpleNamespace(peak=lambda dtype: 1e15, hbm_tbps=4.8)
    m = {"ms": 0.5, "flops": 1e9, "bytes": 1e6,
         "baselines": {"torch eager (Model.forward)": 1.0, "torch.compile (Model)": 0.25}}  # fmt: skip
    t = _measured(m, {}, SimpleNamespace(spec=spec))
    assert t.baseline_ms == 1.0 and t.speedup == 2.0  # eager, though compile is faster
    assert t.baselines == {"torch eager (Model.forward)": 1.0, "torch.compile (Model)": 0.25}
    assert "torch.compile (Model) 0.2500 ms" in t.model


def test_a_batch_size_of_sixteen_or_less_shrinks_and_other_small_sizes_stay():
    src = "batch_size = 16\nbatch, k = 8, 3\nBATCH = 2\nchannels = 16\nkernel_size = 3\n"
    out = tasks.scaled_source(src, 0.005)
    assert out == "batch_size = 2\nbatch, k = 2, 3\nBATCH = 2\nchannels = 16\nkernel_size = 3\n"
    assert tasks.scale_size(4096, 0.01, batch=True) == 32  # above 16: the size rule
    # a batch the size rule would floor at 16 shrinks below it (not an extent kernels divide)
    assert tasks.scale_size(128, 0.005, batch=True) == 2
    assert tasks.scale_size(640, 0.02, batch=True) == 13
    assert tasks.scale_size(128, 0.005) == 16  # the same number, not a batch
