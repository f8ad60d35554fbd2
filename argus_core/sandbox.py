"""Tracing DSL source that nobody reviewed (an LLM's) without running it in this process.

Two layers. `check_source` reads the module's syntax tree and rejects, naming the line,
anything a DSL module has no use for: imports other than the DSL front end allows
(`DSLFrontend.allowed_imports`), builtins outside an allowlist, dunder and private
attributes, classes, `try`/`with`, and modules that are not DSL at all (no function marked
with the front end's `kernel_decorator`, `@al.kernel` in the tile DSL). Only then does
`trace_in_child` execute it, in a child Python process under a wall-clock limit (an
infinite loop at trace time is killed) with CPU, memory and file-size limits and with
`__import__`/`open`/`exec`/`eval` refused to the DSL module's own code. The IR comes back
pickled and is unpickled with an allowlist of classes, so even a child that escaped could
not run code in this process.

The sandbox knows no DSL by name: every function takes the front end (`dsl`) whose code it
checks and traces.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import contextvars
import copyreg
import importlib
import importlib.util
import io
import logging
import math
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from argus_core.errors import ConfigError, DSLError

if TYPE_CHECKING:
    from argus_core.protocols import DSLFrontend

log = logging.getLogger(__name__)

# builtins a DSL module may name; every other builtin is refused
SAFE_BUILTINS: frozenset[str] = frozenset(
    {
        "True", "False", "None", "abs", "all", "any", "bool", "divmod", "enumerate",
        "float", "int", "len", "list", "dict", "tuple", "max", "min", "pow", "range",
        "reversed", "round", "sorted", "sum", "zip", "isinstance", "ValueError",
        "NotImplementedError", "AssertionError",
    }
)  # fmt: skip
# refused even when the module binds them itself: they are how sandboxes are escaped
FORBIDDEN_NAMES: frozenset[str] = frozenset(
    {
        "__import__", "open", "exec", "eval", "compile", "getattr", "setattr", "delattr",
        "hasattr", "globals", "locals", "vars", "dir", "type", "object", "super",
        "breakpoint", "input", "help", "memoryview", "os", "sys", "subprocess", "builtins",
        "importlib", "ctypes", "socket", "shutil", "pathlib", "pickle", "marshal",
    }
)  # fmt: skip
# attributes that reach frames, code or globals without a dunder
FORBIDDEN_ATTRS: frozenset[str] = frozenset(
    {
        "mro", "format", "format_map", "gi_frame", "gi_code", "cr_frame", "cr_code",
        "ag_frame", "f_globals", "f_locals", "f_builtins", "f_back", "f_code", "tb_frame",
        "tb_next", "co_code", "func_globals", "func_code",
    }
)  # fmt: skip
# statements a DSL module never needs, and what to say about them
FORBIDDEN_NODES: dict[type, str] = {
    ast.ClassDef: "class definitions",
    ast.AsyncFunctionDef: "async functions",
    ast.AsyncFor: "async for",
    ast.AsyncWith: "async with",
    ast.Await: "await",
    ast.With: "with statements",
    ast.Try: "try statements",
    ast.Yield: "yield",
    ast.YieldFrom: "yield from",
}
if hasattr(ast, "TryStar"):  # Python 3.11+
    FORBIDDEN_NODES[ast.TryStar] = "try statements"

TRACE_TIMEOUT_S = 20.0  # default wall-clock limit of one trace; ARGUS_TRACE_TIMEOUT_S overrides
CHILD_MEMORY_BYTES = 4 << 30  # address space of the tracing child


def trace_timeout_s() -> float:
    """The trace time limit: `ARGUS_TRACE_TIMEOUT_S` if set (a positive number), else
    TRACE_TIMEOUT_S."""
    raw = os.environ.get("ARGUS_TRACE_TIMEOUT_S")
    if not raw:
        return TRACE_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise DSLError(f"ARGUS_TRACE_TIMEOUT_S={raw!r}: must be a positive number of seconds")
    return value


# --------------------------------------------------------------------------- static check


def _public(module: types.ModuleType) -> frozenset[str]:
    """Attributes of a DSL/stdlib module that DSL code may read: public, not a module (an
    `al.sys` would reach everything), and defined by Argus or plain data for the DSL."""
    names = set()
    for name in dir(module):
        if name.startswith("_"):
            continue
        value = getattr(module, name)
        if isinstance(value, types.ModuleType):
            continue
        owner = getattr(value, "__module__", None) or ""
        if module.__name__ == "math" or owner.startswith(("argus_core", "argus_plugins")):
            names.add(name)
    return frozenset(names)


def _import_bindings(tree: ast.Module) -> dict[str, str]:
    """Import alias -> the dotted name it binds, for every absolute import in `tree`
    (`from a.b import c as d` binds d to "a.b.c"; `import a.b` binds a to "a")."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                out[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                out[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return out


