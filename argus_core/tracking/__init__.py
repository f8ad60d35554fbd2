"""Trackers: listeners that record a run's events. A pluggy plugin module.

`tracking=mlflow` logs to MLflow (imported only when a run starts); `tracking=none`
records nothing. Importing this package never imports mlflow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from argus_core.hookspecs import hookimpl
from argus_core.tracking.none_tracker import NoneTracker

if TYPE_CHECKING:
    from argus_core.protocols import TrackerListener

__all__ = [
    "MlflowTrackerFactory",
    "NoneTracker",
    "NoneTrackerFactory",
    "argus_register_trackers",
]


class MlflowTrackerFactory:
    """`tracking=mlflow`: one parent MLflow run per invocation, a child run per candidate."""

    name = "mlflow"

    def create(self, cfg: Any, run_dir: str) -> TrackerListener:
        """A fresh `MlflowTracker` for one invocation; nothing is contacted until run start."""
        from argus_core.tracking.mlflow_tracker import MlflowTracker

        return MlflowTracker(cfg, run_dir)


class NoneTrackerFactory:
    """`tracking=none`: records nothing."""

    name = "none"

    def create(self, cfg: Any, run_dir: str) -> NoneTracker:
        """A listener with no hooks and no summary lines."""
        return NoneTracker(cfg, run_dir)


@hookimpl
def argus_register_trackers() -> list[Any]:
    """The built-in trackers, by config option name."""
    return [MlflowTrackerFactory(), NoneTrackerFactory()]
