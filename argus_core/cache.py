"""A cache of stage results across runs and sweep jobs (`cache.dir`; `cache=off` disables it).

A candidate's verification, its lowering and compilation, and its correctness check (with
the GPU's measurement where it was checked on one) are each stored under a key that hashes
everything the result depends on:

- the candidate's DSL source, the kernels it runs and its policy (tiles and compiler
  options);
- the code that produced the result: every source file of Argus and of the packages its
  registered plugins come from (`code_hash`), so any code change starts a fresh cache
  (the version number stays 0.1.0 while the code changes under it);
- the tools behind the result (`tool_versions`: Python, triton, torch, z3);
- the run's kernel config (dtype, options, source file; not the timed shape for verify and
  compile, which do not depend on it), the backend and its policy grid, the verifier's
  config (verify), the check's shapes, trials, seed and runner (correctness) and, for a
  check run on a GPU, that GPU's identity (`device_identity`): a measured time is reused
  only on the same device, and only while `cache.measured=true`.

What is stored is what can only change when the key does: verify results that are proved
or refuted (an `unknown`, which can be a solver timeout under load, is tried again),
compile results, and checks that passed (a failed check, possibly a timeout, is run again).

The store is `diskcache` (SQLite, safe for several processes: parallel sweep jobs share
one), with values as JSON, never pickles, so a shared cache directory cannot run code. A
cache that cannot be opened or written (read-only, disk full, corrupt) is turned off for
the rest of the run with one warning; the run itself goes on as if there were no cache.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import platform
import subprocess
import sys
import types
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger("argus")

CACHE_FORMAT = 1  # bump when what a stage stores changes shape
STAGES = ("verify", "compile", "check")
_CODE_SUFFIXES = (".py", ".tmpl", ".yaml")


@functools.lru_cache(maxsize=8)
def code_hash(roots: tuple[str, ...]) -> str:
    """SHA-256 over every source file under `roots` (package directories, or single-module
    files): relative path and bytes of each `.py`, `.tmpl` and `.yaml`, in sorted order,
    caches left out."""
    digest = hashlib.sha256()
    for root in sorted(set(roots)):
        base = Path(root)
        if base.is_file():
            files, base = [base], base.parent
        else:
            files = sorted(
                p
                for p in base.rglob("*")
                if p.suffix in _CODE_SUFFIXES and "__pycache__" not in p.parts and p.is_file()
            )
        for path in files:
            digest.update(f"{base.name}/{path.relative_to(base)}\0".encode())
            digest.update(path.read_bytes())
            digest.update(b"\0")
    return digest.hexdigest()


def package_roots(plugins: Iterable[object]) -> tuple[str, ...]:
    """The directories of Argus and of every top-level package a plugin object (or plugin
    module) comes from (the file, for a plugin that is a single module): the code whose
    change must invalidate cached results."""
    modules = {"argus_core"}
    for plugin in plugins:
        name = plugin.__name__ if isinstance(plugin, types.ModuleType) else type(plugin).__module__
        modules.add(name.split(".")[0])
    roots = []
    for name in sorted(modules):
        module = sys.modules.get(name)
        spec = module.__spec__ if module is not None else None
        if spec is None or spec.origin in (None, "built-in", "frozen"):
            continue
        places = spec.submodule_search_locations or [spec.origin]
        roots += [str(Path(p).resolve()) for p in places]
    return tuple(sorted(set(roots)))


@functools.lru_cache(maxsize=1)
def tool_versions() -> dict[str, str]:
    """Versions of the tools a stage's result depends on ('absent' where not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": platform.python_version()}
    for name in ("triton", "torch", "z3-solver"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "absent"
    return found


@functools.lru_cache(maxsize=4)
def device_identity(visible: str | None = None) -> str | None:
    """The GPU a check on `cuda` runs on: name, UUID and driver of the first visible NVIDIA
    device (`nvidia-smi`), or the unique id and name of the first AMD one (`rocm-smi`);
    None when neither answers (measured results are then not cached). `visible` is
    CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES, whose first entry is the device used."""
    first = (visible or "").split(",")[0].strip()
    queries = [
        ["nvidia-smi", "--query-gpu=name,uuid,driver_version", "--format=csv,noheader"]
        + (["-i", first] if first else []),
        ["rocm-smi", "--showproductname", "--showuniqueid"]
        + (["-d", first] if first.isdigit() else []),
    ]
    for command in queries:
        try:
            out = subprocess.run(command, capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.SubprocessError):
            continue
        lines = [ln.strip() for ln in out.stdout.splitlines() if ln.strip()]
        if out.returncode == 0 and lines:
            return f"{command[0]}: " + (
                lines[0] if command[0] == "nvidia-smi" else " | ".join(lines)
            )
    return None


def _plain(value: Any) -> Any:
    """`value` as plain JSON data (what is stored and what keys are made of)."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


class ResultCache:
    """Stage results on disk under `directory`; `None` makes a cache that stores nothing.

    `get(stage, parts)` returns the stored value (a JSON-like dict) or None and counts a
    hit or a miss; `put(stage, parts, value)` stores one. `take()` returns the stages served
    from the cache since the last call (one candidate's), `metrics()` the run's counts.
    """

    def __init__(self, directory: str | os.PathLike[str] | None, code: str, measured: bool = True):
        self.directory = None if directory is None else os.path.abspath(directory)
        self.code = code
        self.measured = measured
        self.hits: Counter[str] = Counter()
        self.misses: Counter[str] = Counter()
        self.error: str | None = None  # why the cache was turned off mid-run
        self._taken: list[str] = []
        self._store: Any = None
        if self.directory is not None:
            self._guard(self._open)

    @classmethod
    def from_config(
        cls, cache_cfg: Mapping[str, Any] | None, plugins: Iterable[object]
    ) -> ResultCache:
        """The run's cache from its `cache` config (`cache=off`: name off, or no dir)."""
        cfg = dict(cache_cfg or {})
        directory = cfg.get("dir") if cfg.get("name", "disk") != "off" else None
        if not directory:
            return cls(None, "")
        return cls(directory, code_hash(package_roots(plugins)), bool(cfg.get("measured", True)))

    @property
    def enabled(self) -> bool:
        return self._store is not None

    def _open(self) -> None:
        import diskcache

        os.makedirs(self.directory, exist_ok=True)  # type: ignore[arg-type]
        # JSON values (no pickles); SQLite serializes writers from parallel sweep jobs
        self._store = diskcache.Cache(self.directory, disk=diskcache.JSONDisk, timeout=60)

    def _guard(self, action: Any, *args: Any) -> Any:
        """Run a store action; an error turns the cache off, with one warning."""
        try:
            return action(*args)
        except Exception as exc:  # sqlite3 errors, OSError, a corrupt value: never fatal
            self.error = f"{type(exc).__name__}: {exc}"
            self.close()
            log.warning("result cache %s off: %s", self.directory, self.error)
            print(
                f"argus: result cache {self.directory} turned off ({self.error}); "
                "the run goes on without it",
                file=sys.stderr,
            )
            return None

    def key(self, stage: str, parts: Mapping[str, Any]) -> str:
        """The store key of one stage's result: SHA-256 of the stage, the cache format, the
        code hash, the tools' versions and `parts`."""
        text = json.dumps(
            _plain(
                {
                    "format": CACHE_FORMAT,
                    "stage": stage,
                    "code": self.code,
                    "tools": tool_versions(),
                    "parts": dict(parts),
                }
            ),
            sort_keys=True,
        )
        return f"{stage}:{hashlib.sha256(text.encode()).hexdigest()}"

    def get(self, stage: str, parts: Mapping[str, Any]) -> dict[str, Any] | None:
        if not self.enabled:
            return None
        value = self._guard(self._store.get, self.key(stage, parts))
        if isinstance(value, dict):
            self.hits[stage] += 1
            self._taken.append(stage)
            return value
        if self.enabled:
            self.misses[stage] += 1
        return None

    def put(self, stage: str, parts: Mapping[str, Any], value: Mapping[str, Any]) -> None:
        if self.enabled:
            self._guard(self._store.set, self.key(stage, parts), _plain(dict(value)))

    def take(self) -> list[str]:
        """The stages served from the cache since the last call."""
        taken, self._taken = self._taken, []
        return taken

    def metrics(self) -> dict[str, float]:
        """`cache.hits`, `cache.misses` and per stage (`cache.hits.verify`, ...); empty when
        the run had no cache."""
        if self.directory is None or not self.code:
            return {}
        out = {
            "cache.hits": float(sum(self.hits.values())),
            "cache.misses": float(sum(self.misses.values())),
        }
        for stage in STAGES:
            out[f"cache.hits.{stage}"] = float(self.hits[stage])
            out[f"cache.misses.{stage}"] = float(self.misses[stage])
        return out

    def summary(self) -> str:
        """One line for the end of a run: 'Result cache DIR: 6 of 9 stage results reused
        (verify 2/3, compile 2/3, check 2/3)', or '' with no cache."""
        if self.directory is None or not self.code:
            return ""
        hits, total = sum(self.hits.values()), sum(self.hits.values()) + sum(self.misses.values())
        per = ", ".join(
            f"{s} {self.hits[s]}/{self.hits[s] + self.misses[s]}"
            for s in STAGES
            if self.hits[s] + self.misses[s]
        )
        off = f"; turned off: {self.error}" if self.error else ""
        return (
            f"Result cache {self.directory}: {hits} of {total} stage results reused"
            + (f" ({per})" if per else "")
            + off
        )

    def close(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            try:
                store.close()
            except Exception:
                pass


__all__ = ["ResultCache", "code_hash", "device_identity", "package_roots", "tool_versions"]
