"""On a CUDA GPU: candidates run in a child process, so a hang, an illegal memory access or
an out-of-memory fails that candidate only, the next one gets a fresh CUDA context, and a
correct one is timed next to its baseline. Run on the GPU machine: `pytest -m gpu`."""

from __future__ import annotations

import pytest

from argus_core.evaluate.correctness import check_correctness
from argus_core.evaluate.reference_kernels import gemm_lowered

pytestmark = pytest.mark.gpu

TILES = {"BM": 64, "BN": 64, "BK": 32, "GROUP": 8}
RAGGED = {"M": 67, "N": 45, "K": 83}


@pytest.fixture(autouse=True)
def _needs_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")


def _gemm(edit: tuple[str, str] | None = None):
    lowered = gemm_lowered(TILES, "bf16")
    if edit:
        assert edit[0] in lowered.source
        lowered.source = lowered.source.replace(edit[0], edit[1])
    return lowered


def _check(lowered, **kw):
    return check_correctness(lowered, "gemm", [RAGGED], "bf16", 1, 0, runner="cuda", **kw)


def test_correct_kernel_passes_and_is_timed_with_its_baseline():
    report = _check(_gemm(), timing={"shape": {"M": 2048, "N": 2048, "K": 2048}, "rep_ms": 20})
    assert report.ok, report.error
    t = report.timing
    assert t["ms"] > 0 and t["check"]["ok"] and "cuBLAS (torch.matmul)" in t["baselines"]
    assert t["tflops"] > 10


def test_a_hang_fails_that_candidate_and_the_next_one_runs():
    # a barrier is a side effect: the compiler cannot drop the endless loop as it may an empty one
    hang = (
        "    pid = tl.program_id(0)\n",
        "    pid = tl.program_id(0)\n    while M > 0:\n        tl.debug_barrier()\n",
    )
    report = _check(_gemm(hang), timeout_s=20)
    assert not report.ok and report.error == "timeout after 20s"
    assert _check(_gemm()).ok  # a fresh process and CUDA context


def test_an_illegal_memory_access_fails_that_candidate_and_the_next_one_runs():
    # drop the store mask and write far past c: an illegal address on the device
    crash = ("tl.store(c + rm[:, None]", "tl.store(c + (1 << 40) + rm[:, None]")
    lowered = _gemm()
    if crash[0] not in lowered.source:
        pytest.skip("reference kernel changed; update the planted crash")
    report = _check(_gemm(crash), timeout_s=60)
    assert not report.ok and report.error
    assert _check(_gemm()).ok


def test_out_of_memory_fails_that_candidate_only():
    oom = (
        "import triton\n",
        "import triton\nimport torch\n\n_hog = torch.empty(1 << 50, dtype=torch.uint8, device='cuda')\n",
    )
    report = _check(_gemm(oom), timeout_s=60)
    assert not report.ok and ("OutOfMemory" in report.error or "out of memory" in report.error)
    assert _check(_gemm()).ok
