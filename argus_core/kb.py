"""The knowledge base of optimization techniques: `kb/<id>.md`, loaded, validated, queried.

An entry is YAML front matter (the fields of `Technique`, schema in `docs/kb.md`) followed
by Markdown prose. Loading validates every entry against a `Vocabulary`: the kernel
families' tiles and shape symbols (`conf/kernel/*.yaml`) and the targets' policy spaces
(the registered backends), so an entry can only name options that exist. Plugin packages
add folders of entries (`argus_kb_paths`) and kernel families and backends the vocabulary
then knows. Planners call `load()` once and then `query(family=..., target=..., kind=...)`.
No network, no LLM.
"""

from __future__ import annotations

import ast
import operator
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from argus_core.errors import ArgusError, choices_error

FAMILIES = ("gemm", "attention", "moe")  # built in; plugin families join in `Vocabulary`
TARGETS = ("mi300x", "hopper")
ANY = "any"
KINDS = ("policy", "rewrite", "level")
STATUSES = ("ready", "planned")  # ready: Argus's DSL and backends express it today
REQUIRED = (
    "id",
    "title",
    "families",
    "targets",
    "preconditions",
    "action",
    "invariants",
    "effect",
    "hurts",
    "references",
)
OPTIONAL = ("topics", "status", "preserves")


def declared_kb_targets(pm: Any = None) -> dict[str, str | None]:
    """Backend name -> the KB target whose techniques apply to it (None: only the
    target-independent `any` ones), as every plugin declares through `argus_kb_targets`
    (the built-in backends too: a target's KB mapping lives in its backend plugin)."""
    from argus_core.plugin_manager import default_plugin_manager

    declared: dict[str, str | None] = {}
    for provided in (pm or default_plugin_manager()).hook.argus_kb_targets():
        declared.update(provided or {})
    return declared


# What may guard a technique: the smt verifier's assertions (docs/verifier.md), plus the
# backend and evaluator checks that catch what the verifier does not model.
INVARIANTS: dict[str, str] = {
    "bounds": "every unmasked access inside its tensor",
    "layout": "offsets equal the tensor's true layout at the element's coordinates",
    "elementwise_tag": "operands of an elementwise op agree on their tags",
    "dot_contract": "a dot pairs a's column coordinate with b's row coordinate",
    "dot_operand": "a dot's row/column tags do not vary along k",
    "dot_acc": "a dot's accumulator carries the product's tag",
    "reduce_bounds": "reductions see only coordinates inside the tensor",
    "loop_invariant": "loop-carried tags hold inductively",
    "assert_tag": "a user predicate over tags holds where valid",
    "assert_tag_eq": "two tiles' tags agree",
    "rows_for": "a relabelled row is the result for its scatter row",
    "contraction_window": "every contribution lies in the stated window",
    "contraction_once": "no contracted coordinate summed twice per output element",
    "contraction_start": "the first contracted coordinate is summed",
    "contraction_gap": "no contracted coordinate skipped",
    "store_tag": "each element lands where its tag says",
    "store_once": "each output element written by one (program, element)",
    "store_cover": "the store's mask drops nothing inside the output",
    "store_disjoint": "scattered rows of different programs do not overlap",
    "store_tile": "each program writes an aligned tile",
    "store_tile_range": "each program's tile lies inside the tile grid",
    "store_grid": "the grid has as many programs as output tiles",
    "shared_capacity": "backend: the policy's LDS/shared-memory estimate fits the target",
    "bank_conflicts": "argus_core.layout.swizzle.bank_conflicts of the shared layout (a metric)",
    "register_spills": "compile report: no spills or scratch after the change",
    "reference_check": "evaluator: outputs match the PyTorch reference within tolerance",
    # the explicit level's thread-level invariants (plugins/verifiers/smt/explicit_ops.py)
    "ring_protocol": "explicit: ring stage and mbarrier phase of every wait, write and read",
    "release_after_read": "explicit: a stage is released only after the MMA reading it retired",
    "fragment_tags": "explicit: each MMA's operand fragments agree on the reduction index",
    "shared_races": "explicit: no shared-memory write races a read or write without a barrier",
}
# The data-flow invariants synthesized from a task's PyTorch reference (issue #19,
# docs/invariants.md) that a technique must preserve: `preserves: [name, "name: detail"]`.
# Every `ready` entry names the ones its change could break (tests/core/spec/test_kb_preserves.py);
# the prompt shows them beside the technique.
SPEC_INVARIANTS: dict[str, str] = {
    "synth_reads": "each load reads, for the output element it feeds, the input element the "
    "reference reads (batch, head, expert entries computed from the output's coordinates)",
    "synth_pairing": "operands the reference contracts together are summed in one dot over "
    "the same index (A's column with B's row)",
    "synth_window": "each output element sums exactly the contracted coordinates the "
    "reference's mask admits, each once",
    "synth_coverage": "every input the reference reads feeds the output, and nothing else does",
    "synth_gather": "rows gathered or scattered through an index tensor are the rows the "
    "reference's index (routing ids, slot // topk) names",
}