def kernel_marker(dsl: DSLFrontend) -> tuple[str, str]:
    """(module, attribute) of the front end's kernel decorator: `dsl.kernel_decorator`
    ("al.kernel") read through the imports of `dsl.allowed_imports_text`, so DSL code
    may bind the module under any alias. DSLError if the two declarations disagree."""
    alias, _, attr = dsl.kernel_decorator.rpartition(".")
    try:
        bindings = _import_bindings(ast.parse(dsl.allowed_imports_text))
    except SyntaxError:
        bindings = {}
    if not attr or alias not in bindings:
        raise DSLError(
            f"dsl={dsl.name}: kernel_decorator {dsl.kernel_decorator!r} must be "
            f"`<alias>.<name>` with an alias that allowed_imports_text "
            f"({dsl.allowed_imports_text!r}) imports"
        )
    return bindings[alias], attr


def _bound_names(tree: ast.Module) -> set[str]:
    """Every name the module binds: defs, parameters, assignment and loop targets,
    comprehension and lambda variables, import aliases."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.Lambda):
            if isinstance(node, ast.FunctionDef):
                bound.add(node.name)
            a = node.args
            for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg):
                if arg is not None:
                    bound.add(arg.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            bound.add(node.id)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
    return bound


class _Checker(ast.NodeVisitor):
    def __init__(self, filename: str, dsl: DSLFrontend):
        self.filename = filename
        self.allowed: Mapping[str, frozenset[str] | None] = dsl.allowed_imports
        self.allowed_text = dsl.allowed_imports_text
        self.modules: dict[str, frozenset[str]] = {}  # import alias -> readable attributes
        self.bindings: dict[str, str] = {}  # import alias -> the module it names
        self.bound: set[str] = set()

    def fail(self, node: ast.AST, message: str) -> DSLError:
        return DSLError(message, f"{self.filename}:{getattr(node, 'lineno', 1)}")

    def generic_visit(self, node: ast.AST) -> None:
        what = FORBIDDEN_NODES.get(type(node))
        if what is not None:
            raise self.fail(node, f"not allowed in DSL code: {what}")
        super().generic_visit(node)

    # imports ------------------------------------------------------------------
    def _import_error(self, node: ast.AST, text: str) -> DSLError:
        return self.fail(
            node, f"import not allowed: {text!r}; DSL code may import only: {self.allowed_text}"
        )

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name not in self.allowed or self.allowed[alias.name] is not None:
                raise self._import_error(node, f"import {alias.name}")
            self._bind_module(alias.asname or alias.name, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        names = self.allowed.get(module, frozenset()) if node.level == 0 else frozenset()
        for alias in node.names:
            if module not in self.allowed or (names is not None and alias.name not in names):
                raise self._import_error(
                    node, f"from {'.' * node.level}{module} import {alias.name}"
                )
            if module != "__future__":
                self._bind_module(alias.asname or alias.name, f"{module}.{alias.name}")

    def _bind_module(self, alias: str, dotted: str) -> None:
        try:
            value = importlib.import_module(dotted)
        except ImportError:
            return  # `from math import sqrt`: a function, read like any other name
        self.modules[alias] = _public(value)
        self.bindings[alias] = dotted

    # names and attributes -----------------------------------------------------
    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        if name in FORBIDDEN_NAMES or (name.startswith("__") and name.endswith("__")):
            raise self.fail(node, f"name not allowed in DSL code: {name!r}")
        if isinstance(node.ctx, ast.Load) and name not in self.bound and name not in SAFE_BUILTINS:
            raise self.fail(
                node,
                f"name not allowed in DSL code: {name!r} (neither defined in the module nor an "
                f"allowed builtin: {', '.join(sorted(SAFE_BUILTINS))})",
            )

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        if attr.startswith("_") or attr in FORBIDDEN_ATTRS:
            raise self.fail(node, f"attribute not allowed in DSL code: {attr!r}")
        base = node.value
        if isinstance(base, ast.Name) and base.id in self.modules:
            if attr not in self.modules[base.id]:
                raise self.fail(
                    node, f"{base.id}.{attr} is not part of the DSL (no such public name)"
                )
        self.generic_visit(node)


def _is_kernel(node: ast.FunctionDef, aliases: set[str], attr: str) -> bool:
    """True when `node` is decorated with `<alias>.<attr>` (or a call of it) for one of
    `aliases`, the names the module binds to the DSL's kernel-decorator module."""
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if (
            isinstance(target, ast.Attribute)
            and target.attr == attr
            and isinstance(target.value, ast.Name)
            and target.value.id in aliases
        ):
            return True
    return False


