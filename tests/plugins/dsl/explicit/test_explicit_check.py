"""The GPU check of explicit-level kernels (`argus_core.evaluate.explicit_check`), its logic
on the CPU: a fake family whose inputs ignore the device stands in for a GPU run (no
timing: `timed_shape` is None), so what it compares, skips and reports can fail here."""

from __future__ import annotations

from typing import Any

import torch

from argus_core.evaluate.check import CheckRun
from argus_core.evaluate.explicit_check import NOT_ON_CPU, UnsupportedShape, check_on_device


class Doubling:
    """y = 2 x."""

    outputs = ("y",)

    def make_inputs(self, shape: dict[str, int], dtype: str, seed: int, device: str) -> dict:
        gen = torch.Generator().manual_seed(seed)
        return {"x": torch.randn(shape["N"], generator=gen), "y": torch.full((shape["N"],), 9.0)}

    def reference(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return {"y": 2 * inputs["x"]}

    def tolerance(self, dtype: str) -> tuple[float, float]:
        return (1e-6, 1e-6)


def _run(*shapes: dict[str, int], runner: str = "cuda") -> CheckRun:
    return CheckRun(runner=runner, dtype="fp32", shapes=shapes, trials=2, seed=0, timeout_s=10)


def _right(inputs: dict[str, Any]) -> None:
    if inputs["x"].numel() % 8:
        raise UnsupportedShape(f"N must be a multiple of 8, got {inputs['x'].numel()}")
    inputs["y"].copy_(2 * inputs["x"])


def test_a_right_kernel_passes_and_unsupported_shapes_are_named():
    rep = check_on_device(Doubling(), lambda: _right, _run({"N": 64}, {"N": 67}))
    assert rep.ok and rep.shapes == [{"N": 64}] and rep.trials == 2
    assert "not run at {'N': 67}" in rep.error and "multiple of 8" in rep.error


def test_a_wrong_kernel_fails_naming_output_and_shape():
    def wrong(inputs: dict[str, Any]) -> None:
        inputs["y"].copy_(2 * inputs["x"])
        inputs["y"][3] += 1.0

    rep = check_on_device(Doubling(), lambda: wrong, _run({"N": 64}))
    assert not rep.ok and rep.error.startswith("y wrong at {'N': 64} (seed 0)")


def test_no_runnable_shape_or_a_broken_module_fails_and_the_cpu_refuses():
    rep = check_on_device(Doubling(), lambda: _right, _run({"N": 67}))
    assert not rep.ok and rep.error.startswith("static: no checked shape")

    def broken() -> Any:
        raise SyntaxError("lowered module does not load")

    rep = check_on_device(Doubling(), broken, _run({"N": 64}))
    assert not rep.ok and "SyntaxError: lowered module does not load" in rep.error
    rep = check_on_device(Doubling(), lambda: _right, _run({"N": 64}, runner="interpret"))
    assert not rep.ok and rep.error == f"static: {NOT_ON_CPU}"