# the levels a `level` action may select (argus_core.ir.explicit.EXPLICIT)
LEVELS = ("explicit",)

# The DSL rewrites a `rewrite` action may name; planners implement them on the DSL source.
REWRITES: dict[str, str] = {
    "split_k": "cut the K loop into SPLIT ranges (al.split_range), sum with al.atomic_add",
    "stream_k": "split the flat (tile, k-iteration) space evenly over persistent programs",
    "persistent": "launch about one program per SM/CU and loop over output tiles",
    "xcd_remap": "remap program ids so neighbouring tiles run on one MI300X XCD",
    "smem_pad": "pad the inner extent of a shared buffer by a few elements",
    "smem_swizzle": "XOR-swizzle a shared buffer's 16-byte chunks by row (al.swizzle)",
    "buffer_ops": "32-bit offsets from a base pointer, lowered to AMD buffer loads/stores",
    "sched_hints": "instruction-scheduling hints around the main loop (sched_group_barrier)",
    "tma_loads": "load tiles with Hopper TMA tensor descriptors into shared memory",
    "warp_specialize": "producer warps issue loads, consumer warpgroups compute",
    "causal_block_skip": "never visit key blocks wholly after the query block's last key",
    "causal_diagonal_mask": "apply the causal mask only on the blocks the diagonal crosses",
    "exp2_fold_scale": "softmax in base 2 with scale*log2(e) folded into one multiply",
    "gqa_pack": "one program serves all query heads of a KV head, K/V read once",
    "split_kv": "decode attention split over key blocks, partials merged by their lse",
    "moe_permute_rows": "gather each expert's rows contiguously before the grouped GEMM",
    "fuse_gate_up": "gate and up projections in one kernel, SiLU(gate)*up in registers",
}


class KBError(ArgusError):
    """A malformed knowledge-base entry, or a query naming something that does not exist.

    `file` and `field` name the entry and the front-matter field that is wrong."""

    def __init__(self, message: str, file: str | Path | None = None, field: str | None = None):
        self.file, self.field = (str(file) if file else None), field
        where = " ".join(
            x for x in (str(file) if file else "", f"field {field!r}" if field else "") if x
        )
        super().__init__(f"{where}: {message}" if where else message)


# ------------------------------------------------------------------------ preconditions

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_CMPOPS: dict[type, Callable[[Any, Any], bool]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
_NODES = (ast.Expression, ast.Compare, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not)
_NODES += (ast.USub, ast.BinOp, ast.Name, ast.Load, ast.Constant, *_BINOPS, *_CMPOPS)


def parse_condition(text: str) -> ast.Expression | None:
    """The expression tree if `text` is a machine-checkable condition (a comparison or a
    boolean combination of comparisons over names and integers, `and`/`or`/`not`), else
    None: the text is prose for the reader (and the LLM), never evaluated."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return None
    if not isinstance(tree.body, (ast.Compare, ast.BoolOp)):
        return None
    for node in ast.walk(tree):
        if not isinstance(node, _NODES):
            return None
        if isinstance(node, ast.Constant) and not isinstance(node.value, int):
            return None
    return tree


def condition_names(tree: ast.Expression) -> set[str]:
    """The names a parsed condition reads."""
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def eval_condition(tree: ast.Expression, values: Mapping[str, int]) -> bool | None:
    """The condition's truth for `values`; None when it reads a name `values` lacks."""

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in values:
                raise KeyError(node.id)
            return values[node.id]
        if isinstance(node, ast.UnaryOp):
            v = ev(node.operand)
            return (not v) if isinstance(node.op, ast.Not) else -v
        if isinstance(node, ast.BinOp):
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.BoolOp):
            vals = [ev(v) for v in node.values]
            return all(vals) if isinstance(node.op, ast.And) else any(vals)
        assert isinstance(node, ast.Compare)
        left = ev(node.left)
        for op, comp in zip(node.ops, node.comparators):
            right = ev(comp)
            if not _CMPOPS[type(op)](left, right):
                return False
            left = right
        return True

    try:
        return bool(ev(tree))
    except KeyError:
        return None
    except ZeroDivisionError:
        return False


