"""The sandbox that checks and traces DSL code nobody reviewed (`argus_core.sandbox`).

Each kind of rejected source names its line; the allowlist and the kernel marker are the
DSL front end's declarations (`DSLFrontend.allowed_imports`, `kernel_decorator`), not the
sandbox's; an infinite loop at trace time is killed at the limit; a correct kernel traced in
the child lowers to the same Triton source as in this process.
"""

from __future__ import annotations

import os
import pickle
import sys
from pathlib import Path

import pytest

from argus_core import sandbox
from argus_core.errors import DSLError
from argus_core.planning.actions import grid_lists, start_policy
from argus_core.plugin_manager import Registry, default_plugin_manager
from argus_core.types import Policy
from argus_plugins.dsl.tile.frontend import TileFrontend

ROOT = Path(__file__).resolve().parents[2]
REPLIES = ROOT / "tests" / "fixtures" / "transcripts" / "llm_icrl"  # LLM-written modules

FRONT = TileFrontend()  # the DSL whose allowlist the sandbox enforces
HEAD = "from argus_plugins.dsl.tile import lang as al\n\n\n"
KERNEL = (REPLIES / "repair_fixed.dsl").read_text()  # a correct GEMM (tile views hoisted)


def _kernel_with(line: str) -> str:
    """KERNEL with `line` as the first statement of the kernel body."""
    return KERNEL.replace("    pm, pn =", f"    {line}\n    pm, pn =", 1)


def _line_of(source: str, text: str) -> int:
    return next(i for i, ln in enumerate(source.splitlines(), 1) if text in ln)


# --------------------------------------------------------------------------- check_source

REJECTED = {
    "import": ("import os\n" + KERNEL, "import os", "import not allowed: 'import os'"),
    "from-import": (
        "from os import path\n" + KERNEL,
        "from os",
        "import not allowed: 'from os import path'",
    ),
    "dsl-internals": (
        "from argus_plugins.dsl.tile import tracer\n" + KERNEL,
        "tracer",
        "import not allowed",
    ),
    "open": (_kernel_with("open('x', 'w')"), "open(", "name not allowed in DSL code: 'open'"),
    "dunder-import": (
        _kernel_with("m = __import__('os')"),
        "__import__",
        "name not allowed in DSL code: '__import__'",
    ),
    "eval": (_kernel_with("eval('1')"), "eval(", "name not allowed in DSL code: 'eval'"),
    "getattr": (
        _kernel_with("s = getattr(al, 'sys')"),
        "getattr",
        "name not allowed in DSL code: 'getattr'",
    ),
    "module-of-dsl": (
        _kernel_with("m = al.sys.modules"),
        "al.sys",
        "al.sys is not part of the DSL",
    ),
    "dunder-attr": (
        _kernel_with("g = a.__class__"),
        "__class__",
        "attribute not allowed in DSL code: '__class__'",
    ),
    "frame-attr": (_kernel_with("f = a.gi_frame"), "gi_frame", "attribute not allowed"),
    "undefined": (
        _kernel_with("t = torch.zeros(3)"),
        "torch",
        "name not allowed in DSL code: 'torch'",
    ),
    "class": (KERNEL + "\n\nclass Evil:\n    pass\n", "class Evil", "class definitions"),
    "try": (
        _kernel_with("try:\n        pass\n    except Exception:\n        pass"),
        "try:",
        "try statements",
    ),
    "syntax": (_kernel_with("x = = 1"), "x = = 1", "syntax error"),
    "not-dsl": ((REPLIES / "not_dsl.dsl").read_text(), "def gemm", "not DSL"),
    "dsl-import-only": (HEAD + "def gemm(a):\n    return a\n", "def gemm", "not DSL"),
}


@pytest.mark.parametrize("kind", sorted(REJECTED))
def test_check_source_rejects_and_names_the_line(kind):
    source, at, message = REJECTED[kind]
    with pytest.raises(DSLError, match=message) as info:
        sandbox.check_source(FRONT, source, "<c009>")
    assert info.value.where == f"<c009>:{_line_of(source, at)}"


