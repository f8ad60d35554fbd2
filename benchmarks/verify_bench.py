"""Verification time of the smt verifier: per kernel, and how it grows with tile size and
warps. CPU only. Usage: python benchmarks/verify_bench.py [--repeat 3] [--backend mi300x]
(the backend whose declared target spec the kernels are verified for).

Prints one table last: kernel, tiles, warps, status, assertions, z3 queries, median wall
seconds and median CPU seconds of this process (on a shared machine the wall time includes
waiting for a core; the CPU time is what one verification costs). The proof cache is not
used: every row is a verification from scratch. Target: every row < 1 s.
Columns `synth s` and `+synth s` (issue #19, docs/invariants.md): for kernels whose family
derives a spec from its reference (`reference_specs`), the median CPU seconds of
synthesizing the spec's invariants onto the IR (every mode; the spec itself is derived once
per family and cached), and of verifying the kernel with them (every mode: attention's two
mask modes are two verifications); `-` where there is none.
"""

from __future__ import annotations

import argparse
import logging
import pathlib
import re
import statistics
import time
import warnings

from argus_core.plugin_manager import Registry, default_plugin_manager
from argus_core.spec import synthesis
from argus_core.target import TargetSpec
from argus_core.types import Policy
from argus_plugins.dsl.tile.frontend import TileFrontend
from argus_plugins.verifiers.smt import SmtVerifier, analyse

ROOT = pathlib.Path(__file__).resolve().parents[1]
GEMM = ROOT / "plugins" / "kernels" / "gemm" / "kernel.py"
ATTENTION = ROOT / "plugins" / "kernels" / "attention" / "kernel.py"
MOE = ROOT / "plugins" / "kernels" / "moe" / "kernel.py"
MOE_KERNELS = ("moe_route", "moe_align", "moe_up", "moe_down", "moe_combine")
CORRECT = ROOT / "tests" / "plugins" / "verifiers" / "smt" / "correct"


def measure(
    path: pathlib.Path,
    tiles: dict[str, int],
    warps: int,
    repeat: int,
    target: TargetSpec,
    entry: str = "gemm",
    keys: tuple[str, ...] = ("BM", "BN", "BK"),
    modes: list | None = None,
) -> dict:
    """Median wall time of parse-free verification (the IR is traced once)."""
    ir = TileFrontend().parse(path.read_text(), entry, str(path))
    pol = Policy({c.name: tiles[c.name] for c in ir.constexprs}, {"num_warps": warps})
    times, cpu, findings, ctx = [], [], [], None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        findings, ctx = analyse(ir, pol, {}, target)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    status = (
        "violated"
        if any(f.status == "violated" for f in findings)
        else ("unknown" if any(f.status == "unknown" for f in findings) else "verified")
    )
    syn_t, tot_t = [], []
    for _ in range(repeat if modes else 0):  # CPU seconds, like the `cpu s` column
        t0 = time.process_time()
        for values, spec in synthesis.kernel_modes(ir, modes):
            synthesis.synthesize(synthesis.with_scalars(ir, values) if values else ir, spec)
        syn_t.append(time.process_time() - t0)
        t0 = time.process_time()
        synthesis.check_modes(SmtVerifier(), ir, pol, modes, target, {"cache": False})
        tot_t.append(time.process_time() - t0)
    return {
        "synth": statistics.median(syn_t) if syn_t else None,
        "with_synth": statistics.median(tot_t) if tot_t else None,
        "kernel": entry if path.stem == "kernel" else path.stem,
        "tiles": (
            " ".join(f"{k}{tiles[k]}" for k in keys if k in pol.tiles)
            if path == MOE  # each kernel binds its own subset: name them
            else "x".join(str(tiles[k]) for k in keys if k in pol.tiles)
        ),
        "warps": warps,
        "status": status,
        "assertions": len(findings),
        "queries": ctx.queries,
        "seconds": statistics.median(times),
        "cpu": statistics.median(cpu),
    }


