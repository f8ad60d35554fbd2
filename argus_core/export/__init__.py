"""`argus export RUN [RUN ...] [--candidate ID] [--out DIR] [--name NAME] [--aot]`: ship a
run's winning kernel as a pip-installable package.

    argus export .argus/runs/2026-12-01_07-00-00 --out dist/argus_gemm
    pip install dist/argus_gemm
    python -c "import torch, argus_gemm; torch.ops.argus_gemm.gemm(a, b)"

The package registers one `torch.library` custom op per kernel (`torch.ops.<name>.<kernel>`)
with a fake implementation, so it traces under `torch.compile`; it holds the lowered Triton
source the run measured, a manifest of the shape domain the verifier proved it for, one
policy per tuned shape (each RUN given adds the shape it tuned: a sweep over `kernel.shape`
exported together dispatches per call to the nearest tuned shape), optionally the
ahead-of-time binaries (`--aot`: a cubin for sm_90 and an hsaco for gfx942, cross-compiled
here), and a README with the provenance (run, commit, policy, measured or estimated figures).

The shape-domain contract: the verifier proved the kernel's assertions for every extent of
every shape symbol in [1, max_extent] (`verifier.options.max_extent`) where the kernel's
`al.requires` preconditions hold, on contiguous row-major tensors. The exported op checks
each call against exactly that (ranks, dtypes, symbols that must agree, ranges,
preconditions, 32-bit offsets), makes its inputs contiguous, and refuses any other call with
an error naming the violated condition. A candidate the verifier did not prove is refused
unless `--allow-unverified`.

Only the run's own records are read (`results.json` / `results.jsonl`, `.hydra/config.yaml`);
the candidate's DSL source is traced again for its signature and preconditions: in the OS
sandbox when it is untrusted (an LLM's, a `kernel.source` file's), as the run did.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from argus_core.domain import parse_domain, with_domain
from argus_core.errors import ArgusError
from argus_core.ir.expr import BinOp, BoolOp, Call, Cmp, Const, Expr, Sym
from argus_core.types import LoweredKernel, Policy

EXIT_BAD_INPUT = 2
RUNTIME = Path(__file__).with_name("runtime.py")
PY_TYPES = {"fp32": "float", "f32": "float", "i32": "int", "int": "int", "float": "float"}


class ExportError(ArgusError):
    """A run, candidate or kernel that cannot be exported; says why and what would do."""

    stage = "export"


@dataclass
class Chosen:
    """One run's candidate to export, with what the run knew about it."""

    run_dir: Path
    cfg: Any  # the run's composed config (.hydra/config.yaml)
    record: dict[str, Any]


# --------------------------------------------------------------------------- reading a run


def load_run(run_dir: str | Path, candidate: str | None = None) -> Chosen:
    """The run's config and its chosen candidate's record: `candidate` (an id such as c003,
    or an index), else the fastest one that passed every stage and was proved."""
    from omegaconf import OmegaConf

    from argus_core.tracking.results import read_results

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ExportError(f"run directory {str(run_dir)!r} does not exist")
    cfg_path = run_dir / ".hydra" / "config.yaml"
    if not cfg_path.is_file():
        raise ExportError(f"{run_dir} has no .hydra/config.yaml: not a run directory `argus` made")
    cfg = OmegaConf.load(cfg_path)
    try:
        records = read_results(run_dir)
    except ValueError as exc:
        raise ExportError(str(exc)) from exc
    if not records:
        raise ExportError(f"{run_dir} has no finished candidate (results.json / results.jsonl)")
    return Chosen(run_dir, cfg, choose(records, candidate, run_dir))


