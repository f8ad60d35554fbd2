"""`timing.prepare`: a case's input sets and references built once and reused by every
policy timed at that case (what makes recording a policy space cheap), without letting one
kernel's writes into its inputs fail the kernels after it.

Run on the CPU with the GPU timer (`bench_how`) replaced by a plain loop of calls, as in
test_timing_integrity.py."""

from __future__ import annotations

import pytest

from argus_core.evaluate import timing
from argus_core.plugin_manager import Registry, default_plugin_manager

GEMM = Registry(default_plugin_manager()).get("kernel", "gemm")
SHAPE = {"M": 32, "N": 48, "K": 16}


class Counting:
    """The GEMM family, counting how often inputs and references are built."""

    def __init__(self, family):
        self.family, self.inputs, self.references = family, 0, 0

    def __getattr__(self, name):
        return getattr(self.family, name)

    def make_inputs(self, *a, **k):
        self.inputs += 1
        return self.family.make_inputs(*a, **k)

    def reference(self, inputs):
        self.references += 1
        return self.family.reference(inputs)


@pytest.fixture
def cpu_bench(monkeypatch):
    def loop(fn, warmup_ms, rep_ms, graph_below_ms=timing.SHORT_MS):
        for _ in range(5):
            fn()
        return 0.5, False  # (median ms, a graph replay's)

    monkeypatch.setattr(timing, "bench_how", loop)


def matmul(inputs):
    inputs["c"].copy_(inputs["a"] @ inputs["b"])


def measure(family, run_on, prepared):
    return timing.measure(
        family,
        run_on,
        SHAPE,
        "fp32",
        3,
        l2_bytes=1 << 14,
        with_baselines=True,
        device="cpu",
        prepared=prepared,
    )


def test_inputs_and_references_are_built_once_per_case(cpu_bench):
    fam = Counting(GEMM)
    prep = timing.prepare(fam, SHAPE, "fp32", 3, 1 << 14, device="cpu")
    sets = len(prep.sets)
    assert sets > 1 and fam.inputs == sets and fam.references == sets
    first = measure(fam, matmul, prep)
    second = measure(fam, matmul, prep)
    assert first["check"]["ok"] and second["check"]["ok"]
    assert fam.inputs == sets and fam.references == sets  # nothing rebuilt for policy 2
    # the baselines are timed with the first policy and handed to the rest as they were
    assert first["baselines"] and second["baselines"] == first["baselines"]
    assert prep.builds == 1


def test_a_wrong_kernel_still_fails_with_prepared_inputs(cpu_bench):
    prep = timing.prepare(GEMM, SHAPE, "fp32", 3, 1 << 14, device="cpu")
    assert measure(GEMM, matmul, prep)["check"]["ok"]
    bad = measure(GEMM, lambda inputs: inputs["c"].zero_(), prep)
    assert bad["ms"] is None and bad["check"]["why"].startswith("before the timed runs")
    assert measure(GEMM, matmul, prep)["check"]["ok"]  # the next policy is unaffected


def test_a_kernel_writing_into_its_inputs_is_named_and_the_sets_rebuilt(cpu_bench):
    fam = Counting(GEMM)
    prep = timing.prepare(fam, SHAPE, "fp32", 3, 1 << 14, device="cpu")

    def clobbers(inputs):
        matmul(inputs)
        inputs["a"].mul_(2.0)  # right output, then its input changed under the next kernel

    m = measure(fam, clobbers, prep)
    assert "wrote_inputs" in m and m["wrote_inputs"].endswith(": a")
    assert prep.builds == 2 and fam.references == 2 * len(prep.sets)
    after = measure(fam, matmul, prep)  # a correct kernel after it still passes
    assert after["check"]["ok"] and "wrote_inputs" not in after


def test_prepared_inputs_of_another_case_are_refused():
    prep = timing.prepare(GEMM, SHAPE, "fp32", 3, 1 << 14, device="cpu")
    with pytest.raises(ValueError, match=r"prepared inputs are for shape .*'M': 32"):
        timing.measure(
            GEMM,
            matmul,
            {"M": 64, "N": 48, "K": 16},
            "fp32",
            3,
            1 << 14,
            device="cpu",
            prepared=prep,
        )
