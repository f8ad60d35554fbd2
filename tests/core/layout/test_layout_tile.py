"""Tile views of symbolic-extent tensors, checked by evaluating on random concrete values."""

from __future__ import annotations

import random

import pytest

from argus_core.ir.expr import Sym
from argus_core.layout import Layout, LayoutError, logical_divide, tile_at, tile_coords, tile_divide

M, K, SM, SK, PM, KK = (Sym(n) for n in ("M", "K", "sM", "sK", "pm", "k"))


def _env(rng: random.Random) -> dict[str, int]:
    return {
        "M": rng.randint(1, 500),
        "K": rng.randint(1, 500),
        "sM": rng.randint(1, 600),
        "sK": rng.randint(1, 600),
        "pm": rng.randint(0, 9),
        "k": rng.randint(0, 17),
    }


def test_symbolic_tile_offset_and_inner_layout():
    off, inner = tile_at(tile_divide(Layout((M, K), (SM, SK)), (64, 32)), (PM, KK))
    rng = random.Random(0)
    for _ in range(200):
        env = _env(rng)
        assert off.evaluate(env) == env["pm"] * 64 * env["sM"] + env["k"] * 32 * env["sK"]
        i, j = rng.randrange(64), rng.randrange(32)
        assert inner(i, j).evaluate(env) == i * env["sM"] + j * env["sK"]
    assert inner.shape == (64, 32)


def test_rest_mode_counts_partial_tiles():
    divided = tile_divide(Layout((M, K), (SM, SK)), (64, 32))
    rng = random.Random(1)
    for _ in range(100):
        env = _env(rng)
        assert divided.shape[0][1].evaluate(env) == -(-env["M"] // 64)
        assert divided.shape[1][1].evaluate(env) == -(-env["K"] // 32)


def test_tile_view_addresses_the_global_element():
    # every element of every tile of a concrete 2-D tensor: the tile view's address equals
    # the tensor's address of the element's global coordinates (when in bounds)
    m, k = 70, 45
    tensor = Layout((m, k), (k, 1))
    tiler = (16, 8)
    divided = tile_divide(tensor, tiler)
    seen = set()
    for pm in range(-(-m // 16)):
        for pk in range(-(-k // 8)):
            off, inner = tile_at(divided, (pm, pk))
            for i in range(16):
                for j in range(8):
                    (r, c), ok = tile_coords(tiler, (pm, pk), (i, j), (m, k))
                    assert off + inner(i, j) == tensor(r, c)
                    assert bool(ok.value) == (r < m and c < k)
                    if ok.value:
                        seen.add((r, c))
    assert len(seen) == m * k  # the in-bounds elements are exactly the tensor, once each


def test_symbolic_predicate_matches_bounds():
    coords, pred = tile_coords((64, 32), (PM, KK), (Sym("i"), Sym("j")), (M, K))
    rng = random.Random(2)
    for _ in range(200):
        env = _env(rng) | {"i": rng.randrange(64), "j": rng.randrange(32)}
        r, c = (x.evaluate(env) for x in coords)
        assert (r, c) == (env["pm"] * 64 + env["i"], env["k"] * 32 + env["j"])
        assert bool(pred.evaluate(env)) == (r < env["M"] and c < env["K"])


def test_agrees_with_logical_divide_when_divisible():
    tensor = Layout((64, 96), (96, 1))
    assert tile_divide(tensor, (16, 32)) == logical_divide(tensor, (16, 32))


@pytest.mark.parametrize(
    ("layout", "tiler"),
    [
        (Layout((M, K), (SM, SK)), (64,)),
        (Layout(((2, 4), K), ((1, 2), 8)), (4, 8)),
        (Layout((M, K), (SM, SK)), (64, 0)),
    ],
)
def test_rejects_bad_tilers(layout, tiler):
    with pytest.raises(LayoutError, match="tile"):
        tile_divide(layout, tiler)
