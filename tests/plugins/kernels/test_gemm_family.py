"""The GEMM family's inputs, reference, counts and tolerances."""

from __future__ import annotations

import math

import pytest
import torch

from argus_core.errors import ConfigError
from argus_core.evaluate.outputs import compare
from argus_core.plugin_manager import Registry, make_plugin_manager
from argus_plugins.kernels.gemm import GemmFamily

SHAPE = {"M": 67, "N": 45, "K": 83}


def test_registered_as_gemm():
    family = Registry(make_plugin_manager(autoload=False)).get("kernel", "gemm")
    assert isinstance(family, GemmFamily)
    assert (family.name, family.entry, family.outputs) == ("gemm", "gemm", ("c",))


@pytest.mark.parametrize(
    "dtype,tdt", [("bf16", torch.bfloat16), ("fp16", torch.float16), ("fp32", torch.float32)]
)
def test_inputs_have_shapes_dtypes_and_no_zeros(dtype, tdt):
    x = GemmFamily().make_inputs(SHAPE, dtype, seed=0, device="cpu")
    assert x["a"].shape == (67, 83) and x["b"].shape == (83, 45) and x["c"].shape == (67, 45)
    assert {t.dtype for t in x.values()} == {tdt}
    assert bool((x["a"] != 0).all()) and bool((x["b"] != 0).all())


def test_inputs_are_reproducible_per_seed_and_fresh_across_seeds():
    f = GemmFamily()
    x0, x0b, x1 = (f.make_inputs(SHAPE, "bf16", s, "cpu") for s in (5, 5, 6))
    assert torch.equal(x0["a"], x0b["a"]) and torch.equal(x0["b"], x0b["b"])
    assert not torch.equal(x0["a"], x1["a"])


def test_outputs_have_unit_scale_at_any_k():
    f = GemmFamily()
    for k in (16, 4096):
        c = f.reference(f.make_inputs({"M": 64, "N": 64, "K": k}, "fp32", 0, "cpu"))["c"]
        assert 0.7 < float(c.std()) < 1.3


def test_reference_is_fp32_matmul_cast_to_the_output_dtype():
    f = GemmFamily()
    x = f.make_inputs(SHAPE, "bf16", 1, "cpu")
    ref = f.reference(x)["c"]
    assert ref.dtype == torch.bfloat16
    assert torch.equal(ref, (x["a"].float() @ x["b"].float()).bfloat16())


def test_flops_and_bytes():
    f = GemmFamily()
    assert f.flops(SHAPE) == 2 * 67 * 45 * 83
    assert f.bytes(SHAPE, "bf16") == (67 * 83 + 83 * 45 + 67 * 45) * 2
    assert f.bytes(SHAPE, "fp32") == 2 * f.bytes(SHAPE, "bf16")
    with pytest.raises(ConfigError, match="lacks"):
        f.flops({"M": 1, "N": 2})


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
def test_tolerance_passes_a_reordered_fp32_sum_and_fails_a_lost_k_block(dtype):
    f = GemmFamily()
    shape = {"M": 64, "N": 64, "K": 1024}
    x = f.make_inputs(shape, dtype, 2, "cpu")
    ref = f.reference(x)["c"]
    a, b = x["a"].float(), x["b"].float()
    # a correct kernel: fp32 partial sums over 32-wide K blocks, added in reverse order
    parts = [a[:, k : k + 32] @ b[k : k + 32] for k in range(0, 1024, 32)]
    good = sum(reversed(parts)).to(ref.dtype)
    atol, rtol = f.tolerance(dtype)
    assert compare(good, ref, atol, rtol)[0]
    # a kernel that skips the last K block
    bad = sum(parts[:-1]).to(ref.dtype)
    ok, max_abs, _, why = compare(bad, ref, atol, rtol)
    assert not ok and max_abs > 10 * atol and "elements wrong" in why


def test_nan_never_passes():
    ref = torch.ones(4, 4)
    out = ref.clone()
    out[1, 2] = float("nan")
    ok, max_abs, _, why = compare(out, ref, 1.0, 1.0)
    assert not ok and math.isinf(max_abs) and "[1, 2]" in why


def test_unknown_dtype_lists_valid_ones():
    with pytest.raises(ConfigError, match="fp8.*bf16, fp16, fp32"):
        GemmFamily().tolerance("fp8")


def test_source_reads_the_kernel_file(tmp_path):
    path = tmp_path / "kernel.py"
    path.write_text("def gemm(): ...\n")
    assert GemmFamily(path).source() == "def gemm(): ...\n"
    with pytest.raises(FileNotFoundError, match="missing.py"):
        GemmFamily(tmp_path / "missing.py").source()


def test_default_source_is_the_file_beside_the_family():
    f = GemmFamily()
    assert f.source_path.name == "kernel.py"
    assert f.source_path.parent.name == "gemm"
    if f.source_path.is_file():
        assert "def gemm" in f.source()
