"""The policy space of one problem, derived from the target's spec and the kernel's shape.

Hand-kept grids (`kernel.tiles: {BN: [32, 64]}`) excluded the best policy of the H200's
attention (BN=128) and never offered Hopper's `tma` or `persistent`. Here the space is
derived (docs/planners.md, "The policy space"):

- **tile extents**: every tile constant the family maps to a shape extent
  (`family.tile_extents(shape)`: GEMM's BM/BN/BK cut M/N/K) takes the powers of two from
  `MIN_TILE` to `MAX_TILE` that fit the extent: none above the extent rounded up to a power
  of two, none below a quarter of that (a tile that small only multiplies programs). A
  tile constant the family maps to no extent (GROUP, HEAD_D, MoE's routing blocks) keeps
  the values of the kernel config's `tiles` list. On a target whose matrix instruction is
  a warpgroup MMA (Hopper's wgmma, m64), a row tile `BM` whose values all lie below
  `WGMMA_ROWS` also takes `WGMMA_ROWS`: the smallest tile that keeps the warpgroup MMA
  (skinny GEMMs, MoE decode).
- **compiler options**: the backend's policy grid (`backend.policy_grid`: warps, stages,
  AMD's waves_per_eu, ...), and every on/off lowering option the backend declares in its
  `policy_space()` (Hopper's `tma`, `persistent`, `warp_specialize`) as 0 and 1.
- **constraints**, all from the `TargetSpec` and the backend: shared memory (the backend's
  `validate_policy`: its estimate against `lds_bytes_per_cu`), the fp32 accumulator's
  registers per lane (at most a quarter of `regs_per_lane`, beyond that the compiler
  spills), and, on a target whose matrix instruction is a warpgroup MMA (Hopper's wgmma:
  m64 per warpgroup of 4 warps), at least 16 tile rows per warp and all `num_stages`
  buffers of the pipelined tiles in shared memory (Hopper's pipeliner keeps every stage;
  GEMM's (BM + BN) x BK per stage, or the family's `pipelined_smem`; MoE's and the TMA
  store's as measured: `pipelined_smem` below).

Everything here is plain data and arithmetic: no compile, no GPU, no KB. The planners
(`actions.ActionSpace`) move within this space; `benchmarks/planner_bench.py` enumerates it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from argus_core.errors import ArgusError
from argus_core.types import Policy

MIN_TILE, MAX_TILE = 16, 256
SMALLEST_SHARE = 4  # no tile below a quarter of the extent (rounded up to a power of two)
ACC_SHARE = 4  # the accumulator may take at most regs_per_lane / ACC_SHARE registers
# lowering options a backend declares as on/off switches: offered as 0 and 1
SWITCHES = ("tma", "persistent", "warp_specialize")


# bytes Hopper allocates beside the tiles with TMA: mbarriers and descriptors (measured on
# the H200: 24 to 1536 bytes over the tiles' figure)
TMA_EXTRA_BYTES = 2048
# the fewest tile rows Triton lowers to a warpgroup MMA (wgmma, m64) on Hopper: such a dot's
# pipeline keeps all `num_stages` buffers; a smaller one (mma.sync) keeps stages - 1 (every
# MoE allocation recorded on the H200, 2026-12-01 and 2026-12-03)
WGMMA_ROWS = 64


def pipelined_smem(family: Any, tiles: dict[str, int], compiler: dict[str, Any]) -> int | None:
    """Shared memory (bytes, 16-bit tiles) a policy's pipelined main loop allocates on
    Hopper with Triton 3.6, as measured on the H200 (`benchmarks/results/*-h200-space*`):

    - the family's own rule (`family.pipelined_smem`: attention's Q once, K and V per
      stage), else GEMM's (BM + BN) x BK per stage; MoE's grouped GEMMs (the up
      projection reads the gate and up tiles of w1: BM + 2 BN rows) hold (BM + 2 BN) x BK
      per buffer, `stages` buffers where the dot is a warpgroup MMA (BM >= `WGMMA_ROWS`:
      294912 bytes at BM 64, BN 64, BK 256, 3 stages, MoE prefill) and stages - 1 below
      it (278528 bytes at BM 16, BN 128, BK 256, 3 stages, MoE decode);
    - with `tma` and `persistent` the output tile is staged for its TMA store while the
      next tile's loop runs: BM x BN more (attention: BM x HEAD_D), plus
      `TMA_EXTRA_BYTES` (a 128x256x64 GEMM at 3 stages: 213016 bytes).
    None without the tiles to say."""
    stages = int(compiler.get("num_stages", 2))
    smem = family.pipelined_smem(dict(tiles), stages, 2) if family is not None else None
    name = getattr(family, "name", "")
    if smem is None and all(k in tiles for k in ("BM", "BN", "BK")):
        if name == "moe":
            buffers = stages if tiles["BM"] >= WGMMA_ROWS else max(1, stages - 1)
            smem = buffers * (tiles["BM"] + 2 * tiles["BN"]) * tiles["BK"] * 2
        else:
            smem = stages * (tiles["BM"] + tiles["BN"]) * tiles["BK"] * 2
    if smem is None:
        return None
    if compiler.get("tma") and compiler.get("persistent") and name in ("gemm", "attention"):
        cols = tiles.get("HEAD_D", tiles.get("BN", 0)) if name == "attention" else tiles["BN"]
        smem += tiles["BM"] * cols * 2 + TMA_EXTRA_BYTES
    return smem


def _pow2_ceil(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def tile_values(extent: int) -> list[int]:
    """Powers of two in [MIN_TILE, MAX_TILE] for a tile cutting `extent`: at most the extent
    rounded up to a power of two, at least a quarter of that."""
    hi = max(MIN_TILE, min(MAX_TILE, _pow2_ceil(extent)))
    lo = max(MIN_TILE, hi // SMALLEST_SHARE)
    return [v for v in (16, 32, 64, 128, 256) if lo <= v <= hi]


@dataclass
class PolicySpace:
    """Value lists per tile constant and compiler option, and the constraints a point must
    satisfy (`ok`). `size()` counts the points that do."""

    tiles: dict[str, list[int]]
    compiler: dict[str, list[Any]]
    backend: Any = None
    spec: Any = None  # the TargetSpec (regs_per_lane, wave_size, matrix_instructions)
    family: Any = None  # the kernel family (its pipelined shared-memory need)
    derived: tuple[str, ...] = ()  # tile constants whose values come from a shape extent
    # a further restriction (benchmarks replaying recorded measurements: the recorded points)
    allow: Callable[[Policy], bool] | None = None
    _cache: dict[str, bool] = field(default_factory=dict, repr=False)

    def why_not(self, policy: Policy) -> str | None:
        """None when `policy` is a point of the space; else the constraint it breaks."""
        t, c = policy.tiles, policy.compiler
        if self.allow is not None and not self.allow(policy):
            return "outside the allowed points"
        if self.spec is not None and "BM" in t and "BN" in t:
            warps = int(c.get("num_warps", 4))
            lanes = self.spec.wave_size * warps
            acc = t["BM"] * t["BN"] / lanes
            if acc > self.spec.regs_per_lane / ACC_SHARE:
                return (
                    f"accumulator {t['BM']}x{t['BN']} over {warps} warps: {acc:.0f} fp32 "
                    f"registers per lane > {self.spec.regs_per_lane // ACC_SHARE}"
                )
            wgmma = any("wgmma" in m for m in self.spec.matrix_instructions)
            if wgmma and warps > 4 and t["BM"] < 16 * warps:
                return f"BM={t['BM']} < 16 rows per warp for num_warps={warps} (wgmma m64)"
            stages = int(c.get("num_stages", 2))
            # Hopper's pipeliner keeps all num_stages buffers in shared memory (measured:
            # a 128x256x64 GEMM at 3 stages allocates 147456 bytes)
            smem = pipelined_smem(self.family, dict(t), c)
            if wgmma and smem is not None and smem > self.spec.lds_bytes_per_cu:
                return (
                    f"{stages} pipelined stages of {dict(t)} need {smem} bytes of 16-bit "
                    f"tiles, over the {self.spec.lds_bytes_per_cu} bytes of shared memory"
                )
        if self.backend is not None:
            try:
                self.backend.validate_policy(policy)
            except ArgusError as exc:
                return str(exc)
        return None

    def ok(self, policy: Policy) -> bool:
        key = policy.key()
        if key not in self._cache:
            self._cache[key] = self.why_not(policy) is None
        return self._cache[key]

    def points(self) -> Iterator[Policy]:
        """Every policy of the space, in a fixed order (the lists' product, constraints met)."""
        names = [*self.tiles, *self.compiler]
        lists = [*self.tiles.values(), *self.compiler.values()]
        n = len(self.tiles)
        for combo in itertools.product(*lists):
            p = Policy(dict(zip(names[:n], combo[:n])), dict(zip(names[n:], combo[n:])))
            if self.ok(p):
                yield p

    def size(self) -> int:
        return sum(1 for _ in self.points())

    def contains(self, policy: Policy) -> bool:
        """`policy` takes listed values only (missing names allowed) and meets the
        constraints."""
        for group, lists in ((policy.tiles, self.tiles), (policy.compiler, self.compiler)):
            for k, v in group.items():
                if k in lists and v not in lists[k]:
                    return False
        return self.ok(policy)


def derive(
    family: Any,
    backend: Any,
    shape: Mapping[str, int],
    tiles: Mapping[str, list[Any]],
    grid: Mapping[str, list[Any]],
) -> PolicySpace:
    """The space of `family` at `shape` on `backend`: see the module docstring. `tiles` is
    the kernel config's lists (the values of constants no extent derives), `grid` the
    backend's policy grid."""
    extents = family.tile_extents(dict(shape))
    out_tiles: dict[str, list[int]] = {}
    derived = []
    for name, values in tiles.items():
        if name in extents:
            out_tiles[name] = tile_values(int(extents[name]))
            derived.append(name)
        else:
            out_tiles[name] = [int(v) for v in values]
    spec = getattr(backend, "spec", None)
    wgmma = spec is not None and any("wgmma" in m for m in spec.matrix_instructions)
    if wgmma and "BM" in derived and max(out_tiles["BM"]) < WGMMA_ROWS:
        # rows below the warpgroup MMA's m64 lower to mma.sync, whose operands go through
        # registers; a BM of WGMMA_ROWS pads the few rows but keeps the warpgroup MMA, free
        # where the kernel streams its other operand (H200, 2026-12-04: MoE decode T64,
        # ~16 slots an expert, BM64 0.717 ms, BM32 0.764, BM16 1.01: docs/performance.md)
        out_tiles["BM"] = [*out_tiles["BM"], WGMMA_ROWS]
    compiler = {k: list(v) for k, v in grid.items()}
    declared = backend.policy_space()
    for name in SWITCHES:
        if name in declared and name not in compiler:
            compiler[name] = [v for v in (0, 1) if v in declared[name]]
    return PolicySpace(out_tiles, compiler, backend, backend.spec, family, tuple(derived))


__all__ = ["PolicySpace", "derive", "tile_values"]