def main() -> None:
    warnings.filterwarnings("ignore")  # the table is the output: no capture or z3 noise
    logging.disable(logging.WARNING)
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--backend", default="mi300x", help="verify for this backend's target")
    args = ap.parse_args()
    registry = Registry(default_plugin_manager())
    target = registry.get("backend", args.backend).spec
    gemm_spec = registry.get("kernel", "gemm").reference_specs("gemm")
    attention_spec = registry.get("kernel", "attention").reference_specs("attention")
    rows = []
    for t in (16, 32, 64, 128, 256):
        for w in (4, 8) if t >= 64 else (4,):
            rows.append(
                measure(
                    GEMM,
                    {"BM": t, "BN": t, "BK": min(t, 64), "GROUP": 8},
                    w,
                    args.repeat,
                    target,
                    modes=gemm_spec,
                )
            )
    for path in sorted(CORRECT.glob("*.py")):
        rows.append(
            measure(
                path,
                {"BM": 64, "BN": 64, "BK": 32, "GROUP": 8, "SPLIT": 4},
                4,
                args.repeat,
                target,
                modes=gemm_spec,
            )
        )
    for bm, bn, d in ((64, 32, 64), (64, 32, 128), (128, 64, 128)):
        for w in (4, 8):
            tiles = {"BM": bm, "BN": bn, "HEAD_D": d}
            keys = ("BM", "BN", "HEAD_D")
            rows.append(
                measure(ATTENTION, tiles, w, args.repeat, target, "attention", keys, attention_spec)
            )
    for moe_tiles in (
        {"BM": 16, "BN": 32, "BK": 32, "BS": 256, "BE": 128, "BT": 32, "BH": 64},
        {"BM": 128, "BN": 128, "BK": 64, "BS": 256, "BE": 128, "BT": 64, "BH": 128},
    ):
        for entry in MOE_KERNELS:
            keys = ("BM", "BN", "BK", "BS", "BE", "BT", "BH")
            # issue #19: each kernel's stage of the reference
            moe_spec = registry.get("kernel", "moe").reference_specs(entry) or None
            rows.append(measure(MOE, moe_tiles, 4, args.repeat, target, entry, keys, moe_spec))
    rows += emitted_rows(args.repeat, target)
    explicit = explicit_rows(args.repeat)
    head = (
        f"{'kernel':46} {'tiles':>18} {'warps':>5} {'status':>9} {'asserts':>7} {'queries':>7} "
        f"{'seconds':>8} {'cpu s':>6} {'synth s':>7} {'+synth s':>8}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['kernel'][:46]:46} {r['tiles']:>18} {r['warps']:>5} {r['status']:>9} "
            f"{r['assertions']:>7} {r['queries']:>7} {r['seconds']:>8.3f} {r['cpu']:>6.3f} "
            f"{_s(r['synth']):>7} {_s(r['with_synth']):>8}"
        )
    head = (
        f"{'explicit level':30} {'config':>44} {'status':>9} {'asserts':>7} {'cpu s':>6} "
        f"{'synth':>9} {'+asserts':>8} {'synth s':>7} {'+synth s':>8}"
    )
    print()
    print(head)
    print("-" * len(head))
    for r in explicit:
        print(
            f"{r['kernel']:30} {r['config']:>44} {r['status']:>9} {r['assertions']:>7} "
            f"{r['cpu']:>6.3f} {r['synth_status']:>9} {r['synth_assertions']:>8} "
            f"{r['synth']:>7.3f} {r['with_synth']:>8.3f}"
        )
    slow = [r for r in rows if r["cpu"] >= 1.0] + [r for r in explicit if r["cpu"] >= 2.0]
    print(
        f"\n{len(rows)} tile-level rows (target < 1 s CPU), {len(explicit)} explicit-level "
        f"(target < 2 s): {len(slow)} over"
        + (": " + ", ".join(r["kernel"] for r in slow) if slow else "")
    )


# issue #16: the front end's emissions beside tests/kernelbench_tasks (every task there is
# measured): the lowerings of lower_more.py and fullreduce on small inline modules (the
# shapes of tests/plugins/kernels/kernelbench/test_lower_more.py), and programs of several
# kernels (`match._program`): each kernel of a program is its own row
_HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"