def check_source(dsl: DSLFrontend, source: str, filename: str = "<llm>") -> None:
    """Return only if `source` is a module of `dsl` fit to trace; else raise DSLError
    naming `filename:line` and the kind: "no code", "syntax error", "import not allowed"
    (outside `dsl.allowed_imports`), "name not allowed", "attribute not allowed", "not
    allowed in DSL code" (a class, try, with, ...) or "not DSL" (no function marked with
    `dsl.kernel_decorator`). Nothing is executed."""
    if not source or not source.strip():
        raise DSLError("no code: the source is empty", f"{filename}:1")
    try:
        tree = ast.parse(source, filename)
    except SyntaxError as exc:
        raise DSLError(f"syntax error: {exc.msg}", f"{filename}:{exc.lineno or 1}") from None
    module, attr = kernel_marker(dsl)
    checker = _Checker(filename, dsl)
    checker.bound = _bound_names(tree)
    # imports first, so attribute checks know every module alias wherever it is used
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            checker.visit(node)
    checker.visit(tree)
    funcs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    aliases = {a for a, dotted in checker.bindings.items() if dotted == module}
    if not any(_is_kernel(f, aliases, attr) for f in funcs):
        line = funcs[0].lineno if funcs else 1
        marker = dsl.kernel_decorator
        raise DSLError(
            f"not DSL: the module defines no @{marker} function (a {dsl.name} DSL module "
            f"imports `{dsl.allowed_imports_text}` and decorates its kernels with @{marker})",
            f"{filename}:{line}",
        )


# --------------------------------------------------------------------------- OS isolation
#
# Every process that runs untrusted code (tracing an LLM's DSL module, a `kernel.source`
# file, a candidate's correctness and timing, a ModelNew) is started by `run_isolated`:
# under bubblewrap (a maintained, setuid-free sandbox that uses Linux namespaces) with an
# empty environment, no network, a private PID namespace, a read-only view of only the
# Python installation and Argus's own packages, a size-limited private /tmp as its only
# writable place, no capabilities, and resource limits. docs/security.md is the threat model.

SANDBOX_MODES: tuple[str, ...] = ("auto", "bwrap", "none")
SANDBOX_ENV = "ARGUS_SANDBOX"  # the mode when `configure` was not called (`sandbox=` in a run)
SCRATCH_BYTES = 1 << 30  # size of the private /tmp (the only writable place)
FILE_BYTES = 256 << 20  # RLIMIT_FSIZE: no file (stdout/stderr included) grows beyond this
OUTPUT_TAIL_BYTES = 4096  # untrusted text kept in an error message (the rest is dropped)
MAX_TASKS = 512  # processes + threads of one sandbox (a fork bomb stops here)
# variables an isolated process may receive from the parent (everything else is dropped:
# API keys, tokens, paths of the store)
PASSTHROUGH_ENV: frozenset[str] = frozenset(
    {
        "CUDA_VISIBLE_DEVICES",
        "HIP_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
        "TRITON_INTERPRET",
        "PYTHONPATH",  # only its folders that `_readable_roots` mounts are there to read
    }
)