def expand_runs(paths: Sequence[str | Path]) -> list[Path]:
    """Run directories from `paths`: each a run directory, or a sweep's directory
    (`.argus/multirun/DATE`: every job directory under it, in job order)."""
    runs: list[Path] = []
    for given in paths:
        path = Path(given)
        if (path / ".hydra" / "config.yaml").is_file() or not path.is_dir():
            runs.append(path)  # a missing one is reported by load_run
            continue
        jobs = sorted(
            (d for d in path.iterdir() if (d / ".hydra" / "config.yaml").is_file()),
            key=lambda d: (
                int(d.name.split("_")[0]) if d.name.split("_")[0].isdigit() else 0,
                d.name,
            ),
        )
        if not jobs:
            raise ExportError(
                f"{path} is neither a run directory nor a sweep's (no .hydra/config.yaml in it or under it)"
            )
        runs.extend(jobs)
    return runs


def choose(records: list[dict[str, Any]], candidate: str | None, where: Any) -> dict[str, Any]:
    ids = [str(r["candidate"]["id"]) for r in records]
    if candidate is not None:
        for r in records:
            if str(r["candidate"]["id"]) == candidate or str(r.get("index")) == candidate:
                if r.get("failure"):
                    raise ExportError(
                        f"candidate {candidate} of {where} failed ({r['failure']}); "
                        "only a candidate that passed can be exported"
                    )
                return r
        raise ExportError(f"no candidate {candidate!r} in {where}; candidates: {', '.join(ids)}")
    passed = [r for r in records if not r.get("failure") and r.get("lowered")]
    if not passed:
        reasons = "; ".join(f"{r['candidate']['id']}: {r.get('failure')}" for r in records[:5])
        raise ExportError(f"no candidate of {where} passed every stage ({reasons})")
    return min(passed, key=_time_key)


def _time_key(r: dict[str, Any]) -> tuple[int, float]:
    t = r.get("timing") or {}
    ms = t.get("ms")
    # a measured time ranks before any estimate; within each, the fastest first
    return (1 if t.get("estimated", True) else 0, ms if ms is not None else math.inf)


# --------------------------------------------------------------------------- describing an op


def py(e: Any, constants: dict[str, int] | None = None) -> str:
    """Python source for an IR expression (and/or/not as Python's, not Triton's & | ~)."""
    constants = constants or {}
    if isinstance(e, bool | int):
        return str(int(e))
    if isinstance(e, Const):
        return str(e.value)
    if isinstance(e, Sym):
        return str(constants.get(e.name, e.name))
    if isinstance(e, BinOp):
        return f"({py(e.a, constants)} {e.op} {py(e.b, constants)})"
    if isinstance(e, Cmp):
        return f"({py(e.a, constants)} {e.op} {py(e.b, constants)})"
    if isinstance(e, Call):
        return f"{e.fn}({', '.join(py(a, constants) for a in e.args)})"
    if isinstance(e, BoolOp):
        if e.op == "not":
            return f"(not {py(e.args[0], constants)})"
        return "(" + f" {e.op} ".join(py(a, constants) for a in e.args) + ")"
    raise ExportError(f"cannot write precondition term {e!r} as Python")


def _text(e: Any) -> str:
    s = py(e)
    return s[1:-1] if s.startswith("(") and s.endswith(")") else s


def _requirements(ir: Any) -> list[Expr]:
    """The kernel's preconditions, but the declared domain's min/max bounds (`kernel.domain`:
    they narrow the ranges instead)."""
    from argus_core.domain import POINT
    from argus_core.ir.tags import Requires

    return [
        op.pred
        for op in ir.walk()
        if isinstance(op, Requires)
        and not (op.point.file == POINT and isinstance(op.pred, Cmp) and op.pred.op in ("<=", ">="))
    ]


