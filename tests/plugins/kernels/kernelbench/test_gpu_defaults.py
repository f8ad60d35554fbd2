"""What a full-size (GPU) KernelBench run starts from: the matmul template's tiles and
warps, the policy grid reordered for them, a plain "cuda" device, and the IEEE retry of a
split fp32 dot that misses the tolerance."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from argus_core.pipeline import _first
from argus_plugins.kernels.kernelbench import fastp, match
from argus_plugins.kernels.kernelbench.family import (
    MIN_PROGRAMS,
    gpu_conv_tiles,
    gpu_flat_tiles,
    gpu_matmul_tiles,
    gpu_midreduce_tiles,
    gpu_program_tiles,
    gpu_rows_tiles,
    gpu_tiles,
)
from argus_plugins.kernels.kernelbench.worker import _use_gpu

HERE = Path(__file__).parent
TASKS = HERE.parents[2] / "kernelbench_tasks"
TEMPLATE = {"BM": [32, 16, 64], "BN": [32, 16, 64], "BK": [16, 32], "GROUP": [4]}


def test_a_large_product_starts_at_128_by_128_by_32_with_8_warps():
    tiles, first = gpu_matmul_tiles(TEMPLATE, {"M": 4096, "N": 4096, "K": 4096})
    assert {k: v[0] for k, v in tiles.items()} == {"BM": 128, "BN": 128, "BK": 32, "GROUP": 8}
    assert first == {"num_warps": 8}
    assert sorted(tiles["BM"]) == [16, 32, 64, 128]  # the rest stay reachable


def test_a_small_output_gets_smaller_tiles_so_every_sm_has_a_program():
    # level1/6: a 256 x 256 output with a long K ran 4 programs at 128 x 128
    tiles, first = gpu_matmul_tiles(TEMPLATE, {"M": 256, "N": 256, "K": 1 << 19})
    bm, bn = tiles["BM"][0], tiles["BN"][0]
    assert (bm, bn) == (32, 32) and (256 // bm) * (256 // bn) < MIN_PROGRAMS
    assert first == {}  # 4 warps (the grid's first) for a small tile
    tiles, _ = gpu_matmul_tiles(TEMPLATE, {"M": 2048, "N": 512, "K": 64})
    bm, bn = tiles["BM"][0], tiles["BN"][0]
    assert (2048 // bm) * (512 // bn) >= MIN_PROGRAMS and max(bm, bn) == 128


def test_tiles_never_pass_the_extent_rounded_up():
    tiles, _ = gpu_matmul_tiles(TEMPLATE, {"M": 8205, "N": 20, "K": 9})
    assert max(tiles["BN"]) == 32 and tiles["BK"] == [16]


def test_a_programs_matmul_kernel_is_reordered_and_the_others_kept():
    tiles = {"k0_BM": [32, 16, 64], "k0_BN": [32, 16, 64], "k0_BK": [16, 32],
             "k0_GROUP": [4], "k1_ROWS": [4, 1], "k1_BN": [1024]}  # fmt: skip
    parts = (("matmul", {"M": 4096, "N": 1024, "K": 4096}), ("rowprog", {"M": 4096, "N": 1024}))
    out, first = gpu_program_tiles(tiles, parts)
    assert first == {}
    assert (out["k0_BM"][0], out["k0_BN"][0], out["k0_BK"][0]) == (64, 64, 32)
    assert out["k1_ROWS"] == [4, 1] and out["k1_BN"] == [1024]


def test_a_batched_product_counts_its_batch_among_the_programs():
    bmm = {"BM": [32, 16, 64], "BN": [32, 16, 64], "BK": [16, 32]}
    tiles, first = gpu_tiles("bmm", bmm, {"B": 128, "M": 512, "N": 2048, "K": 1024})
    assert (tiles["BM"][0], tiles["BN"][0], tiles["BK"][0]) == (128, 128, 32)
    assert first == {"num_warps": 8} and "GROUP" not in tiles
    # one 256 x 256 product would be halved; 64 of them fill the GPU at 128 x 128
    tiles, _ = gpu_tiles("bmm", bmm, {"B": 64, "M": 256, "N": 256, "K": 64})
    assert (tiles["BM"][0], tiles["BN"][0]) == (128, 128)


def test_elementwise_programs_cover_4096_contiguous_rows_of_elements():
    ew = {"BR": [16, 32], "BC": [32, 64, 16]}
    tiles = gpu_flat_tiles(ew, {"R": 4096, "C": 393216})  # level1/19
    assert (tiles["BR"][0], tiles["BC"][0]) == (16, 256)
    assert sorted(tiles["BC"]) == [16, 32, 64, 256]
    narrow = gpu_flat_tiles(ew, {"R": 100000, "C": 20})  # short rows: more of them
    assert (narrow["BR"][0], narrow["BC"][0]) == (128, 32)
    assert gpu_tiles("bcast", ew, {"R": 4096, "C": 4096})[0]["BC"][0] == 256


def test_a_middle_dim_reduction_walks_512_columns_and_keeps_the_grid_full():
    mid = {"BR": [4096, 64, 32, 16], "BC": [16]}
    tiles = gpu_midreduce_tiles(mid, {"M": 128 * 4095, "N": 4096, "C": 4095})  # level1/47
    assert (tiles["BR"][0], tiles["BC"][0]) == (16, 512)
    assert 4096 in tiles["BR"]  # the interpreter's whole-R step stays reachable
    # 8 rows of 4095 columns: 8 programs at 512, so BC halves until 128 programs (or 32)
    few = gpu_midreduce_tiles(mid, {"M": 8 * 4095, "N": 4096, "C": 4095})
    assert few["BC"][0] == 256 and 8 * -(-4095 // 256) >= MIN_PROGRAMS


def test_row_tiles_hold_at_most_4096_elements_and_keep_the_grid_full():
    # a [4, 8192] softmax row tile after a GEMM spilled 347 registers' worth (level2/84)
    rows = gpu_rows_tiles({"ROWS": [4, 1, 2, 8], "BN": [8192]}, {"M": 1024, "N": 8192})
    assert rows["ROWS"][0] == 1 and sorted(rows["ROWS"]) == [1, 2, 4, 8]
    # rownorm's [16, 1024]: 4 rows a program, but only 1 where 16 rows would be 1 program
    norm = {"ROWS": [16, 8, 4, 2, 1], "BL": [1024, 256]}
    assert gpu_rows_tiles(norm, {"M": 7168, "N": 262144})["ROWS"][0] == 4
    assert gpu_rows_tiles(norm, {"M": 16, "N": 4194304})["ROWS"][0] == 1


def test_a_wide_conv_block_takes_8_warps_alone_and_half_the_positions_in_a_program():
    conv = {"BP": [128, 64, 256], "BC": [128], "BK": [32]}
    tiles, first = gpu_conv_tiles(conv)
    assert tiles == conv and first == {"num_warps": 8}
    tiles, first = gpu_conv_tiles(conv, in_program=True)
    assert tiles["BP"][0] == 64 and first == {}
    narrow = {"BP": [128, 64], "BC": [64], "BK": [32]}
    assert gpu_tiles("conv", narrow, {}) == (narrow, {})
    # beside another kernel the conv's block halves; beside its weight copy alone it is
    # tiled as a lone conv (the copy does not care how many warps it has)
    conv_shape = {"M": 1 << 20, "N": 128, "K": 576}
    parts = (("conv", conv_shape), ("rowprog", {"M": 4096, "N": 1024}))
    tiles = {f"k0_{k}": v for k, v in conv.items()} | {"k1_ROWS": [4], "k1_BN": [1024]}
    out, first = gpu_program_tiles(tiles, parts)
    assert out["k0_BP"][0] == 64 and first == {}
    parts = (("relayout", {"N": 576 * 128}), ("conv", conv_shape))
    tiles = {"k0_BK": [32], "k0_BC": [128]} | {f"k1_{k}": v for k, v in conv.items()}
    out, first = gpu_program_tiles(tiles, parts)
    assert out["k1_BP"][0] == 128 and first == {"num_warps": 8}


def test_the_interpreters_position_blocks_are_dropped_for_a_gpu():
    # a conv's list: the GPU's blocks first, then those only the interpreter takes
    assert match._conv_bp(20000, 16, (128, 64, 256, 32, 512, 1024)) == [
        128, 64, 256, 32, 512, 1024, 2048, 4096, 8192, 16384,
    ]  # fmt: skip
    assert match._conv_bp(3000, 128, (128, 64)) == [128, 64, 2048]  # 2048 x 128 = 2^18
    assert match._conv_bp(100, 16, (128, 64, 256)) == [128, 64]
    conv = {"BP": [128, 64, 2048, 4096], "BC": [16], "BK": [16]}
    assert gpu_conv_tiles(conv)[0]["BP"] == [128, 64]
    assert gpu_tiles("dwconv", {"BP": [128, 8192], "BC": [16]}, {})[0]["BP"] == [128]


def test_the_grid_puts_the_familys_first_values_first_and_ignores_values_it_lacks():
    grid = {"num_warps": [4, 8], "num_stages": [3, 4]}
    assert _first(grid, {"num_warps": 8}) == {"num_warps": [8, 4], "num_stages": [3, 4]}
    assert _first(grid, {"num_warps": 16, "waves_per_eu": 2}) == grid
    assert grid == {"num_warps": [4, 8], "num_stages": [3, 4]}  # not changed in place


def test_a_device_named_without_an_index_is_accepted():
    # torch.cuda.set_device(torch.device("cuda")) raises ValueError; every check of a run
    # outside the suite (which names "cuda:<i>") failed with it on the H200
    _use_gpu("cuda")
    _use_gpu("cpu")


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="kernel.source runs sandboxed")
def test_a_split_dot_that_fails_the_check_is_retried_in_ieee_and_the_row_says_so(tmp_path):
    good = (HERE / "candidates" / "good_dsl_matmul.py").read_text()
    wrong = good.replace("acc.to(out.dtype))", "(acc + 0.5).to(out.dtype))")
    assert wrong != good
    src = tmp_path / "off_by_half.py"
    src.write_text(wrong)
    out = fastp.evaluate_task(str(TASKS), "level1/1", "interpret", 1, str(src),
                              fp32_dot="bf16x3", trials=1)  # fmt: skip
    assert not out.correct and out.reached == "correctness"
    assert "(ieee dots: bf16x3 failed: correctness:" in out.note
    again = fastp.evaluate_task(str(TASKS), "level1/1", "interpret", 1, str(src), trials=1)
    assert "ieee dots" not in again.note  # an ieee run is not retried