# --------------------------------------------------------------------------- vocabulary


@dataclass(frozen=True)
class Vocabulary:
    """What entries may name: per family its tile constants and shape symbols, per target
    its compiler options and their valid values, and per backend name its KB target
    (`backend_targets`, as the backends' plugins declare them). The families are the keys of `tiles`."""

    tiles: Mapping[str, frozenset[str]]
    shapes: Mapping[str, frozenset[str]]
    policy_spaces: Mapping[str, Mapping[str, tuple[Any, ...]]]
    backend_targets: Mapping[str, str | None] = field(default_factory=dict)

    @property
    def families(self) -> tuple[str, ...]:
        """The built-in families, then plugin-provided ones in discovery order."""
        return tuple(dict.fromkeys((*FAMILIES, *self.tiles)))

    @classmethod
    def discover(cls) -> Vocabulary:
        """Tiles and shapes from `conf/kernel/<family>.yaml` (the built-in families, and
        every registered kernel family whose option a plugin's config search path holds);
        policy spaces from the registered backends (`argus_register_backends`), grouped by
        KB target (what the backend's plugin says through `argus_kb_targets`)."""
        import argus_conf
        from argus_core.plugin_manager import (
            Registry,
            config_search_paths,
            default_plugin_manager,
        )

        pm = default_plugin_manager()
        registry = Registry(pm)
        conf_dirs = [Path(argus_conf.__file__).parent]
        conf_dirs += [p for p in map(_search_path_dir, config_search_paths(pm)) if p]
        tiles: dict[str, frozenset[str]] = {}
        shapes: dict[str, frozenset[str]] = {}
        for fam in dict.fromkeys((*FAMILIES, *registry.names("kernel"))):
            path = _kernel_option(fam, conf_dirs)
            if path is None:
                if fam in FAMILIES:
                    raise KBError(f"no config option conf/kernel/{fam}.yaml for family {fam!r}")
                continue  # a registered family without a config option cannot be run
            cfg = yaml.safe_load(path.read_text()) or {}
            tiles[fam] = frozenset(cfg.get("tiles") or {})
            shapes[fam] = frozenset(cfg.get("shape") or {})
        spaces: dict[str, dict[str, tuple[Any, ...]]] = {t: {} for t in TARGETS}
        declared = declared_kb_targets(pm)
        targets: dict[str, str | None] = {}
        for name, backend in registry.all("backend").items():
            target = declared.get(name)
            if target is not None and target not in TARGETS:
                raise KBError(f"backend {name!r}: " + choices_error("kb target", target, TARGETS))
            if name in declared:
                targets[name] = target
            if target is None:
                continue
            for opt, vals in backend.policy_space().items():
                merged = spaces[target].get(opt, ()) + tuple(vals)
                spaces[target][opt] = tuple(dict.fromkeys(merged))
        return cls(tiles, shapes, spaces, targets)


def _kernel_option(family: str, conf_dirs: Sequence[Path]) -> Path | None:
    """`kernel/<family>.yaml` in the first config folder that has it (Hydra's order)."""
    for folder in conf_dirs:
        if (folder / "kernel" / f"{family}.yaml").is_file():
            return folder / "kernel" / f"{family}.yaml"
    return None


def _search_path_dir(spec: str) -> Path | None:
    """The folder of a Hydra search path ("pkg://a.conf", "file:///x/conf"); None if it
    names no importable package or existing folder (Hydra then skips it as well)."""
    try:
        return resolve_location(spec)
    except KBError:
        return None