def describe(
    chosen: Chosen, ir: Any, lowered: LoweredKernel, dtypes: dict[str, str], compiler: dict
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the op's signature and domain, this run's bucket) for the manifest."""
    outputs = list(lowered.outputs)
    tensors = {t.name: t for t in ir.tensors}
    unknown = [o for o in outputs if o not in tensors]
    if unknown:
        raise ExportError(f"kernel {ir.name!r} writes {unknown}, which are not its tensors")
    inputs = [t for t in ir.tensors if t.name not in outputs]
    bound = {d.name for t in inputs for d in t.dims}
    for o in outputs:
        free = [d.name for d in tensors[o].dims if d.name not in bound]
        if free:
            raise ExportError(
                f"output {o!r} of {ir.name!r} has dims {free} that no input gives; an op "
                "must size its outputs from its inputs"
            )
    constexprs = {c.name for c in ir.constexprs}
    scalars = [(s.name, PY_TYPES.get(dt, "float")) for s, dt in ir.scalars]
    max_extent = int((chosen.cfg.verifier.get("options") or {}).get("max_extent", 2**20))
    declared = parse_domain(chosen.cfg.kernel.get("domain"))
    shared, per_bucket = [], []
    for pred in _requirements(ir):
        names = {s.name for s in pred.symbols()}
        (per_bucket if names & constexprs else shared).append(pred)
    op = {
        "kernel": ir.name,
        "inputs": [
            {"name": t.name, "dims": [d.name for d in t.dims], "dtype": dtypes[t.name]}
            for t in inputs
        ],
        "scalars": [{"name": n, "type": ty} for n, ty in scalars],
        "outputs": [
            {"name": o, "dims": [d.name for d in tensors[o].dims], "dtype": dtypes[o]}
            for o in outputs
        ],
        "domain": {
            "ranges": {
                s: [declared.get(s, {}).get("min", 1), declared.get(s, {}).get("max", max_extent)]
                for s in sorted(bound)
            },
            "requires": [
                {
                    "python": py(p),
                    "text": _text(p),
                    "symbols": sorted(s.name for s in p.symbols()),
                }
                for p in shared
            ],
            "layout": "contiguous row-major (inputs are made contiguous)",
        },
    }
    tiles = {k: int(v) for k, v in chosen.record["candidate"]["policy"]["tiles"].items()}
    bucket_reqs = []
    for p in per_bucket:
        value = p.subs({Sym(n): v for n, v in tiles.items()})
        if isinstance(value, Const | int) and int(value if isinstance(value, int) else value.value):
            continue  # holds for every call once the constants are fixed
        bucket_reqs.append({"python": py(value), "text": _text(value)})
    shape = {k: int(v) for k, v in dict(chosen.cfg.kernel.get("shape") or {}).items()}
    rec = chosen.record
    timing = rec.get("timing") or {}
    source_digest = hashlib.sha256(lowered.source.encode()).hexdigest()[:12]
    bucket = {
        "shape": {k: v for k, v in shape.items() if k in bound},
        "tuned_shape": shape,
        "module": f"{ir.name}_{source_digest}",
        "kernel": lowered.name,
        "params": [p.to_dict() for p in lowered.params],
        "grid": lowered.grid,
        "constexprs": {
            p.name: v
            for p in lowered.params
            if p.kind == "constexpr"
            for v in [_constexpr(p, tiles, lowered)]
            if v is not None
        },
        "tma_tensors": list(lowered.tma_tensors),
        "compiler": compiler,
        "requires": bucket_reqs,
        "provenance": {
            "run": str(chosen.run_dir.resolve()),
            "candidate": rec["candidate"]["id"],
            "policy": rec["candidate"]["policy"],
            "verify": (rec.get("verify") or {}).get("status"),
            "ms": timing.get("ms"),
            "baseline_ms": timing.get("baseline_ms"),
            "speedup": timing.get("speedup"),
            "estimated": bool(timing.get("estimated", True)),
            "backend": rec.get("backend") or str(chosen.cfg.backend.get("name")),
            "dtype": str(chosen.cfg.kernel.get("dtype")),
        },
    }
    return op, bucket


def _constexpr(p: Any, tiles: dict[str, int], lowered: LoweredKernel) -> int | None:
    if p.binding[0] == "descriptors":
        return None  # chosen per call from the tensors
    key = p.binding[1] if p.binding[0] == "const" and len(p.binding) > 1 else p.name
    for k in (key, p.name):
        if k in tiles:
            return tiles[k]
        if k in lowered.constexprs:
            return int(lowered.constexprs[k])
    raise ExportError(f"no value for constexpr {p.name!r} of {lowered.name!r}")


def analyse(chosen: Chosen, allow_unverified: bool = False) -> tuple[dict, dict, str]:
    """(op, bucket, lowered source) of one run's chosen candidate."""
    from argus_core.plugin_manager import Registry, default_plugin_manager
    from argus_core.sandbox import parse_candidate, trace_all_in_child
    from argus_core.tracking.results import result_from_dict

    rec, cfg = chosen.record, chosen.cfg
    status = (rec.get("verify") or {}).get("status")
    if status != "verified" and not allow_unverified:
        raise ExportError(
            f"candidate {rec['candidate']['id']} of {chosen.run_dir} is {status!r}, not "
            "verified: its shape domain is not proved (--allow-unverified exports it anyway)"
        )
    registry = Registry(default_plugin_manager())
    dsl = registry.get("dsl", cfg.dsl.name)
    family = registry.get("kernel", cfg.kernel.name).bind(cfg.kernel, dsl)
    cand = result_from_dict(rec).candidate
    entries = (
        tuple(family.entries) if cand.origin == "llm" else family.entries_for(cand.policy.tiles)
    )
    if len(entries) != 1:
        raise ExportError(
            f"candidate {cand.id} runs {len(entries)} kernels ({', '.join(entries)}); "
            "exporting multi-kernel programs (MoE, split-K) is not supported yet"
        )
    if cand.origin == "llm":
        irs = parse_candidate(dsl, cand, entries)
    elif cfg.kernel.get("source"):
        irs = trace_all_in_child(dsl, cand.source, entries, str(cfg.kernel.source))
    else:
        irs = [dsl.parse(cand.source, entries[0], str(family.source_path or f"<{cand.id}>"))]
    domain = parse_domain(cfg.kernel.get("domain"))  # as the run verified it
    irs = [with_domain(ir, domain) for ir in irs]
    lowered = LoweredKernel.from_dict(rec["lowered"])
    fixed = dict(family.tensor_dtypes(str(cfg.kernel.dtype)))
    dtypes = {t.name: fixed.get(t.name, str(cfg.kernel.dtype)) for t in irs[0].tensors}
    # the backend that evaluated it (backend=auto resolved where the run ran, maybe not the
    # one auto picks here), bound as the run bound it; records written before results named
    # it: the config's
    named = rec.get("backend") or cfg.backend.name
    chosen_backend, _grid = registry.get("backend", named).resolve(registry, cfg.backend)
    compiler = {
        k: v
        for k, v in chosen_backend.compiler_options(
            Policy.from_dict(rec["candidate"]["policy"])
        ).items()
        if v is not None
    }
    op, bucket = describe(chosen, irs[0], lowered, dtypes, compiler)
    return op, bucket, lowered.source