def _task(sizes: str, init: str, forward: str, inputs: str) -> str:
    """A KernelBench-format task: module-level sizes, a Model, get_inputs."""
    return (
        f"{_HEAD}{sizes}\n\n\nclass Model(nn.Module):\n    def __init__(self):\n"
        f"        super().__init__()\n{init}\n    def forward(self, {forward}\n\n\n"
        f"def get_inputs():\n    return {inputs}\n\n\ndef get_init_inputs():\n    return []\n"
    )


INLINE_TASKS = {
    "cumsum_masked": _task("R = 5\nN = 300", "", "x, mask):\n        return torch.cumsum(x * mask, dim=1)",
                           "[torch.randn(R, N), torch.rand(R, N) > 0.5]"),
    "cumsum_reverse": _task("R = 3\nN = 200", "", "x):\n        return torch.cumsum(x.flip(1), 1).flip(1)",
                            "[torch.randn(R, N)]"),
    "cumsum_exclusive": _task(
        "R = 3\nN = 200", "",
        "x):\n        c = torch.cumsum(x.narrow(dim=1, start=0, length=x.size(1) - 1), dim=1)\n"
        "        return torch.cat((torch.zeros_like(x.select(1, 0).unsqueeze(1)), c), dim=1)",
        "[torch.randn(R, N)]"),
    "cumprod": _task("R = 4\nN = 150", "", "x):\n        return torch.cumprod(x, dim=-1)",
                     "[torch.randn(R, N)]"),
    "cumprod_middle_dim": _task("A = 2\nL = 150\nB = 3", "", "x):\n        return torch.cumprod(x, dim=1)",
                                "[torch.rand(A, L, B)]"),
    "cumsum_first_dim_rev": _task("L = 150\nA = 3\nB = 2", "",
                                  "x):\n        return torch.cumsum(x.flip(0), 0).flip(0)",
                                  "[torch.randn(L, A, B)]"),
    "instance_norm": _task("N = 3\nC = 4\nH = 9\nW = 30", "        self.n = nn.InstanceNorm2d(C, affine=True)\n",
                           "x):\n        return self.n(x) * 2.0", "[torch.randn(N, C, H, W)]"),
    "group_norm": _task("N = 5\nC = 6\nL = 300", "        self.n = nn.GroupNorm(3, C)\n",
                        "x):\n        return self.n(x)", "[torch.randn(N, C, L)]"),
    "layer_norm": _task("B = 6\nD1 = 5\nD2 = 300", "        self.n = nn.LayerNorm((D1, D2))\n",
                        "x):\n        return self.n(x)", "[torch.randn(B, D1, D2)]"),
    "frobenius": _task("A = 3\nB = 4\nC = 700", "", "x):\n        return x / torch.norm(x, p='fro')",
                       "[torch.randn(A, B, C)]"),
    "mse": _task("R = 10\nN = 40", "", "p, t):\n        return torch.mean((p - t) ** 2)",
                 "[torch.randn(R, N), torch.randn(R, N)]"),
    "smooth_l1": _task("R = 20\nN = 300", "", "p, t):\n        return F.smooth_l1_loss(p, t, beta=0.5)",
                       "[torch.randn(R, N), torch.randn(R, N)]"),
    "kl_batchmean": _task("R = 20\nN = 150", "",
                          "p, t):\n        return F.kl_div(torch.log(p), t, reduction='batchmean')",
                          "[torch.rand(R, N).softmax(-1), torch.rand(R, N).softmax(-1)]"),
    "cross_entropy": _task("R = 37\nK = 10", "", "x, y):\n        return F.cross_entropy(x, y)",
                           "[torch.randn(R, K), torch.randint(0, K, (R,))]"),
    "triplet": _task("R = 21\nD = 300", "        self.loss = nn.TripletMarginLoss(margin=0.5)\n",
                     "a, p, n):\n        return self.loss(a, p, n)",
                     "[torch.randn(R, D), torch.randn(R, D), torch.randn(R, D)]"),
    "hinge_row_vector": _task("R = 20\nN = 40", "",
                              "p, t):\n        return torch.mean(torch.clamp(1 - p * t, min=0))",
                              "[torch.randn(R, N), torch.randn(N)]"),
    "scale_by_number": _task("M = 30\nN = 50", "", "a, s):\n        return a * s",
                             "[torch.randn(M, N), 2.5]"),
    "einsum_rows": _task("B = 2\nI = 3\nJ = 5\nL = 20\nK = 24", "",
                         "a, b):\n        return torch.einsum('bijl,lk->bijk', a, b)",
                         "[torch.randn(B, I, J, L), torch.randn(L, K)]"),
    "triu_matmul": _task("N = 40", "", "a, b):\n        return torch.triu(torch.matmul(a, b), diagonal=1)",
                         "[torch.randn(N, N), torch.randn(N, N)]"),
    "tril_matmul": _task("N = 40", "", "a, b):\n        return torch.tril(torch.matmul(a, b))",
                         "[torch.randn(N, N), torch.randn(N, N)]"),
    # programs: a conv then a max pool, a group norm of a conv's output
    "conv3x3_maxpool2x2": _task("N = 2\nC = 3\nK = 8\nH = 12", "        self.c = nn.Conv2d(C, K, 3)\n"
                          "        self.p = nn.MaxPool2d(2)\n",
                          "x):\n        return self.p(self.c(x))", "[torch.randn(N, C, H, H)]"),
    "conv_groupnorm": _task("N = 2\nC = 3\nK = 8\nH = 10", "        self.c = nn.Conv2d(C, K, 3)\n"
                            "        self.g = nn.GroupNorm(4, K)\n",
                            "x):\n        return self.g(self.c(x))", "[torch.randn(N, C, H, H)]"),
}  # fmt: skip


