"""The explicit GEMM's overlapping column tiles (`build(column_stride=1)`): the stride
picked per shape, each output column owned by exactly one column tile, bad strides named,
the policy knob. (The kernel itself is checked on the GPU by gluon_bench; its lowering and
sm_90 cross-compile in tests/plugins/backends/hopper.)"""

from __future__ import annotations

import math

import pytest

from argus_core.errors import PolicyError
from argus_plugins.kernels.gemm.kernel_explicit import (
    check_column_stride,
    column_tiles,
    for_policy,
)


@pytest.mark.parametrize(
    ("m", "n", "bm", "bn", "units", "ns"),
    [
        (128, 14336, 128, 128, 132, 112),  # 128 tiles of 128x112, not 112 of 128x128
        (128, 14336, 64, 256, 132, 224),  # cuBLAS's 64x224 grid
        (128, 4096, 64, 64, 132, 64),  # 128 tiles already: BN
        (4096, 4096, 128, 256, 132, 256),  # many waves: no overlap
        (128, 14336, 128, 128, 114, 128),  # an H100 PCIe's 114 SMs: 112 tiles fit
        (100, 1000, 128, 128, 132, 128),  # NS 8 would waste 15 of 16 columns loaded
        (128, 4096, 128, 128, 132, 128),  # NS 32: likewise
    ],
)
def test_column_tiles_fill_the_sms_with_at_most_one_wave(m, n, bm, bn, units, ns):
    got = column_tiles(m, n, bm, bn, units)
    assert got == ns
    assert got % 8 == 0 and 0 < got <= bn
    tiles = math.ceil(m / bm) * math.ceil(n / got)
    if got < bn:
        assert tiles <= units
    # each column j is stored by the one tile t = j // NS, at its local column j % NS < NS
    owners = [
        sum(1 for t in range(math.ceil(n / got)) if t * got <= j < t * got + got) for j in range(n)
    ]
    assert set(owners) == {1}


@pytest.mark.parametrize("ns", [0, -8, 116, 136, 256])
def test_a_column_stride_off_the_grid_or_over_bn_is_named(ns):
    with pytest.raises(ValueError, match=f"invalid NS {ns}.*multiple of 8 in 8..128"):
        check_column_stride({"BN": 128, "NS": ns})


def test_the_policy_knob_builds_the_overlapping_kernel_and_names_a_bad_stride():
    k = for_policy({"column_stride": 1}, {"BM": 128, "BN": 128, "NS": 112}, "hopper-gluon")
    assert k.consts["NS"] == 112 and [q.name for q in k.ptrs] == ["c_ptr"]
    k = for_policy({"column_stride": 1}, {"BN": 64}, "hopper-gluon")
    assert k.consts["NS"] == 64  # no NS given: the tiles do not overlap
    with pytest.raises(PolicyError, match="invalid NS 136"):
        for_policy({"column_stride": 1}, {"NS": 136}, "hopper-gluon")
    with pytest.raises(PolicyError, match="column_stride"):
        for_policy({"column_stride": 2}, {}, "hopper-gluon")