# --------------------------------------------------------------------------- writing a package


def build(
    runs: Sequence[str | Path],
    out: str | Path,
    name: str | None = None,
    candidate: str | None = None,
    aot: bool = False,
    allow_unverified: bool = False,
    force: bool = False,
) -> Path:
    """Write the package for `runs` (one or more runs of one kernel, each adding its tuned
    shape) into `out`; returns `out`."""
    runs = expand_runs(runs)
    chosen = [load_run(r, candidate if len(runs) == 1 else None) for r in runs]
    kernels = {str(c.cfg.kernel.name) for c in chosen}
    if len(kernels) > 1:
        raise ExportError(
            f"the runs are of different kernels {sorted(kernels)}; export one at a time"
        )
    name = name or f"argus_{_identifier(next(iter(kernels)))}"
    if not name.isidentifier():
        raise ExportError(f"--name {name!r} is not a Python identifier")
    ops: dict[str, dict[str, Any]] = {}
    sources: dict[str, str] = {}
    for c in chosen:
        op, bucket, source = analyse(c, allow_unverified)
        key = op["kernel"]
        if key in ops:
            same = {k: ops[key][k] for k in ("inputs", "scalars", "outputs")}
            if same != {k: op[k] for k in ("inputs", "scalars", "outputs")}:
                raise ExportError(
                    f"run {c.run_dir} gives kernel {key!r} another signature than the runs "
                    "before it; export runs of the same kernel and dtype together"
                )
            if any(b["shape"] == bucket["shape"] for b in ops[key]["buckets"]):
                raise ExportError(f"two runs tuned {key!r} at the same shape {bucket['shape']}")
        else:
            op["qualname"] = f"{name}.{key}"
            op["buckets"] = []
            ops[key] = op
        ops[key]["buckets"].append(bucket)
        sources[bucket["module"]] = source
    out = Path(out)
    if out.exists():
        if not force and any(out.iterdir()):
            raise ExportError(f"{out} exists and is not empty (--force replaces it)")
        shutil.rmtree(out)
    pkg = out / name
    (pkg / "kernels").mkdir(parents=True)
    (pkg / "kernels" / "__init__.py").write_text("")
    for module, source in sources.items():
        (pkg / "kernels" / f"{module}.py").write_text(source)
    shutil.copyfile(RUNTIME, pkg / "_runtime.py")
    manifest = {
        "package": name,
        "argus": _argus_version(),
        "commit": _commit(),
        "ops": ops,
    }
    if aot:
        manifest["aot"] = write_aot(pkg, ops, sources)
    (pkg / "manifest.json").write_text(json.dumps(manifest, indent=2, default=str))
    (pkg / "__init__.py").write_text(package_init(name, ops))
    (out / "pyproject.toml").write_text(pyproject(name))
    (out / "README.md").write_text(readme(name, manifest))
    return out


