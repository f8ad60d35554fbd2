"""The result cache across runs (argus_core.cache): keys, hits and misses, what invalidates
an entry, a broken store that turns itself off, and a sweep re-run served from the cache."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from argus_core.cache import (
    ResultCache,
    code_hash,
    device_identity,
    package_roots,
    tool_versions,
)

PARTS = {"source": "def k(): ...", "policy": {"tiles": {"BM": 64}, "compiler": {}}}


def test_a_stored_result_is_a_hit_and_counted(tmp_path):
    cache = ResultCache(tmp_path / "c", code="abc")
    assert cache.get("verify", PARTS) is None
    cache.put("verify", PARTS, {"status": "verified", "assertions": 3})
    assert cache.get("verify", PARTS) == {"status": "verified", "assertions": 3}
    assert cache.get("compile", PARTS) is None  # stages are apart
    assert cache.take() == ["verify"] and cache.take() == []
    m = cache.metrics()
    assert (m["cache.hits"], m["cache.misses"]) == (1.0, 2.0)
    assert (m["cache.hits.verify"], m["cache.misses.compile"]) == (1.0, 1.0)
    assert cache.summary().endswith("1 of 3 stage results reused (verify 1/2, compile 0/1)")
    cache.close()
    again = ResultCache(tmp_path / "c", code="abc")  # another process, later
    assert again.get("verify", PARTS) == {"status": "verified", "assertions": 3}


def test_the_key_holds_the_code_the_tools_and_every_part(tmp_path):
    cache = ResultCache(tmp_path / "c", code="abc")
    key = cache.key("verify", PARTS)
    assert key != ResultCache(tmp_path / "c", code="abd").key("verify", PARTS)
    assert key != cache.key("compile", PARTS)
    assert key != cache.key("verify", {**PARTS, "source": "def k(): pass"})
    assert key != cache.key("verify", {**PARTS, "policy": {"tiles": {"BM": 128}, "compiler": {}}})
    assert key == cache.key("verify", dict(reversed(PARTS.items())))  # order does not matter
    assert {"python", "triton", "torch", "z3-solver"} <= set(tool_versions())


def test_code_hash_changes_with_any_source_file(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a.py").write_text("x = 1\n")
    (pkg / "sub" / "rules.yaml").write_text("a: 1\n")
    (pkg / "notes.txt").write_text("not code")
    first = code_hash((str(pkg),))
    code_hash.cache_clear()
    (pkg / "notes.txt").write_text("still not code")
    assert code_hash((str(pkg),)) == first
    code_hash.cache_clear()
    (pkg / "sub" / "rules.yaml").write_text("a: 2\n")
    assert code_hash((str(pkg),)) != first
    code_hash.cache_clear()


def test_argus_and_its_plugins_packages_are_hashed():
    from argus_core.plugin_manager import default_plugin_manager

    roots = package_roots(default_plugin_manager().get_plugins())
    names = {Path(r).name for r in roots}
    assert "argus_core" in names and len(roots) >= 2  # the built-in plugins' package too


def test_no_directory_stores_nothing(tmp_path):
    cache = ResultCache.from_config({"name": "off", "dir": str(tmp_path / "c")}, [])
    cache.put("verify", PARTS, {"status": "verified"})
    assert cache.get("verify", PARTS) is None and not cache.enabled
    assert cache.metrics() == {} and cache.summary() == ""
    assert not (tmp_path / "c").exists()


def test_a_corrupt_store_turns_the_cache_off_and_says_so(tmp_path, capsys):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "cache.db").write_bytes(b"this is not a sqlite database" * 100)
    cache = ResultCache(tmp_path / "c", code="abc")
    assert not cache.enabled and cache.get("verify", PARTS) is None
    err = capsys.readouterr().err
    assert f"result cache {tmp_path / 'c'} turned off" in err and "the run goes on" in err
    assert "turned off:" in cache.summary()


def test_a_store_that_breaks_mid_run_turns_off(tmp_path, capsys):
    cache = ResultCache(tmp_path / "c", code="abc")
    cache.put("verify", PARTS, {"status": "verified"})
    with sqlite3.connect(tmp_path / "c" / "cache.db") as db:
        db.execute("DROP TABLE Cache")
    assert cache.get("verify", PARTS) is None and not cache.enabled
    assert "turned off" in capsys.readouterr().err
    cache.put("verify", PARTS, {"status": "verified"})  # a no-op now, not an error


def test_a_gpu_is_named_only_where_a_gpu_tool_answers():
    if shutil.which("nvidia-smi") or shutil.which("rocm-smi"):
        pytest.skip("a GPU tool is installed here")
    device_identity.cache_clear()
    assert device_identity(None) is None  # measured results are then not cached


# ---------------------------------------------------------------------- end to end


def _records(root: Path) -> dict[str, list[dict]]:
    """Each job's results.json records, by job directory name."""
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(root.rglob("results.json"))}


