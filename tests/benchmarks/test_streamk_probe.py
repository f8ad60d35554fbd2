"""The stream-K probe (benchmarks/streamk_probe.py) cross-compiles for sm_90 on the CPU: its
schedule's arithmetic covers the iteration space once, and the kernel keeps the fixup
protocol and no spills."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
probe = pytest.importorskip("streamk_probe")


def _pieces(tiles: int, k_steps: int, ctas: int):
    """(cta, tile, ks, ke) of every stream-K piece, as the kernel walks them."""
    dp, iters = probe.schedule(tiles, k_steps, ctas, True)
    out = []
    for c in range(ctas):
        a, b = c * iters // ctas, (c + 1) * iters // ctas
        if b <= a:
            continue
        for t in range((b - 1) // k_steps, a // k_steps - 1, -1):  # last piece first
            ks, ke = max(a, t * k_steps) - t * k_steps, min(b, (t + 1) * k_steps) - t * k_steps
            out.append((c, dp + t, ks, ke))
    return dp, iters, out


@pytest.mark.parametrize(
    "tiles,k_steps,ctas",
    [(112, 64, 132), (512, 224, 132), (2048, 128, 132), (264, 64, 132), (3, 5, 7)],
)
def test_schedule_covers_each_k_step_of_each_tile_once(tiles, k_steps, ctas):
    dp, iters, pieces = _pieces(tiles, k_steps, ctas)
    assert dp % ctas == 0 and dp + iters // k_steps == tiles
    seen = {}
    for c, t, ks, ke in pieces:
        assert 0 <= ks < ke <= k_steps
        for k in range(ks, ke):
            assert (t, k) not in seen
            seen[(t, k)] = c
    assert len(seen) == iters
    # the finisher (the piece holding a tile's last K step) expects partials from exactly
    # the CTAs holding the tile's other K steps, the range the kernel computes
    for c, t, ks, ke in pieces:
        if ke == k_steps:
            local = t - dp
            first = ((local * k_steps + 1) * ctas - 1) // iters
            others = {seen[(t, k)] for k in range(0, ks)}
            assert others == set(range(first, c))


def test_no_stream_k_when_the_tiles_fill_whole_waves():
    assert probe.schedule(264, 64, 132, True) == (264, 0)
    assert probe.schedule(100, 64, 132, False) == (100, 0)


def test_the_kernel_cross_compiles_with_the_fixup_protocol():
    pytest.importorskip("triton.experimental.gluon")
    rep = probe.compile_config((128, 128, 64, 5, 4))
    assert rep["spills"] == 0
    assert rep["release"] and rep["acquire"]


def test_pdl_and_the_split_epilogue_cross_compile():
    """PDL 1 waits on the previous grid once (2 also lets the next one launch), PDL 0 leaves
    the PTX without either; the epilogue in column halves fits a fourth 128x256x64 stage in
    one SM's shared memory (227 KiB) without spills, where the whole-tile buffer cannot."""
    pytest.importorskip("triton.experimental.gluon")
    counts = {}
    for pdl in (0, 1, 2):
        ptx = probe.compile_kernel((64, 64, 128, 5, 4), pdl=pdl)["ptx"]
        counts[pdl] = (ptx.count("griddepcontrol.wait"), ptx.count("launch_dependents"))
    assert counts == {0: (0, 0), 1: (1, 0), 2: (1, 1)}
    rep = probe.compile_kernel((128, 256, 64, 4, 8), epi=2)
    assert rep["spills"] == 0 and rep["shared_bytes"] <= 227 * 1024
    assert rep["shared_bytes"] + 128 * 128 * 2 > 227 * 1024  # a whole-tile buffer would not fit