def test_check_source_rejects_empty_source():
    for source in ("", "  \n\n"):
        with pytest.raises(DSLError, match="no code") as info:
            sandbox.check_source(FRONT, source, "<c009>")
        assert info.value.where == "<c009>:1"


def test_check_source_accepts_every_builtin_kernel_and_planted_bug():
    registry = Registry(default_plugin_manager())
    sources = [registry.get("kernel", n).source() for n in ("gemm", "attention", "moe")]
    planted = sorted((ROOT / "tests/plugins/verifiers/smt/planted").glob("*.py"))
    assert len(planted) >= 10
    for source in [*sources, *(p.read_text() for p in planted), KERNEL]:
        sandbox.check_source(FRONT, source, "<ok>")
    sandbox.check_source(FRONT, "import math\n" + _kernel_with("s = math.sqrt(4)"))


# --------------------------------------------------------------------------- child trace


@pytest.mark.parametrize("family", ["gemm", "attention", "moe"])
def test_child_trace_lowers_like_the_in_process_one(family, argus_config):
    cfg = argus_config(f"+kernel={family}")
    registry = Registry(default_plugin_manager())
    fam, backend = registry.get("kernel", family), registry.get("backend", "mi300x")
    entries = list(getattr(fam, "entries", None) or (fam.entry,))
    source, options = fam.source(), {"dtype": str(cfg.kernel.dtype)}
    tiles = start_policy(grid_lists(cfg.kernel, "tiles"), {}).tiles
    children = sandbox.trace_all_in_child(FRONT, source, entries, "<c001>", timeout_s=30)
    assert [ir.name for ir in children] == entries
    for entry, child in zip(entries, children):
        local = FRONT.parse(source, entry, "<c001>")
        names = {c.name for c in local.constexprs}
        policy = Policy({k: v for k, v in tiles.items() if k in names}, {})
        lowered = backend.lower(child, policy, options).source
        assert lowered == backend.lower(local, policy, options).source


def test_infinite_loop_is_killed_at_the_limit():
    source = (REPLIES / "infinite_loop.dsl").read_text()
    sandbox.check_source(FRONT, source, "<c002>")  # syntactically fine: only the limit stops it
    # the message names the limit it was killed at (the speed target lives in benchmarks/)
    with pytest.raises(DSLError, match=r"trace timed out after 1.5s"):
        sandbox.trace_in_child(FRONT, source, "gemm", "<c002>", timeout_s=1.5)


def test_child_reports_trace_errors_with_their_line():
    source = _kernel_with("al.store(c.tile(BM, BN)[pm, pn])")  # pm is not defined yet
    with pytest.raises(DSLError) as info:
        sandbox.trace_in_child(FRONT, source, "gemm", "<c004>", timeout_s=30)
    assert info.value.where is not None and info.value.where.startswith("<c004>")
    assert "pm" in str(info.value)
    with pytest.raises(DSLError, match="no @al.kernel named 'gemm_v2'"):
        sandbox.trace_in_child(FRONT, KERNEL, "gemm_v2", "<c004>", timeout_s=30)


def test_child_refuses_forbidden_code_even_without_the_static_check(tmp_path):
    """Defence in depth: `trace_in_child` alone (no `check_source`) still refuses imports
    and `open` to DSL code, and nothing outside the DSL runs."""
    marker = tmp_path / "marker"
    opener = _kernel_with(f"open({str(marker)!r}, 'w').write('x')")
    with pytest.raises(DSLError, match=r"open\(\) is not allowed in DSL code"):
        sandbox.trace_in_child(FRONT, opener, "gemm", "<c005>", timeout_s=30)
    importer = f"import os\nos.makedirs({str(marker)!r})\n" + KERNEL
    with pytest.raises(DSLError, match="import not allowed in DSL code: 'os'"):
        sandbox.trace_in_child(FRONT, importer, "gemm", "<c005>", timeout_s=30)
    assert not marker.exists()


