"""KernelBench-format task files: finding them under a directory and importing them.

A task is a Python file `DIR/<level>/<id>_<name>.py` (for example
`level1/1_square_matmul.py`, chosen with `kernel.task=level1/1`) that defines, at module
level, `class Model(nn.Module)`, `get_inputs()` and `get_init_inputs()`: the model is built
as `Model(*get_init_inputs())` and run as `model(*get_inputs())`.

Trust: a task file is the user's own PyTorch reference, trusted like a test file. Loading it
executes the module's top level (imports and constants) and nothing else; the model is
built and run only by the reference harness (`reference.py`), in the correctness worker's
child process and, for template matching, in the caller. Candidates, by contrast, are
untrusted and checked before they run (`static_check.py`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from argus_core.errors import ConfigError

LEVEL_DIR = re.compile(r"^level\d+$")
TASK_FILE = re.compile(r"^(\d+)_(\w+)\.py$")
REQUIRED = ("Model", "get_inputs", "get_init_inputs")


class TaskError(ConfigError):
    """A task directory, task name or task file is wrong."""


@dataclass(frozen=True)
class TaskRef:
    """One task file: `key` is '<level>/<id>' as written in `kernel.task`."""

    key: str
    level: str
    id: int
    name: str  # the file name after '<id>_', without '.py'
    path: Path


def discover(root: str | Path) -> dict[str, TaskRef]:
    """Every task under `root`, by key, ordered by level then id. Raises TaskError when
    `root` is not a directory."""
    base = Path(root)
    if not base.is_dir():
        raise TaskError(f"kernel.path={str(root)!r} is not a directory of KernelBench tasks")
    found: list[TaskRef] = []
    for level in base.iterdir():
        if not (level.is_dir() and LEVEL_DIR.match(level.name)):
            continue
        for file in level.iterdir():
            m = TASK_FILE.match(file.name)
            if m and file.is_file():
                key = f"{level.name}/{int(m.group(1))}"
                found.append(TaskRef(key, level.name, int(m.group(1)), m.group(2), file))
    found.sort(key=lambda t: (int(t.level[5:]), t.id))
    return {t.key: t for t in found}


def resolve(root: str | Path | None, task: str | None) -> TaskRef:
    """The task `task` ('level1/1', or 'level1/1_square_matmul') under `root`.

    Raises TaskError naming the missing value, or the bad task and the valid ones.
    """
    if not root:
        raise TaskError("kernel=kernelbench needs kernel.path=DIR (a directory of level*/ tasks)")
    tasks = discover(root)
    if not task:
        raise TaskError(
            f"kernel=kernelbench needs kernel.task=<level>/<id>; tasks in {root}: "
            f"{', '.join(tasks) or '(none)'}"
        )
    key = str(task)
    level, _, rest = key.partition("/")
    m = re.match(r"^(\d+)(?:_\w+)?$", rest)
    ref = tasks.get(f"{level}/{int(m.group(1))}") if m else None
    if ref is None:
        raise TaskError(
            f"unknown kernel.task {key!r} in {root}; valid tasks: {', '.join(tasks) or '(none)'}"
        )
    return ref


def load_module(path: str | Path) -> ModuleType:
    """Import the task file at `path` (its top level only) as a fresh module.

    Raises TaskError when the file does not import or lacks Model, get_inputs or
    get_init_inputs.
    """
    path = Path(path).resolve()
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
    stem = re.sub(r"\W", "_", path.stem)
    name = f"_argus_kb_task_{stem}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TaskError(f"cannot import task file {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look modules up by name
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise TaskError(f"task file {path} failed to import: {type(exc).__name__}: {exc}") from exc
    missing = [n for n in REQUIRED if not hasattr(module, n)]
    if missing:
        raise TaskError(
            f"task file {path} lacks {', '.join(missing)}; a KernelBench task defines "
            f"{', '.join(REQUIRED)}"
        )
    return module
