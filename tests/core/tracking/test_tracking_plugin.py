"""The tracking plugin module: registration by name, and `tracking=none` never loads mlflow."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pluggy
import pytest

import argus_core.tracking
from argus_core import hookspecs
from argus_core.errors import UnknownPluginError
from argus_core.plugin_manager import Registry


def registry() -> Registry:
    pm = pluggy.PluginManager("argus")
    pm.add_hookspecs(hookspecs)
    pm.register(argus_core.tracking)
    return Registry(pm)


def test_trackers_registered_by_name():
    reg = registry()
    assert reg.names("tracking") == ["mlflow", "none"]
    with pytest.raises(UnknownPluginError, match="'wandb'; valid choices: mlflow, none"):
        reg.get("tracking", "wandb")


def test_none_tracker_says_nothing(tmp_path):
    listener = registry().get("tracking", "none").create({"name": "none"}, str(tmp_path))
    assert listener.summary_lines() == []


NO_MLFLOW_SCRIPT = textwrap.dedent(
    """
    import sys
    import argus_core.tracking
    assert "mlflow" not in sys.modules, "importing argus_core.tracking imported mlflow"
    import pluggy
    from argus_core import hookspecs
    from argus_core.plugin_manager import Registry
    from argus_core.types import RunInfo
    pm = pluggy.PluginManager("argus")
    pm.add_hookspecs(hookspecs)
    pm.register(argus_core.tracking)
    reg = Registry(pm)
    reg.get("tracking", "mlflow").create({"name": "mlflow"}, "run")  # lazy: no import yet
    listener = reg.get("tracking", "none").create({"name": "none"}, "run")
    pm.register(listener)
    run = RunInfo("r", "gemm", "mi300x", "baseline", {}, ".", 1)
    pm.hook.argus_on_run_start(run=run)
    pm.hook.argus_on_run_end(run=run, results=[], status="FINISHED")
    print(listener.summary_lines())
    assert "mlflow" not in sys.modules, "tracking=none imported mlflow"
    print("NO-MLFLOW-OK")
    """
)


def test_none_tracker_and_import_do_not_load_mlflow(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", NO_MLFLOW_SCRIPT],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "NO-MLFLOW-OK" in proc.stdout