def emitted_rows(repeat: int, target: TargetSpec) -> list[dict]:
    """`measure` of each kernel the front end emits (its first tile values) for every task
    of tests/kernelbench_tasks and of INLINE_TASKS; a program's kernels one by one."""
    import tempfile

    from argus_core.errors import ConfigError
    from argus_core.frontend.capture import capture_task
    from argus_plugins.kernels.kernelbench.family import emission_spec
    from argus_plugins.kernels.kernelbench.match import match
    from argus_plugins.kernels.kernelbench.tasks import load_module

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        paths = sorted(
            (ROOT / "tests" / "kernelbench_tasks").glob("level*/*.py"),
            key=lambda p: (p.parent.name, int(p.stem.split("_")[0])),
        )
        for name, text in INLINE_TASKS.items():
            path = pathlib.Path(tmp) / f"{name}.py"
            path.write_text(text)
            paths.append(path)
        for path in paths:
            label = path.stem.split("_", 1)[1] if path.stem[0].isdigit() else path.stem
            gm, _ = capture_task(load_module(path), path.stem)
            em = match(gm, path.stem)
            tiles = {k: v[0] for k, v in em.tiles.items()}
            kernels = em.entries or (em.entry,)
            for entry in kernels:
                try:  # the kernel's spec (a program's: its part of the graph), where written
                    spec = [({}, emission_spec(gm, em, entry if em.entries else None))]
                except (ConfigError, ValueError):
                    spec = None
                template = em.template
                if em.entries:  # "# ---- kernel kb_k0 (template `conv`), writes buffer t0"
                    m = re.search(rf"# ---- kernel {entry} \(template `(\w+)`\)", em.source)
                    template = m.group(1) if m else em.template
                src = pathlib.Path(tmp) / f"kb_{template}.py"
                src.write_text(em.source)
                keys = tuple(k for k in tiles if not em.entries or k.startswith(entry[3:] + "_"))
                row = measure(src, tiles, 4, repeat, target, entry, keys, spec)
                row["kernel"] = f"kb_{template} {label}" + (f" {entry[3:]}" if em.entries else "")
                row["tiles"] = "x".join(str(tiles[k]) for k in keys)
                out.append(row)
    return out