_configured: str | None = None
_warned_none = False
_cgroup_seq = 0


class SandboxError(ConfigError):
    """Untrusted code was refused: no OS isolation here and `sandbox=none` was not given,
    or an unknown sandbox mode. A candidate refused so fails at stage `security`."""

    stage = "security"


def configure(mode: str | None) -> None:
    """Set the sandbox mode of this process (the run's `sandbox` config key): "auto" (bubblewrap,
    refusing untrusted code where it does not work), "bwrap" (the same, named) or "none"
    (run untrusted code unisolated, with a warning on every run). None: back to
    `$ARGUS_SANDBOX`, default "auto"."""
    global _configured
    if mode is not None and mode not in SANDBOX_MODES:
        raise SandboxError(
            f"sandbox={mode!r} is not a sandbox mode; valid choices: {', '.join(SANDBOX_MODES)}"
        )
    _configured = mode
    if mode is not None:
        os.environ[SANDBOX_ENV] = mode  # so child processes of this run (sweeps) agree


def sandbox_mode() -> str:
    mode = _configured or os.environ.get(SANDBOX_ENV) or "auto"
    if mode not in SANDBOX_MODES:
        raise SandboxError(
            f"{SANDBOX_ENV}={mode!r} is not a sandbox mode; valid choices: "
            f"{', '.join(SANDBOX_MODES)}"
        )
    return mode


_probe: tuple[bool, str] | None = None
_probed_path: str | None = None


def bwrap_path() -> str | None:
    """The bubblewrap binary: `$ARGUS_BWRAP` if set (a path), else `bwrap` on PATH."""
    env = os.environ.get("ARGUS_BWRAP")
    if env:
        return env if os.access(env, os.X_OK) else None
    return shutil.which("bwrap")


def isolation_problem() -> str | None:
    """None when bubblewrap isolates processes here, else why not (probed once per binary:
    bwrap must exist and create user, PID and network namespaces)."""
    global _probe, _probed_path
    bwrap = bwrap_path()
    if _probe is None or bwrap != _probed_path:
        _probed_path = bwrap
        if bwrap is None:
            where = os.environ.get("ARGUS_BWRAP") or "on PATH"
            _probe = (
                False,
                f"bubblewrap (`bwrap`) is not installed ({where}; apt-get install bubblewrap)",
            )
        else:
            probe = subprocess.run(
                [bwrap, *_namespace_args(), "--ro-bind", "/", "/", "--", "/bin/true"],
                capture_output=True,
                timeout=30,
            )
            why = probe.stderr.decode(errors="replace").strip()[:300]
            _probe = (probe.returncode == 0, f"bwrap cannot create namespaces here: {why}")
    return None if _probe[0] else _probe[1]


_trusted: contextvars.ContextVar[bool] = contextvars.ContextVar("argus_trusted", default=False)


@contextlib.contextmanager
def trusted_code(trusted: bool = True) -> Iterator[None]:
    """Within this block, processes started by `run_isolated` run code Argus made itself
    (its own lowering of a kernel it did not take from an LLM or a user's file): isolated
    where isolation works, and without it, silently, where it does not. Outside (the
    default), everything `run_isolated` starts is untrusted."""
    token = _trusted.set(trusted)
    try:
        yield
    finally:
        _trusted.reset(token)


def require_isolation(what: str) -> bool:
    """True if `what` (untrusted code about to run) will run under bubblewrap, False if the
    user chose `sandbox=none` (logged loudly) or the code is trusted (`trusted_code`) and
    isolation does not work here. SandboxError when isolation does not work here for
    untrusted code and the user did not choose `sandbox=none`."""
    global _warned_none
    mode = sandbox_mode()
    if mode != "none" and _trusted.get() and isolation_problem() is not None:
        return False
    if mode == "none":
        if not _warned_none:
            log.warning(
                "SANDBOX DISABLED (sandbox=none): %s and all other untrusted code run with "
                "your privileges, environment (API keys) and files",
                what,
            )
            _warned_none = True
        return False
    problem = isolation_problem()
    if problem is not None:
        raise SandboxError(
            f"refusing to run {what} without OS isolation: {problem}. Install bubblewrap, or "
            f"pass sandbox=none to run untrusted code unisolated (valid choices: "
            f"{', '.join(SANDBOX_MODES)})"
        )
    return True


