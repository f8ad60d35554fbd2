"""Timing integrity: every input set's outputs are re-checked after the timed runs (a kernel
right on its first call and wrong or lazy later fails), and a time faster than the device's
roofline is held back by the pipeline as `suspicious`, not counted as a win.

`measure` is run here on the CPU with the GPU timer (`bench_how`) replaced by a plain loop of
calls: what is tested is what happens to the outputs around the timed calls."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from argus_core.evaluate import timing
from argus_core.pipeline import Stages
from argus_core.plugin_manager import Registry, default_plugin_manager
from argus_core.types import Candidate, CandidateResult, CorrectnessReport, Policy

REGISTRY = Registry(default_plugin_manager())
GEMM = REGISTRY.get("kernel", "gemm")
SHAPE = {"M": 32, "N": 48, "K": 16}


@pytest.fixture
def cpu_bench(monkeypatch):
    def loop(fn, warmup_ms, rep_ms, graph_below_ms=timing.SHORT_MS):
        for _ in range(7):
            fn()
        return 0.5, False  # (median ms, a graph replay's)

    monkeypatch.setattr(timing, "bench_how", loop)


def measure(run_on):
    return timing.measure(
        GEMM, run_on, SHAPE, "fp32", 3, l2_bytes=1 << 14, with_baselines=False, device="cpu"
    )


def matmul(inputs):
    inputs["c"].copy_(inputs["a"] @ inputs["b"])


def test_a_correct_kernel_is_timed_and_its_sets_rechecked(cpu_bench):
    m = measure(matmul)
    assert m["check"]["ok"] and m["ms"] == 0.5 and m["sets"] > 1
    assert m["l2_bytes"] == 1 << 14


def test_a_kernel_right_on_its_first_calls_and_wrong_later_fails_after_the_timed_runs(cpu_bench):
    calls = []

    def decays(inputs):
        calls.append(1)
        matmul(inputs)
        if len(calls) > 8:  # every set right once, then garbage in the timed runs
            inputs["c"].mul_(1.01)

    m = measure(decays)
    assert m["ms"] is None
    assert m["check"]["why"].startswith("re-checked after the timed runs, input set ")


def test_a_kernel_that_skips_its_work_in_the_timed_runs_fails(cpu_bench):
    calls = []

    def lazy(inputs):
        calls.append(1)
        if len(calls) <= 8:  # every set done once (the untimed check), then nothing
            matmul(inputs)

    m = measure(lazy)
    assert m["ms"] is None and "NaN: never written" in m["check"]["why"]


def test_a_kernel_wrong_before_timing_is_never_timed(cpu_bench):
    m = measure(lambda inputs: inputs["c"].zero_())
    assert m["ms"] is None and m["check"]["why"].startswith("before the timed runs")


def test_above_roofline_names_a_time_no_device_reaches():
    flops = 2.0 * 4096**3
    peak = 1000e12
    assert timing.above_roofline({"ms": 1.0, "flops": flops}, peak, 4.8e12) == ""
    why = timing.above_roofline({"ms": 0.01, "flops": flops}, peak, 4.8e12)
    assert "TFLOP/s" in why and "above the device's peak 1000.0" in why
    # 1 GB in 0.1 ms is 10 TB/s: over HBM when it cannot sit in a cache, fine when it can
    big = {"ms": 0.1, "bytes": 1e9, "l2_bytes": 50 << 20}
    assert "GB/s" in timing.above_roofline(big, peak, 4.8e12)
    small = {"ms": 0.001, "bytes": 1e8, "l2_bytes": 50 << 20}  # 100 TB/s, but 100 MB
    assert timing.above_roofline(small, peak, 4.8e12) == ""
    assert timing.above_roofline({"ms": None, "flops": flops}, peak, 4.8e12) == ""


def _timed(ms: float) -> CandidateResult:
    """A candidate whose GPU check measured a 4096^3 GEMM at `ms` (cuBLAS: 0.2 ms)."""
    cand = Candidate("c0", "gemm", "", "gemm", Policy({}, {}))
    res = CandidateResult(candidate=cand)
    res.correctness = CorrectnessReport(
        ok=True,
        timing={
            "ms": ms,
            "baselines": {"cublas": 0.2},
            "flops": 2.0 * 4096**3,
            "bytes": 3 * 4096 * 4096 * 2.0,
            "tflops": 2.0 * 4096**3 / ms / 1e9,
            "gbps": 3 * 4096 * 4096 * 2.0 / ms / 1e6,
            "l2_bytes": 50 << 20,
            "check": {"ok": True, "why": ""},
        },
    )
    return res


@pytest.mark.parametrize("ms, held", [(0.25, False), (0.05, True)])
def test_the_pipeline_holds_back_a_win_faster_than_the_roofline(ms, held):
    backend = REGISTRY.get("backend", "h200")
    stages = SimpleNamespace(
        cfg=OmegaConf.create(
            {"kernel": {"shape": {"M": 4096, "N": 4096, "K": 4096}, "dtype": "bf16"}}
        ),
        family=GEMM,
        backend=backend,
    )
    res = _timed(ms)
    Stages._time(stages, res.candidate, res)
    assert res.timing is not None and res.timing.ms == ms  # the figures stay visible
    if held:  # 2.7 PFLOP/s: above every peak of the H100/H200
        assert res.failure.startswith("suspicious: ") and "not counted as a win" in res.failure
        assert not res.ok
    else:
        assert res.failure is None and res.timing.speedup == pytest.approx(0.2 / ms)


def test_a_family_sets_the_graph_replay_threshold_and_the_result_says_how_it_was_timed(
    monkeypatch,
):
    """`graph_replay_below_ms` (MoE: a layer of ~20 launches) reaches the timer (for the
    kernel here; the baselines get the same); the result says which figures are graph
    replays."""
    from argus_plugins.kernels.moe.family import MoEFamily

    seen = []

    def timer(fn, warmup_ms, rep_ms, graph_below_ms=timing.SHORT_MS):
        fn()
        seen.append(graph_below_ms)
        return 0.5, graph_below_ms > timing.SHORT_MS

    monkeypatch.setattr(timing, "bench_how", timer)
    fam = MoEFamily()
    assert fam.graph_replay_below_ms > timing.SHORT_MS
    shape = {"T": 4, "E": 4, "TOPK": 2, "H": 32, "I": 64, "RENORM": 1}

    def layer(inputs):  # the reference itself stands in for the kernel
        inputs["out"].copy_(fam.reference(inputs)["out"])

    res = timing.measure(fam, layer, shape, "bf16", 0, 0, with_baselines=False, device="cpu")
    assert res["check"]["ok"], res["check"]
    assert res["graph_replay"]["kernel"] is True
    assert seen and set(seen) == {fam.graph_replay_below_ms}
