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

import ast
import hashlib
import importlib.util
import math
import operator
import re
import sys
from dataclasses import dataclass, replace
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


# --scale: module-level sizes above SCALE_FLOOR shrink by the factor, to a multiple of
# SCALE_FLOOR (so channel counts stay divisible by groups up to 16); kernel sizes, strides,
# dilations, groups and other small hyperparameters (<= SCALE_FLOOR) are kept.
SCALE_FLOOR = 16
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow}  # fmt: skip


def _const_int(node: ast.expr) -> int | None:
    """The value of an integer constant expression (`4096`, `1024 * 2`, `2 ** 10`), else None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        a, b = _const_int(node.left), _const_int(node.right)
        if a is not None and b is not None and not (isinstance(node.op, ast.Pow) and b > 64):
            return int(_BINOPS[type(node.op)](a, b))
    return None


BATCH_NAME = re.compile(r"batch", re.IGNORECASE)  # a batch size is no hyperparameter
BATCH_FLOOR = 2  # a batch of 16 or less shrinks, but keeps two samples


def scale_size(n: int, factor: float, batch: bool = False) -> int:
    """`n` shrunk by `factor` (module-level sizes; see SCALE_FLOOR). A `batch` size (a
    module-level name containing "batch") is no extent a kernel divides, so it shrinks
    below SCALE_FLOOR too, to max(BATCH_FLOOR, ceil(n * factor)) where the size rule would
    give SCALE_FLOOR or keep it: the interpreter's cost is per program, and a convolution's
    programs grow with its batch (level2's 3-D convolutions at a batch of 16 ran past 240 s
    a check at --scale 0.005)."""
    small = min(n, max(BATCH_FLOOR, math.ceil(n * factor)))
    if n <= SCALE_FLOOR:
        return small if batch else n
    size = max(SCALE_FLOOR, int(n * factor) // SCALE_FLOOR * SCALE_FLOOR)
    return small if batch and int(n * factor) < SCALE_FLOOR else size


# names of module-level ints that are hyperparameters, not extents: a ratio-keeping
# division (`scaled_source(divisor=...)`) leaves them as they are
HYPER_NAME = re.compile(r"kernel|stride|pad|dilation|group|pool|dim$|axis", re.IGNORECASE)
DIVIDED_FLOOR = 4  # an extent divided by a common divisor keeps at least this


def scaled_source(source: str, factor: float, divisor: int | None = None) -> str:
    """The task file's text with every module-level integer size (`batch_size = 4096`,
    `M, N = 1024, 2048`) scaled by `factor` (`scale_size`). With `divisor`, the sizes above
    SCALE_FLOOR are divided by it instead (to at least DIVIDED_FLOOR; batch sizes still by
    `scale_size`, hyperparameters named so (HYPER_NAME) kept): sizes a Model ties by a ratio
    (`out_channels = 2 * width` where a LayerNorm over the channels meets the transposed
    convolution's width) keep it. Raises TaskError for a factor outside (0, 1]."""
    if not 0 < factor <= 1:
        raise TaskError(f"kernel.options.scale={factor!r}: must be in (0, 1] (a shrink factor)")
    tree = ast.parse(source)
    edits: list[tuple[ast.expr, int]] = []
    for stmt in tree.body:
        if not isinstance(stmt, ast.Assign | ast.AnnAssign) or stmt.value is None:
            continue
        values = stmt.value.elts if isinstance(stmt.value, ast.Tuple) else [stmt.value]
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target
        names = target.elts if isinstance(target, ast.Tuple) else [target] * len(values)
        for i, v in enumerate(values):
            n = _const_int(v)
            name = names[i] if i < len(names) else None
            batch = isinstance(name, ast.Name) and bool(BATCH_NAME.search(name.id))
            if n is None:
                continue
            m = scale_size(n, factor, batch)
            if divisor and not batch and n > SCALE_FLOOR:
                hyper = isinstance(name, ast.Name) and bool(HYPER_NAME.search(name.id))
                m = n if hyper else max(DIVIDED_FLOOR, n // divisor)
            if m != n:
                edits.append((v, m))
    lines = source.splitlines(keepends=True)
    for node, n in sorted(edits, key=lambda e: (e[0].lineno, e[0].col_offset), reverse=True):
        if node.lineno != node.end_lineno:
            continue  # a size written over several lines is kept
        i = node.lineno - 1
        lines[i] = lines[i][: node.col_offset] + str(n) + lines[i][node.end_col_offset :]
    return "".join(lines)


def scaled(ref: TaskRef, factor: float | None, workdir: str | Path | None = None) -> TaskRef:
    """`ref` with its sizes scaled by `factor` (None or 1: `ref` itself): a copy of the task
    file under `workdir` (default: a per-user temp folder), named by the source's hash."""
    if factor is None or float(factor) == 1.0:
        return ref
    import os
    import tempfile

    base = Path(workdir) if workdir else Path(tempfile.gettempdir()) / f"argus-kb-{os.getuid()}"

    def write(text: str) -> Path:
        digest = hashlib.sha1(text.encode()).hexdigest()[:12]
        folder = base / f"scaled-{digest}" / ref.level
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / ref.path.name
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
        return path

    source = ref.path.read_text()
    path = write(scaled_source(source, float(factor)))
    if _runs_on_meta(path) is None:
        return replace(ref, path=path)
    # the shrunk sizes make no valid Model (a shape error): every size divided by one
    # power of two instead, the largest that runs (each ratio between sizes kept)
    d = 1 << max(1, math.ceil(math.log2(1 / float(factor))))
    while d >= 2:
        again = write(scaled_source(source, float(factor), divisor=d))
        if _runs_on_meta(again) is None:
            if again not in _SAID:  # once a process, not at every call for the same task
                _SAID.add(again)
                print(f"--scale {factor}: {ref.key}'s shrunk sizes make no valid Model; its "
                      f"sizes divided by {d} instead (ratios kept)", file=sys.stderr)  # fmt: skip
            return replace(ref, path=again)
        d //= 2
    return replace(ref, path=path)  # none runs: the capture says why


_META_RUNS: dict[str, str | None] = {}
_SAID: set[Path] = set()  # the divided tasks already reported


def _runs_on_meta(path: Path) -> str | None:
    """None when the task file's Model runs on its inputs as meta tensors (shapes only),
    else why not (the error's first line). Cached per file and text."""
    key = f"{path}:{hashlib.sha1(path.read_bytes()).hexdigest()}"
    if key not in _META_RUNS:
        import torch

        try:
            module = load_module(path)
            with torch.device("meta"), torch.no_grad():
                model = module.Model(*module.get_init_inputs())
                model(*module.get_inputs())
            _META_RUNS[key] = None
        except Exception as exc:  # the Model's own error, whatever it is
            _META_RUNS[key] = (
                f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            )
    return _META_RUNS[key]