def _timeless(x: Any) -> Any:
    """A record without its durations at any depth (a stage's "seconds": the first sweep's
    two jobs may both compute a shared stage, and the cache keeps the last one's) and
    without its cache stages."""
    if isinstance(x, dict):
        return {k: _timeless(v) for k, v in x.items() if k not in ("seconds", "cache")}
    if isinstance(x, list):
        return [_timeless(v) for v in x]
    return x


def _same(a: dict, b: dict) -> bool:
    """Records equal apart from what a cached re-run changes (durations, cache stages)."""
    return _timeless(a) == _timeless(b)


def _diff(before: list, after: list) -> list:
    """The keys where two jobs' records differ (the assertion's message)."""
    return [
        (k, a.get(k), b.get(k))
        for a, b in zip(map(_timeless, before), map(_timeless, after))
        for k in sorted(set(a) | set(b))
        if a.get(k) != b.get(k)
    ]


@pytest.mark.slow
def test_a_sweep_rerun_finishes_from_the_cache(run_argus, tmp_path):
    """`argus -m` twice, jobs in parallel worker processes sharing one cache: the second
    sweep verifies, compiles and checks nothing again; the hits are in each job's log,
    results.json and MLflow parent run."""
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    from argus_core.tracking.mlflow_tracker import open_client

    args = (
        "-m",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        "+kernel=gemm",
        "backend=interpret",
        "budget=2",
        "seed=0,1",
        "progress=off",
        f"cache.dir={tmp_path / 'shared-cache'}",
    )
    first = run_argus(*args, "hydra.sweep.dir=first", timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    second = run_argus(*args, "hydra.sweep.dir=second", timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]

    before, after = _records(tmp_path / "first"), _records(tmp_path / "second")
    assert len(after) == 2 and sorted(before) == sorted(after)
    for job, records in after.items():
        assert len(records) == 2
        assert [r["cache"] for r in records] == [["verify", "compile", "check"]] * 2
        assert all(_same(a, b) for a, b in zip(before[job], records)), _diff(before[job], records)
        log = (tmp_path / "second" / job / "argus.log").read_text()
        assert "6 of 6 stage results reused (verify 2/2, compile 2/2, check 2/2)" in log
    # the first sweep's two jobs share the verify and compile results of the same policies
    # (possibly computed by both at once); their checks differ by seed
    assert all(r["cache"] == [] or "check" not in r["cache"] for rs in before.values() for r in rs)

    client = open_client(f"sqlite:///{tmp_path}/.argus/mlflow.db")
    exp = client.get_experiment_by_name("argus")
    runs = [
        r
        for r in client.search_runs([exp.experiment_id], max_results=100)
        if "mlflow.parentRunId" not in r.data.tags
    ]
    hits = sorted((r.data.metrics["cache.hits"], r.data.metrics["cache.misses"]) for r in runs)
    assert len(runs) == 4 and hits[-2:] == [(6.0, 0.0), (6.0, 0.0)]
    assert all(misses >= 2 for _, misses in hits[:2])  # the first sweep checked every candidate


def test_a_single_module_plugin_is_hashed_by_its_file(tmp_path, monkeypatch):
    (tmp_path / "one_file_plugin.py").write_text("class Plugin: ...\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import one_file_plugin

    roots = package_roots([one_file_plugin.Plugin()])
    assert str((tmp_path / "one_file_plugin.py").resolve()) in roots
    first = code_hash(roots)
    code_hash.cache_clear()
    (tmp_path / "one_file_plugin.py").write_text("class Plugin: pass\n")
    assert code_hash(roots) != first
    code_hash.cache_clear()
