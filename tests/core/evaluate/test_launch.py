"""launch_args binds params from tensors; load_kernel imports lowered source from a file."""

from __future__ import annotations

import pytest
import torch

from argus_core.evaluate.launch import KernelLoadError, launch_args, load_kernel
from argus_core.evaluate.reference_kernels import gemm_lowered


def test_launch_args_bind_shapes_strides_constexprs_and_grid():
    lowered = gemm_lowered({"BM": 32, "BN": 16, "BK": 16, "GROUP": 4}, "fp32")
    a = torch.empty(70, 40)
    b = torch.empty(50, 40).t()  # a transposed view: strides (1, 40)
    c = torch.empty(70, 50)
    args, grid = launch_args(lowered, {"a": a, "b": b, "c": c}, {})
    assert args[:3] == [a, b, c]
    assert args[3:6] == [70, 40, 50]  # M, K, N
    assert args[6:12] == [40, 1, 1, 40, 50, 1]
    assert args[12:] == [32, 16, 16, 4]
    assert grid == (3 * 4,)  # cdiv(70, 32) * cdiv(50, 16)


def test_explicit_constexprs_override_the_lowered_ones():
    lowered = gemm_lowered({"BM": 32, "BN": 16, "BK": 16, "GROUP": 4}, "fp32")
    t = {"a": torch.empty(64, 8), "b": torch.empty(8, 64), "c": torch.empty(64, 64)}
    args, grid = launch_args(lowered, t, {"BM": 64, "BN": 64})
    assert args[12:14] == [64, 64]
    assert grid == (1,)


def test_missing_constexpr_and_missing_tensor_are_named():
    lowered = gemm_lowered({"BM": 32, "BN": 16, "BK": 16}, "fp32")
    t = {"a": torch.empty(4, 4), "b": torch.empty(4, 4), "c": torch.empty(4, 4)}
    with pytest.raises(KernelLoadError, match="GROUP"):
        launch_args(lowered, t, {})
    with pytest.raises(KernelLoadError, match="'b'"):
        launch_args(lowered, {"a": t["a"], "c": t["c"]}, {"GROUP": 1})


def test_bad_grid_expression_is_named():
    lowered = gemm_lowered(dtype="fp32")
    lowered.grid = "(triton.cdiv(M, BLOCK),)"
    t = {"a": torch.empty(4, 4), "b": torch.empty(4, 4), "c": torch.empty(4, 4)}
    with pytest.raises(KernelLoadError, match="BLOCK"):
        launch_args(lowered, t, {})


def test_load_kernel_writes_a_real_file_once_per_source(tmp_path):
    lowered = gemm_lowered(dtype="bf16")
    lowered.source += f"# {tmp_path.name}\n"  # a source no other test has loaded
    fn = load_kernel(lowered, tmp_path)
    assert list(fn.arg_names)[:3] == ["a", "b", "c"]
    files = list(tmp_path.glob("*/gemm.py"))
    assert len(files) == 1 and files[0].read_text() == lowered.source
    assert load_kernel(lowered, tmp_path) is fn


def test_load_kernel_rejects_wrong_name_and_wrong_params(tmp_path):
    lowered = gemm_lowered(dtype="bf16")
    lowered.name = "matmul"
    with pytest.raises(KernelLoadError, match="'matmul'.*gemm"):
        load_kernel(lowered, tmp_path)
    lowered = gemm_lowered(dtype="bf16")
    lowered.params = lowered.params[:-1]
    with pytest.raises(KernelLoadError, match="promised"):
        load_kernel(lowered, tmp_path)