# issue #16: the explicit level's kernels (docs/explicit.md), each family's builds at the
# knobs a policy can pick, its default tiles: thread-level invariants (explicit_ops.py),
# no z3 query per element (the target is < 2 s each)
EXPLICIT = (
    ("gemm", "hopper-gluon", {"num_warps": 4, "mma_in_flight": 1}, {}),
    ("gemm", "hopper-gluon", {"num_warps": 4, "mma_in_flight": 0}, {}),
    ("gemm", "hopper-gluon", {"num_warps": 8, "mma_in_flight": 1}, {"BN": 256}),
    ("gemm", "cdna3-gluon", {"lds_stages": 1}, {}),
    ("gemm", "cdna3-gluon", {"lds_stages": 2}, {}),
    ("attention", "hopper-gluon", {"consumers": 1}, {"D": 128}),
    ("attention", "hopper-gluon", {"consumers": 2}, {"D": 128, "CAUSAL": 1}),
    ("attention", "hopper-gluon", {"consumers": 2, "overlap": 1}, {"D": 128}),
    ("attention", "hopper-gluon", {"consumers": 2, "pingpong": 1}, {"D": 128, "CAUSAL": 1}),
    ("attention", "hopper-gluon", {"consumers": 2}, {"D": 64}),
    ("attention", "cdna3-gluon", {}, {"D": 128}),
    ("attention", "cdna3-gluon", {}, {"D": 64, "CAUSAL": 1}),
    ("moe", "hopper-gluon", {"num_warps": 8, "mma_in_flight": 1}, {"BN": 256}),
    ("moe", "hopper-gluon", {"num_warps": 4, "mma_in_flight": 0}, {"BN": 128}),
    ("moe", "hopper-gluon", {"num_warps": 8, "fuse_silu": 1}, {"BN": 128}),
    ("moe", "cdna3-gluon", {}, {}),
)


def explicit_rows(repeat: int) -> list[dict]:
    """Median CPU seconds of `verify_explicit` for each EXPLICIT build (the last dict: tile
    overrides, or the attention's shape D and CAUSAL)."""
    from argus_core.plugin_manager import Registry, default_plugin_manager
    from argus_core.spec.explicit import attach
    from argus_plugins.verifiers.smt.explicit_ops import verify_explicit
    from argus_plugins.verifiers.smt.explicit_spec import verify as verify_with_spec

    registry = Registry(default_plugin_manager())
    out = []
    for family, target, knobs, extra in EXPLICIT:
        if family == "attention":
            from argus_plugins.kernels.attention.kernel_explicit import for_policy

            kernel = for_policy(knobs, {}, target, dict(extra))
        elif family == "gemm":
            from argus_plugins.kernels.gemm.kernel_explicit import for_policy

            kernel = for_policy(knobs, dict(extra), target)
        else:
            from argus_plugins.kernels.moe.kernel_explicit import for_policy

            kernel = for_policy(knobs, dict(extra), target)
        cpu, rep = [], None
        for _ in range(repeat):
            c0 = time.process_time()
            rep = verify_explicit(kernel, kernel.consts)
            cpu.append(time.process_time() - c0)
        # issue #19: the family's reference spec bound to the kernel (synthesis) and proved
        # with everything else (`explicit_spec.verify`)
        fam = registry.get("kernel", family)
        synth, both, srep = [], [], None
        for _ in range(repeat):
            c0 = time.process_time()
            ghost = attach(kernel, fam.explicit_spec(kernel, dict(kernel.consts)))
            c1 = time.process_time()
            srep = verify_with_spec(ghost, kernel.consts)
            synth.append(c1 - c0)
            both.append(time.process_time() - c0)
        consts = kernel.consts
        tiles = "x".join(str(consts[k]) for k in ("BM", "BN", "BK", "STAGES") if k in consts)
        knob = " ".join(f"{k}={v}" for k, v in knobs.items())
        shape = f"D{extra['D']}" if "D" in extra else ""
        shape += " causal" if extra.get("CAUSAL") else ""
        out.append(
            {
                "kernel": f"{family} {target.split('-')[0]} {shape}".strip(),
                "config": f"{tiles} {knob}".strip(),
                "status": rep.status,
                "assertions": rep.assertions,
                "cpu": statistics.median(cpu),
                "synth": statistics.median(synth),
                "with_synth": statistics.median(both),
                "synth_status": srep.status,
                "synth_assertions": srep.assertions - rep.assertions,
            }
        )
    return out


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


if __name__ == "__main__":
    main()