def _identifier(text: str) -> str:
    return re.sub(r"\W", "_", text)


def _argus_version() -> str:
    from argus_core import __version__

    return __version__


def _commit() -> str:
    from argus_core.tracking.metadata import git_commit

    commit = git_commit()
    return commit[:12] if commit else "unknown"


def package_init(name: str, ops: dict[str, dict[str, Any]]) -> str:
    """The package's `__init__.py`: one custom op per kernel, typed so torch.library infers
    its schema, with its fake implementation for torch.compile."""
    lines = [
        f'"""{name}: kernels exported by Argus (see README.md and manifest.json)."""',
        "",
        "import json",
        "from pathlib import Path",
        "",
        "import torch",
        "",
        "from . import _runtime",
        "",
        'MANIFEST = json.loads((Path(__file__).parent / "manifest.json").read_text())',
        "DomainError = _runtime.DomainError",
        "",
    ]
    for key, op in ops.items():
        tensors = [i["name"] for i in op["inputs"]]
        scalars = [(s["name"], s["type"]) for s in op["scalars"]]
        args = ", ".join(
            [f"{t}: torch.Tensor" for t in tensors] + [f"{n}: {ty}" for n, ty in scalars]
        )
        names = ", ".join(tensors + [n for n, _ in scalars])
        n_out = len(op["outputs"])
        ret = "torch.Tensor" if n_out == 1 else f"tuple[{', '.join(['torch.Tensor'] * n_out)}]"
        tdict = "{" + ", ".join(f'"{t}": {t}' for t in tensors) + "}"
        sdict = "{" + ", ".join(f'"{n}": {n}' for n, _ in scalars) + "}"
        fake_ret = "outs[0]" if n_out == 1 else "outs"
        lines += [
            "",
            f'@torch.library.custom_op("{name}::{key}", mutates_args=())',
            f"def {key}({args}) -> {ret}:",
            f'    """{key}: outputs {", ".join(o["name"] for o in op["outputs"])}; proved for '
            f'the domain in manifest.json (ops.{key}.domain)."""',
            f'    return _runtime.call("{name}", MANIFEST["ops"]["{key}"], {tdict}, {sdict})',
            "",
            "",
            f"@{key}.register_fake",
            f"def _{key}_fake({names}):",
            f'    outs = _runtime.fake(MANIFEST["ops"]["{key}"], {tdict})',
            f"    return {fake_ret}",
            "",
        ]
    lines.append(f"__all__ = {sorted(ops) + ['DomainError', 'MANIFEST']!r}")
    return "\n".join(lines) + "\n"


