"""The import graph of the shipped packages: one-way, acyclic, plugins apart.

Walks every `import` statement with `ast`, function-level ones too (an import inside a
function that closes a cycle is still a cycle, only hidden), and fails on:

- an edge `argus_core.* -> argus_plugins.*` (core knows plugins by name only: the list of
  built-in module names in `plugin_manager` is strings, not imports);
- an edge from one plugin into another plugin's modules (a plugin is
  `argus_plugins.<kind>.<name>`), except into a plugin's declared public surface
  (`PUBLIC`: the DSL's language module, which kernel source files are written in);
- any cycle among the modules.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"argus_core": "argus_core", "argus_plugins": "plugins", "argus_conf": "conf"}
# modules other plugins may import: DSL kernels name the language they are written in
PUBLIC = ("argus_plugins.dsl.tile.lang", "argus_plugins.dsl.explicit.lang")


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for name, folder in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join((name, *parts))] = path
    return mods


MODULES = _modules()


def _imports(name: str, path: Path) -> Iterator[tuple[str, int]]:
    """(imported module, line) for every import in the file, resolved to a known module
    where one matches (`from a.b import c` is `a.b.c` when that is a module, else `a.b`)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                full = f"{module}.{alias.name}"
                yield (full if full in MODULES else module), node.lineno


EDGES: dict[str, list[tuple[str, int]]] = {
    name: sorted({(t, ln) for t, ln in _imports(name, path) if t.startswith(tuple(PACKAGES))})
    for name, path in MODULES.items()
}


def _plugin(module: str) -> str | None:
    """`argus_plugins.<kind>.<name>` for a module inside a plugin, else None."""
    parts = module.split(".")
    return ".".join(parts[:3]) if parts[0] == "argus_plugins" and len(parts) >= 3 else None


def test_the_walk_sees_the_packages():
    assert "argus_core.pipeline" in MODULES and "argus_core.plugin_manager" in MODULES
    assert any(m.startswith("argus_plugins.backends.") for m in MODULES)
    assert sum(len(v) for v in EDGES.values()) > 100


def test_core_never_imports_plugins():
    bad = [
        f"{src} -> {tgt} (line {ln})"
        for src, targets in EDGES.items()
        if src.startswith("argus_core")
        for tgt, ln in targets
        if tgt.startswith("argus_plugins")
    ]
    assert not bad, "argus_core imports plugins:\n" + "\n".join(bad)


def test_no_plugin_imports_another_plugins_internals():
    bad = []
    for src, targets in EDGES.items():
        mine = _plugin(src)
        if mine is None:
            continue
        for tgt, ln in targets:
            theirs = _plugin(tgt)
            if theirs and theirs != mine and not tgt.startswith(PUBLIC):
                bad.append(f"{src} -> {tgt} (line {ln})")
    assert not bad, "a plugin imports another plugin's modules:\n" + "\n".join(bad)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycles():
    graph = {m: {t for t, _ in EDGES[m] if t in MODULES and t != m} for m in MODULES}
    cycles = _cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


@pytest.mark.parametrize(
    "graph,expected",
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"a"}, "c": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"d"}}, [["a", "b", "c"]]),
    ],
)
def test_the_cycle_finder_finds_cycles(graph, expected):
    assert _cycles(graph) == expected


# the modules that drive plugins: every plugin capability they use is a declared protocol
# member or hook, never discovered by probing an object for an attribute
DRIVERS = (
    "argus_core.pipeline",
    "argus_core.planning.actions",
    "argus_core.kb",
    "argus_core.evaluate.costmodel",
    "argus_core.verify",
)


@pytest.mark.parametrize("module", DRIVERS)
def test_drivers_never_probe_plugins_for_attributes(module):
    tree = ast.parse(MODULES[module].read_text())
    probes = [
        f"line {node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("hasattr", "getattr")
        # a report's own dataclass fields read by name are data, not capabilities
        and not (
            module == "argus_core.evaluate.costmodel" and ast.unparse(node.args[0]) == "report"
        )
    ]
    assert not probes, f"{module} probes for attributes:\n" + "\n".join(probes)
