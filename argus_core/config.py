"""The structured-config schema of the `argus` app, its validation, and composition.

The root schema `ArgusConfig` is registered in Hydra's ConfigStore as `argus_schema` and
is the first entry of `conf/config.yaml`'s defaults, so every group option (built-in or
shipped by a plugin package) is merged into a typed node: a misspelled key or a value of
the wrong type fails at composition. `compose` and `validate` raise ConfigError with one
message that names the bad value and lists the valid ones.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

from omegaconf import MISSING, DictConfig, OmegaConf

from argus_core.errors import ConfigError, UnknownPluginError, choices_error

CONFIG_MODULE = "argus_conf"
CONFIG_NAME = "config"
SCHEMA_NAME = "argus_schema"

# config groups, each naming a plugin of the kind of the same name (plugin_manager.KINDS)
GROUPS: tuple[str, ...] = ("kernel", "dsl", "verifier", "backend", "planner", "llm", "tracking")
PROGRESS_CHOICES: tuple[str, ...] = ("auto", "on", "off")
CORRECTNESS_CHOICES: tuple[str, ...] = ("auto", "interpret", "device", "off")
CACHE_CHOICES: tuple[str, ...] = ("disk", "off")  # the options of the `cache` group

# --------------------------------------------------------------------------- schemas


@dataclass
class KernelConfig:
    name: str = MISSING
    dtype: str = "bf16"
    shape: dict[str, int] = field(default_factory=dict)  # the shape estimates and timings are for
    check_shapes: list[dict[str, int]] = field(default_factory=list)  # small correctness shapes
    tiles: dict[str, list[int]] = field(default_factory=dict)  # constexpr -> allowed values
    source: str | None = None  # a DSL file to use instead of the family's own kernel
    path: str | None = None  # a directory of task files (kernel=kernelbench)
    task: str | None = None  # one task in it, "<level>/<id>" (kernel=kernelbench)
    # the shape domain proved (argus_core.domain): symbol -> {min, max, multiple_of}
    # (Any, default None: a whole mapping given on the command line replaces it; the values
    # are checked by argus_core.domain.parse_domain before any candidate runs)
    domain: Any = None
    # how fp32 dots compute (Triton's input_precision): "ieee" (FMA) or a split form that
    # keeps fp32 accuracy on matrix cores, where the target has it (TargetSpec.fp32_dots)
    fp32_dot: str = "ieee"
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class DSLConfig:
    name: str = MISSING
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class VerifierConfig:
    name: str = MISSING
    timeout_ms: int = 10000
    fail_on_unknown: bool = False
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class BackendConfig:
    name: str = MISSING
    target: str = ""
    policy_grid: dict[str, list[Any]] = field(default_factory=dict)  # compiler option -> values
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class PlannerConfig:
    name: str = MISSING
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class LLMConfig:
    name: str = MISSING
    model: str | None = None
    api_base: str | None = None
    max_tokens: int = 4096
    budget_usd: float = 1.0
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class TrackingConfig:
    name: str = MISSING
    uri: str | None = None
    experiment: str = "argus"
    artifact_location: str | None = None
    run_name: str | None = None
    sweep_name: str | None = None  # a multirun's readable name (default: its sweep directory's)


@dataclass
class EvaluateConfig:
    correctness: str = "auto"  # one of CORRECTNESS_CHOICES
    trials: int = 2
    timeout_s: float = 300.0
    # wall-clock limit of tracing an LLM-written candidate in its sandboxed child process
    # (None: ARGUS_TRACE_TIMEOUT_S if set, else 20 s)
    trace_timeout_s: float | None = None


@dataclass
class CacheConfig:
    """The result cache across runs and sweep jobs (argus_core.cache; conf/cache/*.yaml)."""

    name: str = "disk"  # one of CACHE_CHOICES; `cache=off` stores and reuses nothing
    dir: str | None = None  # where (conf/cache/disk.yaml: $ARGUS_CACHE_DIR or .argus/cache)
    measured: bool = True  # reuse a GPU check's measured time on the same device


@dataclass
class ArgusConfig:
    kernel: KernelConfig = MISSING  # appended on the command line: +kernel=NAME
    dsl: DSLConfig = field(default_factory=DSLConfig)
    verifier: VerifierConfig = field(default_factory=VerifierConfig)
    backend: BackendConfig = field(default_factory=BackendConfig)
    planner: PlannerConfig = field(default_factory=PlannerConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    budget: int = 8
    seed: int = 0
    progress: str = "auto"  # one of PROGRESS_CHOICES
    resume: bool = False  # skip the jobs of a sweep that already finished (issue #7)
    # how untrusted code runs: auto | bwrap | none (None: $ARGUS_SANDBOX, default auto)
    sandbox: str | None = None
    evaluate: EvaluateConfig = field(default_factory=EvaluateConfig)
    cache: CacheConfig = field(default_factory=CacheConfig)


def register_schemas() -> None:
    """Store the root schema as `argus_schema` in Hydra's ConfigStore (idempotent)."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name=SCHEMA_NAME, node=ArgusConfig)
    if not OmegaConf.has_resolver("argus_dirname"):
        OmegaConf.register_new_resolver("argus_dirname", job_dirname)


MAX_DIRNAME = 120  # characters of a sweep job's directory name (filesystems allow 255)


def job_dirname(overrides: str) -> str:
    """A sweep job's directory name from Hydra's `override_dirname`: one path component
    (a value such as `kernel.source=dir/k.py` or `tracking.uri=sqlite:///x.db` would
    otherwise nest directories), clipped to MAX_DIRNAME characters."""
    name = re.sub(r"[/\\:]+", "_", overrides) or "default"
    return name[:MAX_DIRNAME]


def schema_at(path: str) -> Any:
    """The schema's type at a dotted path ('kernel.shape.M' -> int); None past the schema."""
    hint: Any = ArgusConfig
    for part in path.split(".") if path else []:
        if is_dataclass(hint):
            hints = typing.get_type_hints(hint)
            if part not in hints:
                return None
            hint = hints[part]
        elif typing.get_origin(hint) in (dict, list):
            hint = typing.get_args(hint)[-1] if typing.get_args(hint) else Any
        else:
            return None
    return hint


def type_name(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) and not typing.get_args(hint) else str(hint)


# --------------------------------------------------------------------------- validation


def validate(
    cfg: DictConfig,
    search_paths: Sequence[str] = (),
    plugin_names: Callable[[str], list[str]] | None = None,
) -> None:
    """Raise ConfigError unless `cfg` is ready to run: a kernel is chosen, every key is in
    the schema, closed-set values are valid, and (with `plugin_names`) every group names a
    registered plugin. Messages name the bad value and list the valid ones."""
    check_keys(cfg)
    if OmegaConf.is_missing(cfg, "kernel"):
        valid = ", ".join(group_options("kernel", search_paths)) or "(none found)"
        raise ConfigError(f"no kernel chosen; add +kernel=NAME (valid choices: {valid})")
    check_values(cfg)
    if plugin_names is not None:
        check_plugins(cfg, plugin_names)


def check_keys(cfg: DictConfig, path: str = "") -> None:
    """Raise ConfigError for a key the schema lacks (`+kernel.dtpye=...` adds one silently)."""
    hint = schema_at(path)
    if not is_dataclass(hint):
        return  # a dict-typed node (options, shape, ...) is open by design
    valid = [f.name for f in fields(hint)]
    for key in cfg:
        full = f"{path}.{key}" if path else str(key)
        if full == "hydra":
            continue
        if key not in valid:
            raise ConfigError(unknown_key_message(full, valid))
        if not OmegaConf.is_missing(cfg, key) and isinstance(cfg[key], DictConfig):
            check_keys(cfg[key], full)


def unknown_key_message(full_key: str, valid: Sequence[str]) -> str:
    parent = full_key.rpartition(".")[0]
    where = f"of {parent}" if parent else "at the top level"
    return f"unknown key {full_key!r}; valid keys {where}: {', '.join(valid) or '(none)'}"


def check_values(cfg: DictConfig) -> None:
    """Raise ConfigError for a value outside its closed set or range (types are the schema's)."""
    if cfg.progress not in PROGRESS_CHOICES:
        raise ConfigError(choices_error("progress", cfg.progress, PROGRESS_CHOICES))
    if cfg.cache.name not in CACHE_CHOICES:
        raise ConfigError(choices_error("cache.name", cfg.cache.name, CACHE_CHOICES))
    correctness = cfg.evaluate.correctness
    if correctness not in CORRECTNESS_CHOICES:
        raise ConfigError(choices_error("evaluate.correctness", correctness, CORRECTNESS_CHOICES))
    for key, value in (("budget", cfg.budget), ("evaluate.trials", cfg.evaluate.trials)):
        if value < 1:
            raise ConfigError(f"invalid {key} {value!r}; must be an integer >= 1")
    if cfg.evaluate.timeout_s <= 0:
        raise ConfigError(f"invalid evaluate.timeout_s {cfg.evaluate.timeout_s!r}; must be > 0")
    trace_limit = cfg.evaluate.get("trace_timeout_s")
    if trace_limit is not None and trace_limit <= 0:
        raise ConfigError(f"invalid evaluate.trace_timeout_s {trace_limit!r}; must be > 0")


def check_plugins(cfg: DictConfig, plugin_names: Callable[[str], list[str]]) -> None:
    """Raise UnknownPluginError when a group's `name` is not a registered plugin of its kind.

    `plugin_names(kind)` lists the registered ones (`Registry.names`). A kind with no
    registered plugin at all is not checked: its built-ins may not be installed yet.
    """
    for group in GROUPS:
        if OmegaConf.is_missing(cfg, group):
            continue
        known = plugin_names(group)
        if known and cfg[group].name not in known:
            raise UnknownPluginError(group, cfg[group].name, known)


# --------------------------------------------------------------------------- composition


def with_search_paths(overrides: Sequence[str], search_paths: Sequence[str]) -> list[str]:
    """`overrides` with one `hydra.searchpath=[...]` that also holds `search_paths`.

    Hydra reads only the first searchpath override, so a user's own is merged, not repeated.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if not search_paths:
        return list(overrides)
    parser = OverridesParser.create()
    kept, paths = [], []
    for text in overrides:
        if text.lstrip("+~").startswith("hydra.searchpath="):
            paths.extend(parser.parse_override(text).value() or [])
        else:
            kept.append(text)
    paths.extend(p for p in search_paths if p not in paths)
    quoted = ",".join("'" + p.replace("\\", "\\\\").replace("'", "\\'") + "'" for p in paths)
    return [*kept, f"hydra.searchpath=[{quoted}]"]


def group_options(group: str, search_paths: Sequence[str] = ()) -> list[str]:
    """The options Hydra can see for `group`: the app's YAMLs plus plugin-provided ones."""
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.object_type import ObjectType

    register_schemas()
    # Hydra's public config loader, with the same search path a run composes with
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        options = loader.get_group_options(
            group,
            results_filter=ObjectType.CONFIG,
            config_name=CONFIG_NAME,
            overrides=with_search_paths([], search_paths),
        )
    return sorted(set(options))


def compose(
    overrides: Sequence[str] = (),
    search_paths: Sequence[str] = (),
    *,
    return_hydra_config: bool = False,
) -> DictConfig:
    """Compose the config exactly as `argus OVERRIDES` would, or raise ConfigError.

    `search_paths` are plugin config paths (`plugin_manager.config_search_paths`). The error
    names the bad option, key or value and lists the valid choices (the group's options, the
    node's keys, or the expected type). The result is not validated: see `validate`.
    """
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        return _compose(overrides, search_paths, return_hydra_config)
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(explain(exc, overrides, search_paths)) from exc


def _compose(
    overrides: Sequence[str], search_paths: Sequence[str], return_hydra_config: bool = False
) -> DictConfig:
    """Hydra's composition, its errors as raised (no explanation: `explain` composes again
    through here, so an error of that composition cannot recurse)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    register_schemas()
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        return hydra_compose(
            config_name=CONFIG_NAME,
            overrides=with_search_paths(overrides, search_paths),
            return_hydra_config=return_hydra_config,
        )


def explain(exc: BaseException, overrides: Sequence[str], search_paths: Sequence[str]) -> str:
    """One message for a composition error that names the bad input and the valid choices."""
    from hydra.errors import MissingConfigException, OverrideParseException
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

    if isinstance(exc, OverrideParseException):
        return f"cannot parse override {exc.override!r}: {exc.message.splitlines()[0]}"
    if isinstance(exc, MissingConfigException) and exc.missing_cfg_file:
        group, _, option = exc.missing_cfg_file.rpartition("/")
        valid = list(exc.options or []) or (group_options(group, search_paths) if group else [])
        if group and valid:
            return f"unknown {group} {option!r}; valid choices: {', '.join(sorted(valid))}"
        if group:
            return f"unknown config group {group!r}; valid groups: {', '.join(GROUPS)}"
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, OmegaConfBaseException):
        cause = cause.__cause__ or cause.__context__
    full_key = str(getattr(cause, "full_key", "") or "")
    # Hydra names the file when a YAML option (not an override) holds the bad key or value
    in_file = re.match(r"In '([^']+)'", str(exc))
    where = f" (in {in_file.group(1)}.yaml)" if in_file else ""
    if isinstance(cause, (ConfigKeyError, ConfigAttributeError)) and full_key:
        valid = node_keys(full_key, overrides, search_paths)
        return unknown_key_message(full_key, valid) + where
    if cause is not None and full_key:
        # 'kernel.tiles.BM[0]': the override is kernel.tiles.BM, the schema type its element's
        value = override_value(overrides, full_key.split("[")[0])
        expected = type_name(schema_at(full_key.replace("[", ".").replace("]", "")))
        if value is not None:
            return f"invalid value {value!r} for {full_key}; expected {expected}"
        detail = str(cause).splitlines()[0]
        return f"invalid value for {full_key} ({detail}); expected {expected}{where}"
    if cause is not None and in_file:
        return f"{str(cause).splitlines()[0]}{where}"
    return str(exc).strip() or type(exc).__name__


def node_keys(full_key: str, overrides: Sequence[str], search_paths: Sequence[str]) -> list[str]:
    """Valid keys beside `full_key`: the schema's fields, or for a dict-typed node (such as
    kernel.shape) the keys it has when composed without the overrides under it."""
    parent = full_key.rpartition(".")[0]
    hint = schema_at(parent)
    if is_dataclass(hint):
        return [f.name for f in fields(hint)]
    # without the overrides that set the node or anything under it (`kernel.shape={..}`
    # too); a composition that still fails lists nothing rather than explaining itself
    kept = [
        o
        for o in overrides
        if override_key(o) != parent and not override_key(o).startswith(parent + ".")
    ]
    try:
        found = OmegaConf.select(_compose(kept, search_paths), parent)
    except Exception:
        return []
    return [str(k) for k in found] if isinstance(found, DictConfig) else []


def override_key(override: str) -> str:
    return override.lstrip("+~").split("=", 1)[0]


def override_value(overrides: Sequence[str], key: str) -> str | None:
    """The text after '=' of the last override of `key`, if any."""
    found = None
    for text in overrides:
        if override_key(text) == key and "=" in text:
            found = text.split("=", 1)[1]
    return found


# --------------------------------------------------------------------------- a family's values


def check_kernel(family: Any, kernel: DictConfig) -> None:
    """Raise ConfigError unless the `kernel` config's values are ones `family` can run: its
    dtype one the family declares, every shape (the timed one and the check shapes) made of
    exactly the family's dims, each an integer at least that dim's least value, and every
    tile choice a non-empty list of positive integers. Checked before any candidate runs."""
    dtype = str(kernel.dtype)
    if family.dtypes and dtype not in family.dtypes:
        raise ConfigError(choices_error(f"kernel.dtype for {family.name}", dtype, family.dtypes))
    dims = dict(family.shape_dims)
    shapes = [("kernel.shape", kernel.shape)]
    shapes += [(f"kernel.check_shapes[{i}]", s) for i, s in enumerate(kernel.check_shapes)]
    for where, shape in shapes:
        shape = dict(shape)
        if dims:
            unknown = sorted(set(shape) - set(dims))
            missing = [d for d in dims if d not in shape]
            if unknown or missing:
                bad = f"unknown dims {unknown}" if unknown else f"missing dims {missing}"
                raise ConfigError(
                    f"invalid {where} {shape}: {bad}; a {family.name} shape has the dims "
                    f"{', '.join(dims)}"
                )
        for dim, value in shape.items():
            least = dims.get(dim, 1)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ConfigError(f"invalid {where}.{dim} {value!r}; must be an integer >= {least}")
    for name, values in dict(kernel.tiles).items():
        values = list(values)
        if not values or any(
            isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values
        ):
            raise ConfigError(
                f"invalid kernel.tiles.{name} {values!r}; must be a non-empty list of integers >= 1"
            )
