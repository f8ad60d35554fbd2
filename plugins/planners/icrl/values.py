"""Action values per technique, chosen by UCB1, persisted in a small JSON file.

The file maps a table key (`<family>/<backend>`) to, per technique id, the number of
rewards seen and their sum: `{"version": 1, "tables": {"moe/mi300x": {"pipeline_depth":
{"count": 3, "sum": 3.4}}}}`. Counts and sums add, so concurrent runs (a Hydra sweep)
merge: each save adds only what this session learned since its last save, under a lock
(filelock). The document is checked against a pydantic schema on every read: a file that is
not UTF-8 JSON of that shape, or holds a negative or non-integer count or a NaN/infinite sum,
is an error naming the file and the first bad entry; it is never used or saved back.
"""

from __future__ import annotations

import json
import math
import os
import random
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from argus_core.errors import ConfigError

VERSION = 1
DEFAULT_PATH = os.path.join(".argus", "icrl_values.json")


@dataclass
class Stat:
    count: int = 0
    sum: float = 0.0

    @property
    def mean(self) -> float:
        return self.sum / self.count if self.count else 0.0


class ValueTable:
    """Incremental-mean action values of one (family, backend) key, and UCB1 over them.

    `ucb(arm) = mean + c * sqrt(ln(N) / n)`, with n the arm's count, N the table's total
    and c the exploration constant; an arm never tried scores +inf.
    """

    def __init__(self, key: str, exploration: float = 1.0, path: str | Path | None = None):
        if not (isinstance(exploration, (int, float)) and exploration >= 0):
            raise ConfigError(f"planner.options.exploration={exploration!r}: must be a number >= 0")
        self.key, self.exploration = key, float(exploration)
        self.path = Path(path) if path is not None else None
        self.stats: dict[str, Stat] = {}
        self._unsaved: dict[str, Stat] = {}  # learned since the last save

    # ------------------------------------------------------------------ the bandit
    def stat(self, arm: str) -> Stat:
        return self.stats.setdefault(arm, Stat())

    def total(self) -> int:
        return sum(s.count for s in self.stats.values())

    def update(self, arm: str, reward: float) -> None:
        """Add one observed `reward` for `arm` (its mean is the average of all so far)."""
        if not math.isfinite(reward):
            raise ValueError(f"reward for {arm!r} must be finite, got {reward!r}")
        for table in (self.stats, self._unsaved):
            s = table.setdefault(arm, Stat())
            s.count += 1
            s.sum += reward

    def ucb(self, arm: str, total: int | None = None) -> float:
        """The arm's UCB1 score; +inf when it has no reward yet."""
        s = self.stats.get(arm, Stat())
        if s.count == 0:
            return math.inf
        n_all = max(total if total is not None else self.total(), 1)
        return s.mean + self.exploration * math.sqrt(math.log(n_all) / s.count)

    def choose(
        self, arms: Iterable[str], rng: random.Random, prior: dict[str, float] | None = None
    ) -> str:
        """The arm with the highest UCB1 score; among equal scores (untried arms) the one
        with the highest `prior`, then a seeded random pick."""
        arms = list(arms)
        if not arms:
            raise ValueError("no arm to choose from")
        total = self.total()
        prior = prior or {}
        scored = [(self.ucb(a, total), prior.get(a, 0.0), rng.random(), a) for a in arms]
        return max(scored)[3]

    # ---------------------------------------------------------------- persistence
    def load(self) -> None:
        """Set the table to what `path` holds for this key (nothing if no file yet)."""
        if self.path is None:
            return
        data = _read(self.path)
        self.stats = {
            arm: Stat(int(v["count"]), float(v["sum"]))
            for arm, v in data["tables"].get(self.key, {}).items()
        }
        self._unsaved = {}

    def save(self) -> None:
        """Add what was learned since the last save to `path` (created if missing)."""
        if self.path is None or not self._unsaved:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with _locked(self.path):
            data = _read(self.path)
            table = data["tables"].setdefault(self.key, {})
            for arm, s in self._unsaved.items():
                row = table.setdefault(arm, {"count": 0, "sum": 0.0})
                row["count"] = int(row["count"]) + s.count
                row["sum"] = float(row["sum"]) + s.sum
            _write(self.path, data)
        self._unsaved = {}

    def to_dict(self, arms: Iterable[str] | None = None) -> dict[str, dict[str, float]]:
        """{arm: {"value", "count", "ucb"}} for `arms` (default: every arm with a record);
        an arm without rewards has value 0.0, count 0 and ucb None."""
        total = self.total()
        out: dict[str, dict[str, Any]] = {}
        for arm in arms if arms is not None else sorted(self.stats):
            s = self.stats.get(arm, Stat())
            score = self.ucb(arm, total)
            out[arm] = {
                "value": s.mean,
                "count": s.count,
                "ucb": score if math.isfinite(score) else None,
            }
        return out


class _StatRow(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    count: int = Field(ge=0)
    sum: float = Field(allow_inf_nan=False)


class ValuesDocument(BaseModel):
    """The values file's schema: `{"version": 1, "tables": {key: {arm: {count, sum}}}}`."""

    model_config = ConfigDict(extra="forbid", strict=True)

    version: Literal[1]
    tables: dict[str, dict[str, _StatRow]]


def _read(path: Path) -> dict[str, Any]:
    """The file's content; a fresh document if it does not exist. A file that is not a
    values document is an error naming it and what is wrong (never silently overwritten)."""
    if not path.exists():
        return {"version": VERSION, "tables": {}}
    where = f"planner.options.values_path={str(path)!r}"
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where}: not JSON ({exc})") from None
    try:
        # NaN and Infinity are JSON to Python's parser; the schema refuses them
        ValuesDocument.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        at = ".".join(str(p) for p in first["loc"]) or "(the document)"
        raise ConfigError(
            f"{where}: not a values document: at {at}: {first['msg']} (got "
            f"{first.get('input')!r}); expected "
            '{"version": 1, "tables": {KEY: {TECHNIQUE: {"count": int >= 0, "sum": finite}}}}'
        ) from None
    return data


def _write(path: Path, data: dict[str, Any]) -> None:
    # a reader never sees half a file: write beside it, then rename over it
    fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=True, allow_nan=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _locked(path: Path) -> FileLock:
    """An exclusive lock on `<path>.lock`, across processes (a sweep's jobs)."""
    return FileLock(f"{path}.lock")