def resolve_location(spec: str | Path) -> Path:
    """The folder a KB or config location names: a path, "file://PATH", or
    "pkg://package/sub/dir" ("pkg://package.sub" as Hydra writes it also works).
    KBError naming `spec` if the package cannot be imported or the folder does not exist."""
    text = str(spec)
    if text.startswith("file://"):
        folder = Path(text[len("file://") :])
    elif text.startswith("pkg://"):
        from importlib.resources import files

        module, _, sub = text[len("pkg://") :].partition("/")
        try:
            root = files(module)
        except (ModuleNotFoundError, TypeError) as exc:
            raise KBError(f"location {text!r}: cannot import package {module!r} ({exc})") from None
        folder = Path(str(root)) / sub if sub else Path(str(root))
    else:
        folder = Path(text)
    if not folder.is_dir():
        raise KBError(f"knowledge-base folder {text!r} does not exist")
    return folder


# --------------------------------------------------------------------------- techniques


@dataclass(frozen=True)
class Reference:
    title: str
    url: str | None = None


@dataclass(frozen=True)
class Action:
    """What applying a technique does. `policy`: candidate values per tile constant
    (`tiles`) and per compiler option (`compiler`), to use when `when` holds (None:
    always). `rewrite`: the DSL rewrite's name and its parameters (value lists). `level`:
    the kernel level the policy switches to (`explicit`: the family's explicit-level
    kernel, `argus_core.ir.explicit`), its constexprs (`tiles`) and build knobs
    (`compiler`, beside `level` itself), validated by the family when a planner builds it."""

    kind: str
    tiles: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    compiler: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    when: str | None = None
    rewrite: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    level: str | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.kind == "rewrite":
            return {"kind": "rewrite", "rewrite": self.rewrite, **dict(self.params)}
        if self.kind == "level":
            d = {"kind": "level", "level": self.level}
            d["tiles"] = {k: list(v) for k, v in self.tiles.items()}
            d["options"] = {k: list(v) for k, v in self.compiler.items()}
            return {**d, **({"when": self.when} if self.when else {})}
        d: dict[str, Any] = {
            "kind": "policy",
            "set": {k: list(v) for k, v in {**self.tiles, **self.compiler}.items()},
        }
        if self.when:
            d["when"] = self.when
        return d


@dataclass(frozen=True)
class Technique:
    """One knowledge-base entry: its front matter, validated, and its prose (`body`)."""

    id: str
    title: str
    families: tuple[str, ...]
    targets: tuple[str, ...]
    preconditions: tuple[str, ...]
    action: Action
    invariants: tuple[str, ...]
    effect: str
    hurts: str
    references: tuple[Reference, ...]
    topics: tuple[str, ...] = ()
    status: str = "ready"
    preserves: tuple[str, ...] = ()  # SPEC_INVARIANTS names, optionally "name: detail"
    body: str = ""
    path: str = ""

    @property
    def kind(self) -> str:
        return self.action.kind

    def checkable_preconditions(self) -> list[str]:
        """The preconditions that are machine-checkable conditions (the rest are prose)."""
        return [p for p in self.preconditions if parse_condition(p) is not None]

    def applies(self, values: Mapping[str, int]) -> bool:
        """False only when a checkable precondition is false for `values` (shape symbols,
        tiles, options); prose and conditions over names `values` lacks do not exclude."""
        for p in self.checkable_preconditions():
            tree = parse_condition(p)
            assert tree is not None
            if eval_condition(tree, values) is False:
                return False
        return True

    def summary(self) -> str:
        """One line for a planner's prompt: id, title, action, effect."""
        act = self.action
        if act.kind == "rewrite":
            what = f"rewrite {act.rewrite}" + (f" {dict(act.params)}" if act.params else "")
        elif act.kind == "level":
            sets = {k: list(v) for k, v in {**act.tiles, **act.compiler}.items()}
            what = f"level {act.level} {sets}" + (f" when {act.when}" if act.when else "")
        else:
            sets = {k: list(v) for k, v in {**act.tiles, **act.compiler}.items()}
            what = f"policy {sets}" + (f" when {act.when}" if act.when else "")
        keep = f"; must preserve: {'; '.join(self.preserves)}" if self.preserves else ""
        return f"{self.id}: {self.title} [{what}] -> {self.effect}{keep}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "families": list(self.families),
            "targets": list(self.targets),
            "preconditions": list(self.preconditions),
            "action": self.action.to_dict(),
            "invariants": list(self.invariants),
            "effect": self.effect,
            "hurts": self.hurts,
            "references": [
                {"title": r.title, **({"url": r.url} if r.url else {})} for r in self.references
            ],
            "topics": list(self.topics),
            "status": self.status,
            "preserves": list(self.preserves),
        }


