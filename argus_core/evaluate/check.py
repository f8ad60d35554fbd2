"""What the pipeline tells a kernel family about checking one candidate.

The pipeline decides once, for every family, where and how candidates are checked
(`CheckRun`); a family reads what a candidate is (`CandidateKind`). Plain data, importing
nothing of Argus, so the protocols and the family base can both name it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# What a candidate is, as its family reads it: "dsl" goes through the pipeline's stages
# (parse, verify, lower, compile, check); "program" is a whole program the family checks
# itself (KernelBench's ModelNew), with no DSL stage to run.
CandidateKind = Literal["dsl", "program"]


@dataclass(frozen=True)
class CheckRun:
    """How the pipeline checks one candidate, decided once for the run (the same for every
    family): where it runs, at which dtype and shapes, how often, for how long, and, on a
    GPU runner, the shape it is timed at."""

    runner: str  # "interpret" (the CPU) or "cuda" (the GPU runner of either vendor)
    dtype: str
    shapes: tuple[dict[str, int], ...]  # the shapes checked, each on `trials` fresh inputs
    trials: int
    seed: int
    timeout_s: float
    timed_shape: dict[str, int] | None = None  # set on a GPU runner only