_nested_userns_flag: dict[str | None, list[str]] = {}


def _no_nested_userns() -> list[str]:
    """`--unshare-user --disable-userns` where this bwrap has it (0.8+): code inside cannot
    create user namespaces of its own (less kernel surface); [] for an older bwrap."""
    bwrap = bwrap_path()
    if bwrap not in _nested_userns_flag:
        try:
            run = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=30)
            supported = bwrap is not None and "--disable-userns" in run.stdout
        except (OSError, TypeError, subprocess.SubprocessError):
            supported = False
        _nested_userns_flag[bwrap] = ["--unshare-user", "--disable-userns"] if supported else []
    return _nested_userns_flag[bwrap]


def _namespace_args() -> list[str]:
    return [
        "--unshare-all",  # user, pid, net, ipc, uts, cgroup namespaces
        *_no_nested_userns(),
        "--cap-drop", "ALL",
        "--die-with-parent",
        "--new-session",  # no TIOCSTI into the parent's terminal
    ]  # fmt: skip


ARGUS_PACKAGES = ("argus_core", "argus_plugins", "argus_conf")


def _readable_roots() -> list[str]:
    """What an isolated Python needs to read: the system's /usr and /etc, the Python
    installation and environment, the site directories on sys.path, and Argus's own
    package folders (not the repository around them: no store, no MLflow database, no
    configs)."""
    import argus_core

    roots = ["/usr", "/etc", sys.base_prefix, sys.prefix, os.path.dirname(sys.executable)]
    roots.append(os.path.dirname(os.path.abspath(argus_core.__file__)))
    # the plugins' folder, found without importing them (the core never imports plugins)
    spec = importlib.util.find_spec("argus_plugins")
    roots.extend(spec.submodule_search_locations or [] if spec is not None else [])
    # site directories on sys.path outside the environment (the user site, or one a .pth
    # line adds: the dependencies of another environment) hold installed packages only
    roots.extend(
        e for e in sys.path
        if os.path.basename(e.rstrip("/")) in ("site-packages", "dist-packages")
    )  # fmt: skip
    # $PYTHONPATH (passed on): a folder holding Argus's packages (a checkout) gives only
    # those packages; any other folder (installed wheels) is given whole
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if not entry or not os.path.isdir(entry):
            continue
        packages = [os.path.join(entry, name) for name in ARGUS_PACKAGES]
        found = [pkg for pkg in packages if os.path.isdir(pkg)]
        roots.extend(found or [entry])
    real = [os.path.realpath(r) for r in roots]
    out: list[str] = []
    for r in sorted(set(roots + real)):
        if os.path.isdir(r) and not any(r.startswith(o + "/") or r == o for o in out):
            out.append(r)
    return out


def bwrap_argv(argv: Sequence[str], env: Mapping[str, str], device: bool) -> list[str]:
    """The bubblewrap command line that runs `argv` isolated with exactly `env`; `device`
    exposes /dev, /sys and /opt read-only (a GPU runner needs its device files)."""
    args = [bwrap_path() or "bwrap", *_namespace_args()]
    # the private /tmp first, so what lives under the host's /tmp can be bound on top of it
    args += ["--size", str(SCRATCH_BYTES), "--tmpfs", "/tmp"]
    for path in _readable_roots():
        args += ["--ro-bind", path, path]
    for link in ("/bin", "/sbin", "/lib", "/lib64", "/lib32"):
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    if device:
        args += ["--dev-bind", "/dev", "/dev", "--ro-bind", "/sys", "/sys"]
        if os.path.isdir("/opt"):
            args += ["--ro-bind", "/opt", "/opt"]
    else:
        args += ["--dev", "/dev"]
    args += ["--proc", "/proc"]
    args += ["--chdir", "/tmp", "--clearenv"]
    for key, value in env.items():
        args += ["--setenv", key, value]
    return [*args, "--", *argv]