def pyproject(name: str) -> str:
    return f"""[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{name.replace("_", "-")}"
version = "0.1.0"
description = "Kernels exported by Argus, with their proved shape domain"
requires-python = ">=3.10"
dependencies = ["torch>=2.4", "triton>=3.0"]

[tool.setuptools]
packages = ["{name}", "{name}.kernels"]

[tool.setuptools.package-data]
"{name}" = ["manifest.json", "aot/**/*"]
"""


def readme(name: str, manifest: dict[str, Any]) -> str:
    out = [
        f"# {name}",
        "",
        f"Kernels exported by Argus {manifest['argus']} (commit {manifest['commit']}).",
        "",
    ]
    for key, op in manifest["ops"].items():
        sig = ", ".join([i["name"] for i in op["inputs"]] + [s["name"] for s in op["scalars"]])
        outs = ", ".join(o["name"] for o in op["outputs"])
        out += [f"## `torch.ops.{name}.{key}({sig})` -> {outs}", ""]
        for spec in op["inputs"] + op["outputs"]:
            out.append(f"- `{spec['name']}`: [{', '.join(spec['dims'])}] {spec['dtype']}")
        out += ["", "Proved for (the shape-domain contract; other calls raise DomainError):", ""]
        for s, (lo, hi) in op["domain"]["ranges"].items():
            out.append(f"- {lo} <= {s} <= {hi}")
        out += [f"- {r['text']}" for r in op["domain"]["requires"]]
        out += [f"- {op['domain']['layout']}; every tensor under 2**31 elements", ""]
        out += [
            "| tuned shape | policy | verifier | time (ms) | baseline (ms) | speedup | run |",
            "|---|---|---|---|---|---|---|",
        ]
        for b in op["buckets"]:
            p = b["provenance"]
            label = " (estimate)" if p["estimated"] else ""
            tiles = ", ".join(f"{k}={v}" for k, v in p["policy"]["tiles"].items())
            comp = ", ".join(f"{k}={v}" for k, v in p["policy"].get("compiler", {}).items())
            speed = f"{p['speedup']:.3f}x{label}" if p["speedup"] else "—"
            ms = f"{p['ms']:.4f}{label}" if p["ms"] is not None else "—"
            base = f"{p['baseline_ms']:.4f}" if p["baseline_ms"] else "—"
            out.append(
                f"| {b['tuned_shape']} | {tiles}; {comp} | {p['verify']} | {ms} | {base} | "
                f"{speed} | {p['run']} {p['candidate']} ({p['backend']}) |"
            )
        out.append("")
    out += [
        "Use:",
        "",
        "```python",
        f"import torch, {name}",
        f"y = torch.ops.{name}.{next(iter(manifest['ops']))}(...)  # also under torch.compile",
        "```",
        "",
    ]
    if manifest.get("aot"):
        out += ["Ahead-of-time binaries (for loaders that skip Triton's JIT):", ""]
        out += [f"- `{a['path']}` ({a['target']}, {a['bytes']} bytes)" for a in manifest["aot"]]
        out.append("")
    return "\n".join(out)


AOT_TARGETS = (("cuda", 90, 32, "cubin"), ("hip", "gfx942", 64, "hsaco"))