class KnowledgeBase:
    """The loaded entries, by id; queried by family, target, kind, topic and status.

    `families` and `backend_targets` are what queries may name (default: the built-ins;
    `load()` passes its vocabulary's, plugin families and backends included)."""

    def __init__(
        self,
        techniques: Iterable[Technique],
        families: Sequence[str] = FAMILIES,
        backend_targets: Mapping[str, str | None] | None = None,
    ):
        self._by_id = {t.id: t for t in sorted(techniques, key=lambda t: t.id)}
        self.families = tuple(dict.fromkeys((*FAMILIES, *families)))
        self.backend_targets = (
            dict(backend_targets) if backend_targets is not None else declared_kb_targets()
        )

    def __len__(self) -> int:
        return len(self._by_id)

    def __iter__(self):
        return iter(self._by_id.values())

    def ids(self) -> list[str]:
        """Every entry's id, sorted."""
        return list(self._by_id)

    def get(self, id: str) -> Technique:  # noqa: A002  (the entry's field is named id)
        """The entry `id`; KBError listing the known ids if there is none."""
        if id not in self._by_id:
            raise KBError(choices_error("technique", id, self._by_id))
        return self._by_id[id]

    def topics(self) -> set[str]:
        return {topic for t in self for topic in t.topics}

    def query(
        self,
        family: str | None = None,
        target: str | None = None,
        kind: str | None = None,
        *,
        topic: str | None = None,
        status: str | None = None,
        shape: Mapping[str, int] | None = None,
    ) -> list[Technique]:
        """Entries that apply to `family` (its own or `any`) on `target` (a KB target or a
        backend name such as `h200`; its own or `any`), of action `kind`, with `topic`
        and `status`, whose checkable preconditions do not fail for `shape`. None: no
        filter. Sorted by id. An unknown family, target, kind or status is a KBError."""
        _check_choice("family", family, self.families)
        _check_choice("kind", kind, KINDS)
        _check_choice("status", status, STATUSES)
        want_target: str | None = None
        if target is not None:
            if target in TARGETS:
                want_target = target
            elif target in self.backend_targets:
                want_target = self.backend_targets[target] or ANY
            else:
                raise KBError(choices_error("target", target, (*TARGETS, *self.backend_targets)))
        out = []
        for t in self:
            if family and family not in t.families and ANY not in t.families:
                continue
            if want_target and want_target not in t.targets and ANY not in t.targets:
                continue
            if kind and t.kind != kind:
                continue
            if topic and topic not in t.topics:
                continue
            if status and t.status != status:
                continue
            if shape is not None and not t.applies(shape):
                continue
            out.append(t)
        return out


def _check_choice(kind: str, value: str | None, valid: Sequence[str]) -> None:
    if value is not None and value not in valid:
        raise KBError(choices_error(kind, value, valid))


# ------------------------------------------------------------------------------ loading

_SINGULAR = {"families": "family", "targets": "target", "invariants": "invariant"}
_FRONT = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*\n?(.*)\Z", re.S)


def default_paths() -> list[Path]:
    """The built-in folder, then every plugin's (`plugin_paths()`). The built-in folder
    is `ARGUS_KB_PATH` (folders separated by os.pathsep) if set, else the repository's
    `kb/` beside the `argus_core` package (an installed wheel's `argus_kb`)."""
    env = os.environ.get("ARGUS_KB_PATH")
    if env:
        builtin = [Path(p) for p in env.split(os.pathsep) if p]
    else:
        beside = Path(__file__).resolve().parent.parent / "kb"  # a checkout or editable install
        if beside.is_dir():
            builtin = [beside]
        else:
            from importlib.resources import files  # an installed wheel ships kb/ as `argus_kb`

            builtin = [Path(str(files("argus_kb")))]
    return builtin + [p for p in plugin_paths() if p not in builtin]


