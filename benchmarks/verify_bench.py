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
import pathlib
import statistics
import time

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
            # issue #19: each kernel's stage of the reference (moe_align has none)
            moe_spec = registry.get("kernel", "moe").reference_specs(entry) or None
            rows.append(measure(MOE, moe_tiles, 4, args.repeat, target, entry, keys, moe_spec))
    rows += emitted_rows(args.repeat, target)
    head = f"{'kernel':24} {'tiles':>18} {'warps':>5} {'status':>9} {'asserts':>7} {'queries':>7} {'seconds':>8} {'cpu s':>6} {'synth s':>7} {'+synth s':>8}"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['kernel']:24} {r['tiles']:>18} {r['warps']:>5} {r['status']:>9} {r['assertions']:>7} "
            f"{r['queries']:>7} {r['seconds']:>8.3f} {r['cpu']:>6.3f} "
            f"{_s(r['synth']):>7} {_s(r['with_synth']):>8}"
        )


# issue #19: one KernelBench task per front-end template, its emitted kernel with the spec
# derived from the task's graph (synthesis cost per template)
TEMPLATE_TASKS = (
    "level1/8_add_mul", "level1/3_matmul_bias_relu", "level2/5_linear_gelu_softmax",
    "level1/12_rms_norm_rows", "level1/5_row_softmax", "level1/6_row_sum",
    "level1/15_max_over_middle_dim", "level1/11_cumsum",
    # issue #16: the rest of the templates (every emitted kernel < 1 s): conv, chanprog,
    # max and average pools, a group norm's matmul_rows, a row mean
    "level1/17_conv2d_strided_padded_dilated", "level1/19_depthwise_conv1d",
    "level1/20_rms_norm_over_channels", "level1/21_maxpool2d_dilated_then_scale",
    "level1/22_avgpool3d_padded", "level2/8_linear_groupnorm_hardtanh", "level1/7_mean_last_dim",
    "level2/11_conv3d_batchnorm_residual_hardswish",
)  # fmt: skip


def emitted_rows(repeat: int, target: TargetSpec) -> list[dict]:
    """`measure` of each TEMPLATE_TASKS task's emitted kernel (its first tile values)."""
    import tempfile

    from argus_core.errors import ConfigError
    from argus_core.frontend.capture import capture_task
    from argus_plugins.kernels.kernelbench.family import emission_spec
    from argus_plugins.kernels.kernelbench.match import match
    from argus_plugins.kernels.kernelbench.tasks import load_module

    out = []
    tasks = ROOT / "tests" / "kernelbench_tasks"
    with tempfile.TemporaryDirectory() as tmp:
        for task in TEMPLATE_TASKS:
            path = tasks / f"{task}.py"
            gm, _ = capture_task(load_module(path), path.stem)
            em = match(gm, path.stem)
            src = pathlib.Path(tmp) / f"kb_{em.template}.py"
            src.write_text(em.source)
            tiles = {k: v[0] for k, v in em.tiles.items()}
            try:  # the graph's spec, where its rules can write it
                spec = [({}, emission_spec(gm, em))]
            except (ConfigError, ValueError):
                spec = None
            out.append(measure(src, tiles, 4, repeat, target, em.entry, tuple(tiles), spec))
    return out


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


if __name__ == "__main__":
    main()