def test_reply_unpickler_takes_ir_classes_only():
    evil = pickle.dumps(os.system)  # what an escaped child could send to run code here
    with pytest.raises(pickle.UnpicklingError, match="not IR data"):
        sandbox._SafeUnpickler(__import__("io").BytesIO(evil)).load()


# --------------------------------------------------------------------------- the DSL's declarations


def _front(**declared) -> TileFrontend:
    """The tile front end with some declarations replaced (instance attributes, so the
    object still pickles to the tracing child)."""
    front = TileFrontend()
    for name, value in declared.items():
        setattr(front, name, value)
    return front


NO_MATH = {
    "allowed_imports": {"argus_plugins.dsl.tile": frozenset({"lang"})},
    "allowed_imports_text": "from argus_plugins.dsl.tile import lang as al",
}


def test_the_allowlist_is_the_dsl_front_ends():
    source = "import math\n" + _kernel_with("s = math.sqrt(4)")
    sandbox.check_source(FRONT, source)  # the tile DSL allows math
    with pytest.raises(DSLError, match="import not allowed: 'import math'") as info:
        sandbox.check_source(_front(**NO_MATH), source, "<c010>")
    assert info.value.where == "<c010>:1"
    assert str(info.value).endswith(
        "DSL code may import only: from argus_plugins.dsl.tile import lang as al"
    )
    # the tracing child refuses what this front end refuses, even without the static check
    with pytest.raises(DSLError, match="import not allowed in DSL code: 'math'"):
        sandbox.trace_in_child(_front(**NO_MATH), source, "gemm", "<c010>", timeout_s=30)


def test_the_kernel_marker_is_read_through_the_dsl_imports():
    # another alias in the declaration: code may bind the module under any alias
    renamed = _front(
        allowed_imports_text="from argus_plugins.dsl.tile import lang as tl",
        kernel_decorator="tl.kernel",
    )
    sandbox.check_source(renamed, KERNEL)  # `@al.kernel` is the same decorator
    with pytest.raises(DSLError, match=r"not DSL: the module defines no @tl\.kernel function"):
        sandbox.check_source(renamed, HEAD + "def gemm(a):\n    return a\n")
    assert sandbox.kernel_marker(FRONT) == ("argus_plugins.dsl.tile.lang", "kernel")
    with pytest.raises(DSLError, match="kernel_decorator 'xx.kernel' must be"):
        sandbox.check_source(_front(kernel_decorator="xx.kernel"), KERNEL)


def test_stdout_past_the_file_size_limit_only_where_the_caller_expects_it(monkeypatch):
    # a worker's outputs may pass FILE_BYTES (real KernelBench sizes); only then is the
    # limit raised, to what the caller said it expects
    import sys

    monkeypatch.setattr(sandbox, "FILE_BYTES", 1 << 20)
    code = "import sys; sys.stdout.buffer.write(b'x' * (3 << 20)); sys.stdout.flush()"
    argv = [sys.executable, "-c", code]
    run = sandbox.run_isolated(argv, b"", 60, what="a test")
    assert run.returncode != 0 and len(run.stdout) <= 1 << 20
    run = sandbox.run_isolated(argv, b"", 60, what="a test", stdout_bytes=3 << 20)
    assert run.returncode == 0 and run.stdout == b"x" * (3 << 20)


def test_site_directories_on_sys_path_are_readable_but_not_other_folders(tmp_path, monkeypatch):
    """A site-packages a .pth line adds (the dependencies of another environment, as
    .ci/wheel_check does) is bound read-only in the sandbox; a plain folder on sys.path (a
    checkout, the working directory) is not."""
    from argus_core import sandbox

    site = tmp_path / "other-env" / "lib" / "site-packages"
    plain = tmp_path / "repo"
    site.mkdir(parents=True)
    plain.mkdir()
    monkeypatch.setattr(sys, "path", [*sys.path, str(site), str(plain)])
    roots = sandbox._readable_roots()
    assert str(site) in roots and str(plain) not in roots