def plugin_paths(pm: Any = None) -> list[Path]:
    """The folders plugin packages add through `argus_kb_paths` (default manager: the
    installed plugins). KBError naming the plugin for a location that does not resolve."""
    if pm is None:
        from argus_core.plugin_manager import default_plugin_manager

        pm = default_plugin_manager()
    out: list[Path] = []
    # one implementation at a time, in registration order, so a bad location names the
    # plugin that gave it
    for impl in pm.hook.argus_kb_paths.get_hookimpls():
        for spec in impl.function() or []:
            try:
                folder = resolve_location(spec)
            except KBError as exc:
                raise KBError(f"plugin {impl.plugin_name!r}: {exc}") from None
            if folder not in out:
                out.append(folder)
    return out


def load(
    path: str | Path | Sequence[str | Path] | None = None, vocab: Vocabulary | None = None
) -> KnowledgeBase:
    """Every `*.md` entry of the folder(s) `path` (default: `default_paths()`, plugin
    folders included; each a path or a "pkg://package/dir" location), validated against
    `vocab` (default: `Vocabulary.discover()`). The first malformed entry raises a KBError
    naming its file and field; an id defined in two files is an error naming both."""
    if path is None:
        folders = default_paths()
    elif isinstance(path, (str, Path)):
        folders = [resolve_location(path)]
    else:
        folders = [resolve_location(p) for p in path]
    vocab = vocab or Vocabulary.discover()
    seen: dict[str, Technique] = {}
    for folder in folders:
        if not folder.is_dir():
            raise KBError(f"knowledge-base folder {str(folder)!r} does not exist")
        for file in sorted(folder.glob("*.md")):
            tech = parse_entry(file, vocab)
            if tech.id in seen:
                raise KBError(f"id {tech.id!r} is also defined in {seen[tech.id].path}", file, "id")
            seen[tech.id] = tech
    return KnowledgeBase(seen.values(), vocab.families, vocab.backend_targets)


def parse_entry(file: str | Path, vocab: Vocabulary) -> Technique:
    """One entry file, validated; KBError naming the file and the field otherwise."""
    file = Path(file)
    m = _FRONT.match(file.read_text(encoding="utf-8"))
    if not m:
        raise KBError(
            "no YAML front matter: the file must start with a '---' line and "
            "close the front matter with another '---' line",
            file,
            "front matter",
        )
    try:
        meta = yaml.safe_load(m.group(1))
    except yaml.YAMLError as exc:
        raise KBError(f"bad YAML: {exc}", file, "front matter") from None
    if not isinstance(meta, dict):
        raise KBError(
            f"front matter must be a mapping, got {type(meta).__name__}", file, "front matter"
        )
    return _Validator(file, meta, vocab).technique(m.group(2).strip())