def isolated_env(extra: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """The whole environment of an isolated process: a fixed base, the parent's
    PASSTHROUGH_ENV, then `extra` (None removes a key)."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "TRITON_CACHE_DIR": "/tmp/triton-cache",
        "ARGUS_KERNEL_DIR": "/tmp/argus-kernels",
        "MLFLOW_DISABLE_TELEMETRY": "true",
        SANDBOX_ENV: "bwrap",
    }
    env.update({k: v for k, v in os.environ.items() if k in PASSTHROUGH_ENV})
    for key, value in (extra or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def _task_cgroup() -> str | None:
    """A fresh pids cgroup capped at MAX_TASKS (root only, cgroup v1 or v2), or None."""
    global _cgroup_seq
    if os.geteuid() != 0:
        return None
    for base in ("/sys/fs/cgroup/pids", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"):
        if not os.path.exists(os.path.join(base, "cgroup.procs")):
            continue
        _cgroup_seq += 1
        path = os.path.join(base, f"argus-sandbox-{os.getpid()}-{_cgroup_seq}")
        try:
            os.mkdir(path)
            with open(os.path.join(path, "pids.max"), "w") as f:
                f.write(str(MAX_TASKS))
            return path
        except OSError:
            with contextlib.suppress(OSError):
                os.rmdir(path)
    return None


def _cgroup_cleanup(path: str | None) -> None:
    if path is None:
        return
    for _ in range(50):
        try:
            with open(os.path.join(path, "cgroup.procs")) as f:
                pids = [int(p) for p in f.read().split()]
        except OSError:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        try:
            os.rmdir(path)
            return
        except OSError:
            time.sleep(0.02)


def _limits(
    cpu_s: int, memory_bytes: int | None, cgroup: str | None, file_bytes: int = FILE_BYTES
) -> Any:
    """preexec_fn of the sandbox: join the task cgroup (or cap RLIMIT_NPROC for a
    non-root user), then CPU-time, address-space, file-size and core-dump limits."""

    def apply() -> None:
        import resource

        if cgroup is not None:
            with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
                f.write("0")
        elif os.geteuid() != 0:
            running = sum(1 for p in os.listdir("/proc") if p.isdigit())
            cap = running + MAX_TASKS
            resource.setrlimit(resource.RLIMIT_NPROC, (cap, cap))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
        if memory_bytes is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


@dataclass
class IsolatedRun:
    """What an isolated process left: exit status (negative: killed by that signal), its
    stdout (bytes, whole up to FILE_BYTES) and the tail of its stderr (text, at most
    OUTPUT_TAIL_BYTES: untrusted), wall seconds, and whether it was killed on timeout."""

    returncode: int
    stdout: bytes
    stderr: str
    seconds: float
    timed_out: bool
    isolated: bool


def truncate(text: str, limit: int = OUTPUT_TAIL_BYTES) -> str:
    """Untrusted text cut to about `limit` characters (head and tail kept, the cut named)."""
    text = str(text)
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


def run_isolated(
    argv: Sequence[str],
    stdin: bytes,
    timeout_s: float,
    *,
    what: str,
    env: Mapping[str, str | None] | None = None,
    device: bool = False,
    memory_bytes: int | None = CHILD_MEMORY_BYTES,
    cpu_s: int | None = None,
    stdout_bytes: int = 0,
    pass_fds: Sequence[int] = (),
) -> IsolatedRun:
    """Run `argv` (untrusted code: `what` names it in errors) with `stdin`, isolated
    (`require_isolation`), killed with every process it started after `timeout_s` wall
    seconds. `env` adds to `isolated_env` (None removes). With sandbox=none it runs
    unisolated with the parent's environment, still in its own session and limits.
    `stdout_bytes`: the most stdout the caller expects (a worker's outputs); the file-size
    limit is raised above FILE_BYTES to hold it (the parent reads it all anyway).
    `pass_fds`: descriptors the child inherits (the pipes of a GPU's gate).
    SandboxError when isolation is required but unavailable; never raises for what the
    process does."""
    isolated = require_isolation(what)
    cpu = cpu_s if cpu_s is not None else 2 * math.ceil(timeout_s) + 5
    if isolated:
        full_env = isolated_env(env)
        cmd = bwrap_argv(argv, full_env, device)
        cgroup = _task_cgroup()
    else:
        full_env = dict(os.environ)
        for key, value in (env or {}).items():
            if value is None:
                full_env.pop(key, None)
            elif key not in ("TRITON_CACHE_DIR", "ARGUS_KERNEL_DIR", "HOME", "TMPDIR"):
                full_env[key] = value
        cmd, cgroup = list(argv), None
    if device:
        memory_bytes = None  # a GPU runtime reserves far more address space than it uses
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=err,
                env=full_env,
                start_new_session=True,
                pass_fds=tuple(pass_fds),
                preexec_fn=_limits(
                    cpu, memory_bytes, cgroup, max(FILE_BYTES, int(stdout_bytes) + (1 << 20))
                ),
            )
        except BaseException:
            _cgroup_cleanup(cgroup)
            raise
        timed_out = False
        try:
            proc.communicate(stdin, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        except BrokenPipeError:  # it exited (or closed stdin) before reading its input
            pass
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # bwrap: its PID namespace goes with it
            _cgroup_cleanup(cgroup)
            proc.wait()
        seconds = time.perf_counter() - start
        out.seek(0)
        stdout = out.read()
        err.seek(0, os.SEEK_END)
        size = err.tell()
        err.seek(max(0, size - OUTPUT_TAIL_BYTES))
        stderr = err.read().decode(errors="replace")
    code = proc.returncode
    if isolated and code > 128 and (code - 128) in signal.valid_signals():
        code = 128 - code  # bwrap reports its child's death by signal N as status 128+N
    return IsolatedRun(code, stdout, stderr, seconds, timed_out, isolated)


# --------------------------------------------------------------------------- child trace


def trace_in_child(
    dsl: DSLFrontend,
    source: str,
    entry: str,
    filename: str = "<llm>",
    timeout_s: float | None = None,
) -> Any:
    """The KernelIR of `entry`, traced by `dsl.parse` in a child process killed after
    `timeout_s` seconds (default `trace_timeout_s()`). `dsl` is pickled to the child, so
    it must pickle (a plain front-end object does). Raises DSLError: "trace timed out
    after Ns", or the child's own DSLError (with its line), or the child's crash. Call
    `check_source` first: this executes the module."""
    return trace_all_in_child(dsl, source, [entry], filename, timeout_s)[0]


def trace_all_in_child(
    dsl: DSLFrontend,
    source: str,
    entries: Sequence[str],
    filename: str = "<llm>",
    timeout_s: float | None = None,
) -> list[Any]:
    """`trace_in_child` for several kernels of one module, in one child (MoE has five)."""
    limit = float(timeout_s) if timeout_s is not None else trace_timeout_s()
    payload = pickle.dumps(
        {
            "dsl": dsl,
            "source": source,
            "entries": list(entries),
            "filename": filename,
            "cpu_s": math.ceil(limit) + 1,
        }
    )
    run = run_isolated(
        [sys.executable, "-m", "argus_core.sandbox"],
        payload,
        limit,
        what=f"tracing untrusted DSL code {filename}",
        env={"TRITON_INTERPRET": None},
        cpu_s=math.ceil(limit) + 1,
    )
    if run.timed_out:  # run_isolated has killed the child and all it started
        raise DSLError(f"trace timed out after {limit:g}s", filename)
    if run.returncode != 0 or not run.stdout:
        lines = run.stderr.strip().splitlines()
        raise DSLError(
            f"trace crashed (exit {run.returncode}): "
            f"{truncate(lines[-1]) if lines else 'no output'}",
            filename,
        )
    try:
        reply = _SafeUnpickler(io.BytesIO(run.stdout)).load()
    except Exception as exc:  # noqa: BLE001 - whatever the child sent, it is not IR
        raise DSLError(
            f"the tracing child sent no IR: {truncate(str(exc), 300)}", filename
        ) from None
    if not isinstance(reply, dict):
        raise DSLError("the tracing child sent no IR", filename)
    if "error" in reply:
        raise DSLError(
            truncate(str(reply["error"])),
            reply.get("where") if isinstance(reply.get("where"), str) else None,
        )
    return reply["irs"]


def parse_candidate(
    dsl: DSLFrontend, cand: Any, entries: Sequence[str], timeout_s: float | None = None
) -> list[Any]:
    """The IR of each of `entries` in an LLM candidate's source: `check_source`, then one
    child trace (`trace_all_in_child`, killed after `timeout_s`; None: the default limit).
    A candidate without source fails with its `note` (the planner's reason: no code in the
    reply, a failed request)."""
    filename = f"<{cand.id}>"
    if not cand.source.strip():
        raise DSLError(cand.note or "no code: the candidate's source is empty", f"{filename}:1")
    check_source(dsl, cand.source, filename)
    return trace_all_in_child(dsl, cand.source, entries, filename, timeout_s)


# classes the IR is made of; anything else in a child's reply is refused
_SAFE_BUILTIN_CLASSES = frozenset(
    {"list", "dict", "tuple", "set", "frozenset", "int", "float", "str", "bool", "bytes",
     "complex", "slice", "range", "NoneType", "object"}
)  # fmt: skip


class _SafeUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name in _SAFE_BUILTIN_CLASSES:
            return getattr(builtins, name)
        if module == "copyreg" and name == "_reconstructor":
            return copyreg._reconstructor
        if module.startswith(("argus_core.", "argus_plugins.")) and module != __name__:
            value = getattr(importlib.import_module(module), name, None)
            if isinstance(value, type):
                return value
        raise pickle.UnpicklingError(f"the tracing child sent {module}.{name}, not IR data")


def _guard_dsl_code(allowed: Mapping[str, frozenset[str] | None]) -> None:
    """In the child: refuse `__import__` beyond `allowed` (the front end's allowlist) and
    the dangerous builtins to code of the DSL module being traced (its namespace is named
    `argus_dsl_*`); the front end itself keeps them."""
    real_import = builtins.__import__

    def from_dsl(depth: int) -> bool:
        return str(sys._getframe(depth).f_globals.get("__name__", "")).startswith("argus_dsl_")

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002
        if (globals or {}).get("__name__", "").startswith("argus_dsl_") and (
            level or name not in allowed
        ):
            raise ImportError(f"import not allowed in DSL code: {name!r}")
        return real_import(name, globals, locals, fromlist, level)

    builtins.__import__ = guarded_import
    for name in ("open", "exec", "eval", "compile", "getattr", "setattr", "globals", "vars"):
        real = getattr(builtins, name)

        def guarded(*args, _real=real, _name=name, **kwargs):
            if from_dsl(2):
                raise PermissionError(f"{_name}() is not allowed in DSL code")
            return _real(*args, **kwargs)

        setattr(builtins, name, guarded)


def _limit_child(cpu_s: int) -> None:
    try:
        import resource
    except ImportError:  # not POSIX: the wall-clock limit still holds
        return
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY_BYTES, CHILD_MEMORY_BYTES))


def _child_main() -> None:
    """`python -m argus_core.sandbox`: read a pickled request on stdin, write the pickled
    {"irs": [...]} or {"error", "where"} on stdout (the module's prints go to stderr)."""
    request = pickle.loads(sys.stdin.buffer.read())  # from the parent, trusted
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.dont_write_bytecode = True
    _limit_child(int(request["cpu_s"]))
    dsl = request["dsl"]
    _guard_dsl_code(dsl.allowed_imports)
    try:
        irs = [dsl.parse(request["source"], e, request["filename"]) for e in request["entries"]]
        reply: dict[str, Any] = {"irs": irs}
    except DSLError as exc:
        text = str(exc)
        if exc.where and text.startswith(f"{exc.where}: "):
            text = text[len(exc.where) + 2 :]  # the parent's DSLError adds `where` again
        reply = {"error": text, "where": exc.where}
    except BaseException as exc:  # the module's own error: report it, the parent decides
        reply = {"error": f"{type(exc).__name__} while tracing: {exc}", "where": None}
    out.write(pickle.dumps(reply))
    out.flush()


if __name__ == "__main__":
    _child_main()
