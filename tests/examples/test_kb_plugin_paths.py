"""Plugin packages extend the knowledge base: `argus_kb_paths` folders load next to the
built-in `kb/`, plugin kernel families and backends become nameable, and a clash or a bad
location is an error that names where it came from. In-process, with a plugin object
registered on a fresh manager (the installed-package path is tests/examples/
test_example_plugin.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

import argus_conf
from argus_core import kb
from argus_core.hookspecs import hookimpl
from argus_core.kb import KBError, Vocabulary
from argus_core.plugin_manager import make_plugin_manager

BUILTIN = Path(kb.__file__).resolve().parent.parent / "kb"


def entry(tid: str, families: list[str], action: dict) -> str:
    meta = {
        "id": tid,
        "title": "A plugin technique",
        "families": families,
        "targets": ["any"],
        "preconditions": ["N <= 1024"],
        "action": action,
        "invariants": ["store_once"],
        "effect": "faster",
        "hurts": "never",
        "references": ["A title"],
    }
    return "---\n" + yaml.safe_dump(meta, sort_keys=False) + "---\n\nProse about it.\n"


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    """The discovered vocabulary plus a plugin family `rows` (tiles BM, BN; shape M, N)
    and a plugin backend `mine` whose KB target is mi300x."""
    base = Vocabulary.discover()
    return replace(
        base,
        tiles={**base.tiles, "rows": frozenset({"BM", "BN"})},
        shapes={**base.shapes, "rows": frozenset({"M", "N"})},
        backend_targets={**base.backend_targets, "mine": "mi300x"},
    )


class KBPlugin:
    def __init__(self, *paths: str):
        self.paths = list(paths)

    @hookimpl
    def argus_kb_paths(self) -> list[str]:
        return self.paths


def test_plugin_paths_resolve_directories_and_package_locations(tmp_path):
    pm = make_plugin_manager(autoload=False)
    pm.register(KBPlugin(str(tmp_path), "pkg://argus_conf/kernel"), name="mine")
    pm.register(KBPlugin("pkg://argus_conf.backend"), name="other")
    conf = Path(argus_conf.__file__).parent
    assert kb.plugin_paths(pm) == [tmp_path, conf / "kernel", conf / "backend"]


@pytest.mark.parametrize(
    "location, message",
    [
        ("pkg://no_such_package_xyz/kb", "cannot import package 'no_such_package_xyz'"),
        ("pkg://argus_conf/no_such_dir", "'pkg://argus_conf/no_such_dir' does not exist"),
    ],
)
def test_a_bad_plugin_location_names_the_plugin(location, message):
    pm = make_plugin_manager(autoload=False)
    pm.register(KBPlugin(location), name="broken_plugin")
    with pytest.raises(KBError, match=message) as err:
        kb.plugin_paths(pm)
    assert "plugin 'broken_plugin'" in str(err.value)


def test_a_plugin_entry_for_a_plugin_family_loads_and_is_queried(tmp_path, vocab):
    action = {"kind": "policy", "set": {"BM": [16, 32], "num_warps": [4, 8]}}
    (tmp_path / "rows_tiles.md").write_text(entry("rows_tiles", ["rows"], action))
    base = kb.load([BUILTIN, tmp_path], vocab)
    assert "rows" in base.families
    on_rows = {t.id for t in base.query(family="rows", kind="policy")}
    assert "rows_tiles" in on_rows and "split_k" not in on_rows
    assert all(kb.ANY in base.get(i).families for i in on_rows - {"rows_tiles"})
    assert base.get("rows_tiles").action.tiles == {"BM": (16, 32)}
    assert "rows_tiles" not in {t.id for t in base.query(family="rows", shape={"N": 4096})}
    # a plugin backend's KB target decides which target-specific entries apply to it
    on_mine = {t.id for t in base.query(family="gemm", target="mine")}
    assert on_mine == {t.id for t in base.query(family="gemm", target="mi300x")}
    with pytest.raises(KBError, match="mine"):
        base.query(target="theirs")


def test_an_entry_naming_a_tile_its_plugin_family_lacks_names_file_and_field(tmp_path, vocab):
    action = {"kind": "policy", "set": {"BK": [32]}}
    path = tmp_path / "rows_bk.md"
    path.write_text(entry("rows_bk", ["rows"], action))
    with pytest.raises(KBError) as err:
        kb.load(tmp_path, vocab)
    assert err.value.file == str(path) and err.value.field == "action.set.BK"
    assert "neither a tile of rows (BM, BN)" in str(err.value)


def test_an_unknown_family_is_refused_when_no_plugin_provides_it(tmp_path):
    (tmp_path / "rows_tiles.md").write_text(
        entry("rows_tiles", ["rows"], {"kind": "policy", "set": {"num_warps": [4]}})
    )
    with pytest.raises(KBError, match="invalid family 'rows'; valid choices: gemm"):
        kb.load(tmp_path, Vocabulary.discover())
    with pytest.raises(KBError, match="invalid family 'rows'"):
        kb.load(BUILTIN, Vocabulary.discover()).query(family="rows")


def test_an_id_in_a_plugin_and_the_builtin_kb_names_both_files(tmp_path, vocab):
    clash = tmp_path / "split_k.md"
    clash.write_text(entry("split_k", ["gemm"], {"kind": "policy", "set": {"num_warps": [4]}}))
    with pytest.raises(KBError) as err:
        kb.load([BUILTIN, tmp_path], vocab)
    assert err.value.file == str(clash) and err.value.field == "id"
    assert str(BUILTIN / "split_k.md") in str(err.value) and str(clash) in str(err.value)


def test_the_default_paths_add_plugin_folders_after_the_builtin_one(tmp_path, monkeypatch):
    pm = make_plugin_manager(autoload=False)
    pm.register(KBPlugin(str(tmp_path)), name="mine")
    monkeypatch.setattr("argus_core.plugin_manager.default_plugin_manager", lambda: pm)
    assert kb.default_paths() == [BUILTIN, tmp_path]
    monkeypatch.setenv("ARGUS_KB_PATH", str(BUILTIN / "nowhere"))
    assert kb.default_paths() == [BUILTIN / "nowhere", tmp_path]  # the env replaces only kb/


class BackendPlugin:
    """A plugin shipping the backend `mine` and saying which KB target it is."""

    def __init__(self, target: str | None):
        self.target = target

    @hookimpl
    def argus_register_backends(self) -> list[object]:
        space = {"num_warps": [4, 8], "mine_knob": [1, 2]}
        return [type("Mine", (), {"name": "mine", "policy_space": lambda self: space})()]

    @hookimpl
    def argus_kb_targets(self) -> dict[str, str | None]:
        return {"mine": self.target}


def test_a_plugin_declares_the_kb_target_of_its_backend(monkeypatch):
    pm = make_plugin_manager(autoload=False)
    pm.register(BackendPlugin("mi300x"), name="mine")
    monkeypatch.setattr("argus_core.plugin_manager.default_plugin_manager", lambda: pm)
    found = Vocabulary.discover()
    assert found.backend_targets["mine"] == "mi300x"
    assert found.policy_spaces["mi300x"]["mine_knob"] == (1, 2)  # its options join the target's
    assert found.backend_targets["h200"] == "hopper"  # the built-ins keep theirs


def test_an_unknown_kb_target_names_the_backend_and_the_valid_targets(monkeypatch):
    pm = make_plugin_manager(autoload=False)
    pm.register(BackendPlugin("cdna9"), name="mine")
    monkeypatch.setattr("argus_core.plugin_manager.default_plugin_manager", lambda: pm)
    with pytest.raises(
        KBError, match=r"backend 'mine': invalid kb target 'cdna9'; valid choices: mi300x, hopper"
    ):
        Vocabulary.discover()
