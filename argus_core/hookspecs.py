"""Every hook Argus calls, in one module (after pytest's `hookspec.py`).

Collector hooks return what a plugin provides; the pipeline looks the chosen one up by
name (the same string as its config option). Event hooks tell every registered plugin
what happened; trackers such as MLflow are only listeners.

Plugin objects returned by collectors are duck-typed: each has a `name` attribute; the
protocols they follow are documented in `argus_core.protocols`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from argus_core.types import CandidateResult, RunInfo

hookspec = pluggy.HookspecMarker("argus")
hookimpl = pluggy.HookimplMarker("argus")

# --------------------------------------------------------------------------- collectors


@hookspec
def argus_register_dsls() -> list[Any]:
    """DSL front ends: each turns DSL source text into the IR (`protocols.DSLFrontend`)."""


@hookspec
def argus_register_verifiers() -> list[Any]:
    """Verifiers: each checks an IR kernel's assertions (`protocols.Verifier`)."""


@hookspec
def argus_register_backends() -> list[Any]:
    """Backends: each names a target, validates its policies, compiles (`protocols.Backend`)."""


@hookspec
def argus_register_planners() -> list[Any]:
    """Planners: each proposes candidates and learns from results (`protocols.Planner`)."""


@hookspec
def argus_register_llms() -> list[Any]:
    """LLM providers (`argus_core.llm.base.LLMProvider`): `create(cfg)` gives a run's client."""


@hookspec
def argus_register_kernels() -> list[Any]:
    """Kernel families: DSL source, reference, inputs, FLOP and byte counts (`protocols.KernelFamily`)."""


@hookspec
def argus_register_trackers() -> list[Any]:
    """Trackers: factories `name` + `create(cfg) -> listener` whose listener implements event hooks."""


@hookspec
def argus_config_search_paths() -> list[str]:
    """Extra Hydra config search paths ("pkg://my_plugin.conf") so a plugin package can ship
    its own options for any config group (conf/backend/<name>.yaml, ...)."""


@hookspec
def argus_kb_paths() -> list[str]:
    """Extra knowledge-base folders whose `*.md` entries load next to the built-in `kb/`:
    a directory path, or "pkg://my_plugin/kb" (a folder inside an importable package).
    An entry's id must be unique across every folder (`argus_core.kb`, docs/kb.md)."""


@hookspec
def argus_kb_targets() -> dict[str, str | None]:
    """The knowledge-base target (`argus_core.kb.TARGETS`: "mi300x", "hopper") whose
    techniques apply to each backend a plugin ships, by backend name; None for a backend
    that gets the target-independent techniques only. Built-in backends declare theirs
    here too; a backend named nowhere gets the target-independent ones."""


# --------------------------------------------------------------------------- events


@hookspec
def argus_on_run_start(run: RunInfo) -> None:
    """An invocation begins; `run.config` is the resolved config."""


@hookspec
def argus_on_candidate_result(
    run: RunInfo, result: CandidateResult, artifacts: dict[str, str]
) -> None:
    """A candidate finished (verified, compiled, checked and timed, or failed at a stage).

    `artifacts` maps a file name (`dsl_source.py`, `lowered_triton.py`, `kernel.amdgcn`,
    `counterexamples.json`, ...) to its text.
    """


@hookspec
def argus_on_run_end(run: RunInfo, results: list[CandidateResult], status: str) -> None:
    """An invocation ends; `status` is 'FINISHED', 'FAILED' or 'KILLED' (Ctrl-C)."""