class _Validator:
    """Checks one entry's front matter field by field; every error names the field."""

    def __init__(self, file: Path, meta: dict[str, Any], vocab: Vocabulary):
        self.file, self.meta, self.vocab = file, meta, vocab

    def fail(self, fld: str, message: str) -> KBError:
        return KBError(message, self.file, fld)

    def technique(self, body: str) -> Technique:
        missing = [f for f in REQUIRED if f not in self.meta]
        if missing:
            raise self.fail(missing[0], "missing required field")
        unknown = sorted(set(self.meta) - set(REQUIRED) - set(OPTIONAL))
        if unknown:
            raise self.fail(unknown[0], choices_error("field", unknown[0], REQUIRED + OPTIONAL))
        tid = self.text("id")
        if tid != self.file.stem:
            raise self.fail("id", f"id {tid!r} must equal the file name's stem {self.file.stem!r}")
        families = self.choices("families", self.vocab.families)
        targets = self.choices("targets", TARGETS)
        if not body:
            raise self.fail("body", "the entry has no prose after the front matter")
        return Technique(
            id=tid,
            title=self.text("title"),
            families=families,
            targets=targets,
            preconditions=self.preconditions(families, targets),
            action=self.action(families, targets),
            invariants=self.choices("invariants", tuple(INVARIANTS), allow_any=False),
            effect=self.text("effect"),
            hurts=self.text("hurts"),
            references=self.references(),
            topics=self.strings("topics", required=False),
            status=self.status(),
            preserves=self.preserves(),
            body=body,
            path=str(self.file),
        )

    def text(self, fld: str) -> str:
        v = self.meta.get(fld)
        if not isinstance(v, str) or not v.strip():
            raise self.fail(fld, f"must be a non-empty string, got {v!r}")
        return v.strip()

    def strings(self, fld: str, required: bool = True) -> tuple[str, ...]:
        v = self.meta.get(fld, [] if not required else None)
        if not isinstance(v, list) or not all(isinstance(x, str) and x.strip() for x in v):
            raise self.fail(fld, f"must be a list of non-empty strings, got {v!r}")
        if required and not v:
            raise self.fail(fld, "must list at least one item")
        return tuple(x.strip() for x in v)

    def choices(self, fld: str, valid: Sequence[str], allow_any: bool = True) -> tuple[str, ...]:
        items = self.strings(fld)
        allowed = (*valid, ANY) if allow_any else tuple(valid)
        for x in items:
            if x not in allowed:
                raise self.fail(fld, choices_error(_SINGULAR.get(fld, fld), x, allowed))
        if ANY in items and len(items) > 1:
            raise self.fail(fld, f"'any' stands alone, got {list(items)}")
        return items

    def preserves(self) -> tuple[str, ...]:
        """`preserves`: SPEC_INVARIANTS names, each optionally followed by ": detail"."""
        items = self.strings("preserves", required=False)
        for x in items:
            name = x.split(":", 1)[0].strip()
            if name not in SPEC_INVARIANTS:
                raise self.fail(
                    "preserves", choices_error("spec invariant", name, tuple(SPEC_INVARIANTS))
                )
        return items

    def status(self) -> str:
        v = self.meta.get("status", "ready")
        if v not in STATUSES:
            raise self.fail("status", choices_error("status", v, STATUSES))
        return v

    # names a condition may read: the families' shape symbols and tiles, the targets' options
    def names(self, families: tuple[str, ...], targets: tuple[str, ...]) -> set[str]:
        fams = FAMILIES if ANY in families else families
        tgts = TARGETS if ANY in targets else targets
        out: set[str] = set()
        for f in fams:
            out |= set(self.vocab.shapes.get(f, ())) | set(self.vocab.tiles.get(f, ()))
        for t in tgts:
            out |= set(self.vocab.policy_spaces.get(t, {}))
        return out

    def condition(self, fld: str, text: str, names: set[str]) -> None:
        tree = parse_condition(text)
        if tree is None:
            return
        bad = sorted(condition_names(tree) - names)
        if bad:
            raise self.fail(
                fld,
                f"condition {text!r} reads {bad}, which these families and targets lack; "
                f"valid names: {', '.join(sorted(names))}",
            )

    def preconditions(self, families: tuple[str, ...], targets: tuple[str, ...]) -> tuple[str, ...]:
        v = self.meta.get("preconditions")
        if v == []:
            return ()
        items = self.strings("preconditions")
        names = self.names(families, targets)
        for p in items:
            self.condition("preconditions", p, names)
        return items

    def references(self) -> tuple[Reference, ...]:
        v = self.meta.get("references")
        if not isinstance(v, list) or not v:
            raise self.fail("references", f"must be a non-empty list, got {v!r}")
        out = []
        for r in v:
            if isinstance(r, str) and r.strip():
                out.append(Reference(r.strip()))
            elif (
                isinstance(r, dict)
                and isinstance(r.get("title"), str)
                and set(r) <= {"title", "url"}
            ):
                url = r.get("url")
                if url is not None and not (
                    isinstance(url, str) and url.startswith(("https://", "http://"))
                ):
                    raise self.fail(
                        "references", f"url must start with https:// or http://, got {url!r}"
                    )
                out.append(Reference(r["title"].strip(), url))
            else:
                raise self.fail("references", f"each item is a title or {{title, url}}, got {r!r}")
        return tuple(out)

    def action(self, families: tuple[str, ...], targets: tuple[str, ...]) -> Action:
        a = self.meta.get("action")
        if not isinstance(a, dict):
            raise self.fail("action", f"must be a mapping with a 'kind', got {a!r}")
        kind = a.get("kind")
        if kind not in KINDS:
            raise self.fail("action.kind", choices_error("action kind", kind, KINDS))
        if kind == "rewrite":
            return self.rewrite(a)
        if kind == "level":
            return self.level(a, families, targets)
        return self.policy(a, families, targets)

    def level(
        self, a: dict[str, Any], families: tuple[str, ...], targets: tuple[str, ...]
    ) -> Action:
        """`{kind: level, level: explicit, tiles: {NAME: [ints]}, options: {name: [values]},
        when: ...}`: the explicit kernel's constexprs and build knobs (the family checks
        their names and values when it builds the kernel)."""
        keys = ("kind", "level", "tiles", "options", "when")
        extra = sorted(set(a) - set(keys))
        if extra:
            raise self.fail(f"action.{extra[0]}", choices_error("level action key", extra[0], keys))
        if a.get("level") not in LEVELS:
            raise self.fail("action.level", choices_error("level", a.get("level"), LEVELS))
        lists: dict[str, dict[str, tuple[Any, ...]]] = {}
        for part in ("tiles", "options"):
            node = a.get(part) or {}
            if not isinstance(node, dict):
                raise self.fail(f"action.{part}", f"must map names to value lists, got {node!r}")
            lists[part] = {}
            for name, vals in node.items():
                vals = vals if isinstance(vals, list) else [vals]
                if not vals or not all(
                    isinstance(v, int) and not isinstance(v, bool) for v in vals
                ):
                    raise self.fail(f"action.{part}.{name}", f"needs a list of ints, got {vals!r}")
                lists[part][str(name)] = tuple(vals)
        when = a.get("when")
        if when is not None:
            if not isinstance(when, str) or parse_condition(when) is None:
                raise self.fail(
                    "action.when", f"must be a checkable condition such as 'M <= 128', got {when!r}"
                )
        return Action(
            "level", tiles=lists["tiles"], compiler=lists["options"], when=when, level=a["level"]
        )

    def rewrite(self, a: dict[str, Any]) -> Action:
        name = a.get("rewrite")
        if name not in REWRITES:
            raise self.fail("action.rewrite", choices_error("rewrite", name, REWRITES))
        params = {k: v for k, v in a.items() if k not in ("kind", "rewrite")}
        for k, v in params.items():
            vals = v if isinstance(v, list) else [v]
            if not vals or not all(isinstance(x, (int, str)) for x in vals):
                raise self.fail(
                    f"action.{k}",
                    f"a rewrite parameter is a value or a list of ints/strings, got {v!r}",
                )
        return Action("rewrite", rewrite=name, params=params)

    def policy(
        self, a: dict[str, Any], families: tuple[str, ...], targets: tuple[str, ...]
    ) -> Action:
        extra = sorted(set(a) - {"kind", "set", "when"})
        if extra:
            raise self.fail(
                f"action.{extra[0]}",
                choices_error("policy action key", extra[0], ("kind", "set", "when")),
            )
        sets = a.get("set")
        if not isinstance(sets, dict) or not sets:
            raise self.fail("action.set", f"must map options or tiles to value lists, got {sets!r}")
        fams = FAMILIES if ANY in families else families
        tgts = TARGETS if ANY in targets else targets
        tiles: dict[str, tuple[Any, ...]] = {}
        compiler: dict[str, tuple[Any, ...]] = {}
        for opt, vals in sets.items():
            fld = f"action.set.{opt}"
            vals = vals if isinstance(vals, list) else [vals]
            if not vals:
                raise self.fail(fld, "needs at least one value")
            if all(opt in self.vocab.tiles.get(f, ()) for f in fams):
                if not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in vals):
                    raise self.fail(fld, f"tile values must be positive ints, got {vals}")
                tiles[opt] = tuple(vals)
                continue
            for t in tgts:
                space = self.vocab.policy_spaces.get(t, {})
                if opt not in space:
                    tile_names = sorted(
                        set.intersection(*(set(self.vocab.tiles.get(f, ())) for f in fams))
                    )
                    raise self.fail(
                        fld,
                        f"{opt!r} is neither a tile of {'/'.join(fams)} ({', '.join(tile_names)}) "
                        f"nor an option of target {t} ({', '.join(space)})",
                    )
                bad = [x for x in vals if x not in space[opt]]
                if bad:
                    raise self.fail(
                        fld, f"values {bad} outside target {t}'s {opt} choices {list(space[opt])}"
                    )
            compiler[opt] = tuple(vals)
        when = a.get("when")
        if when is not None:
            if not isinstance(when, str) or parse_condition(when) is None:
                raise self.fail(
                    "action.when", f"must be a checkable condition such as 'M <= 128', got {when!r}"
                )
            self.condition("action.when", when, self.names(families, targets))
        return Action("policy", tiles=tiles, compiler=compiler, when=when)