def write_aot(pkg: Path, ops: dict[str, dict], sources: dict[str, str]) -> list[dict[str, Any]]:
    """Cross-compile every bucket's kernel for sm_90 and gfx942 into `aot/` (no GPU needed:
    Triton's compilers run here); returns what was written. Must not run where
    TRITON_INTERPRET is set."""
    import os

    if os.environ.get("TRITON_INTERPRET") not in (None, "", "0"):
        raise ExportError("--aot cross-compiles: unset TRITON_INTERPRET for the export")
    from argus_core.evaluate.launch import ensure_triton_cache_dir, load_kernel
    from argus_core.lowering.triton_compile import specialized_signature

    ensure_triton_cache_dir()
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    written = []
    for op in ops.values():
        dtypes = {i["name"]: i["dtype"] for i in op["inputs"] + op["outputs"]}
        for b in op["buckets"]:
            lowered = LoweredKernel.from_dict(
                {
                    "name": b["kernel"],
                    "source": sources[b["module"]],
                    "params": b["params"],
                    "grid": b["grid"],
                    "outputs": [o["name"] for o in op["outputs"]],
                    "constexprs": b["constexprs"],
                    "tma_tensors": b["tma_tensors"],
                }
            )
            policy = Policy.from_dict(b["provenance"]["policy"])
            fn = load_kernel(lowered)
            for backend, arch, warp, kind in AOT_TARGETS:
                sig, consts, attrs = specialized_signature(
                    lowered, dtypes, policy, buffer_ops=backend == "hip"
                )
                for p in lowered.params:  # a launch-time choice: the pointer path here
                    if p.kind == "constexpr" and p.binding[0] == "descriptors":
                        consts[p.name] = 0
                options = {
                    k: v for k, v in b["compiler"].items() if k in ("num_warps", "num_stages")
                }
                try:
                    compiled = triton.compile(
                        ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs),
                        target=GPUTarget(backend, arch, warp),
                        options=options,
                    )
                except Exception as exc:  # noqa: BLE001 - reported, the export goes on
                    print(
                        f"argus export: --aot {backend}:{arch} of {b['module']}: {exc}",
                        file=sys.stderr,
                    )
                    continue
                folder = pkg / "aot" / f"{backend}-{arch}"
                folder.mkdir(parents=True, exist_ok=True)
                path = folder / f"{b['module']}.{kind}"
                blob = compiled.asm[kind]
                path.write_bytes(blob if isinstance(blob, bytes) else blob.encode())
                meta = {
                    "name": compiled.metadata.name,
                    "num_warps": compiled.metadata.num_warps,
                    "shared": compiled.metadata.shared,
                    "signature": sig,
                    "constexprs": consts,
                }
                path.with_suffix(".json").write_text(json.dumps(meta, indent=2, default=str))
                written.append(
                    {
                        "path": str(path.relative_to(pkg)),
                        "target": f"{backend}:{arch}",
                        "bytes": path.stat().st_size,
                        "module": b["module"],
                    }
                )
    return written


# --------------------------------------------------------------------------- CLI


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="argus export",
        description="Write a pip-installable package of a run's winning kernel: a torch.library "
        "custom op per kernel (works under torch.compile), its lowered source, the shape domain "
        "the verifier proved (checked at every call), one policy per tuned shape.",
    )
    p.add_argument(
        "runs",
        nargs="+",
        help="run directories, or a sweep's directory (its jobs); several runs of one kernel "
        "at different shapes give one policy per shape, dispatched per call",
    )
    p.add_argument(
        "--candidate",
        help="a candidate id (c003) or index (default: the fastest verified one that passed)",
    )
    p.add_argument("--out", help="the package directory (default: dist/<name>)")
    p.add_argument(
        "--name", help="the Python package and torch.ops namespace (default: argus_<kernel>)"
    )
    p.add_argument(
        "--aot",
        action="store_true",
        help="also cross-compile a cubin (sm_90) and an hsaco (gfx942)",
    )
    p.add_argument(
        "--allow-unverified",
        action="store_true",
        help="export a candidate the verifier did not prove",
    )
    p.add_argument("--force", action="store_true", help="replace a non-empty --out")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.candidate and len(args.runs) > 1:
        print("argus export: --candidate picks within one run; give one run", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        name = args.name
        if name is None:
            kernel = load_run(expand_runs(args.runs)[0], args.candidate).cfg.kernel.name
            name = f"argus_{_identifier(str(kernel))}"
        out = build(
            args.runs,
            args.out or Path("dist") / name,
            name=name,
            candidate=args.candidate,
            aot=args.aot,
            allow_unverified=args.allow_unverified,
            force=args.force,
        )
    except ArgusError as exc:
        print(f"argus export: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"exported {name} to {out} (pip install {out})")
    return 0


__all__ = ["ExportError", "build", "main", "load_run", "expand_runs", "describe", "package_init"]
