"""`argus export` (issue #18): real runs on the CPU (interpreter backend), exported,
installed into a fresh venv, checked with `torch.library.opcheck`, called against PyTorch
and compiled with `torch.compile`; the shape-domain contract refuses calls outside the
proved domain naming the condition; several runs give one policy per tuned shape."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

import pytest

from argus_core.export import ExportError, build, choose, py
from argus_core.ir.expr import BoolOp, Cmp, Sym

GEMM_SHAPES = ({"M": 96, "N": 80, "K": 64}, {"M": 512, "N": 256, "K": 64})
ATTN_SHAPE = {"B": 1, "HQ": 4, "HKV": 2, "S": 40, "SKV": 48, "D": 64, "CAUSAL": 1, "VARLEN": 0}


def _flow(d: dict[str, int]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in d.items()) + "}"


def _env() -> dict[str, str]:
    env = {**os.environ, "HYDRA_FULL_ERROR": "0"}
    env.pop("TRITON_INTERPRET", None)
    return env


def _argus(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "argus_core.cli", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _run(cwd: Path, *args: str) -> Path:
    cwd.mkdir(parents=True, exist_ok=True)
    done = _argus(cwd, "backend=interpret", "budget=1", "tracking=none", "progress=off", *args)
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = sorted((cwd / ".argus" / "runs").iterdir())
    return run


def test_preconditions_are_written_as_python_logic():
    hq, hkv, causal, s, skv = (Sym(n) for n in ("HQ", "HKV", "causal", "S", "SKV"))
    pred = BoolOp("or", (Cmp("==", causal, 0), Cmp("<=", s, skv)))
    neg = BoolOp("not", (Cmp("==", hq % hkv, 0),))
    for env in ({"causal": 1, "S": 5, "SKV": 4}, {"causal": 0, "S": 5, "SKV": 4},
                {"causal": 1, "S": 3, "SKV": 4}):  # fmt: skip
        assert eval(py(pred), {}, env) == bool(pred.evaluate(env))
    # Triton's ~ on a Python bool is truthy either way; the exported check must not use it
    assert eval(py(neg), {}, {"HQ": 4, "HKV": 2}) is False
    assert eval(py(neg), {}, {"HQ": 4, "HKV": 3}) is True


def test_choose_takes_the_fastest_measured_then_refuses_failures():
    def rec(cid, ms, estimated, failure=None):
        return {"candidate": {"id": cid}, "index": 0, "lowered": {"x": 1}, "failure": failure,
                "timing": {"ms": ms, "estimated": estimated}}  # fmt: skip

    records = [rec("c001", 0.5, True), rec("c002", 0.9, False), rec("c003", 0.1, True, "verify: x")]
    assert choose(records, None, "run")["candidate"]["id"] == "c002"  # measured beats estimated
    with pytest.raises(ExportError, match="c003 of run failed"):
        choose(records, "c003", "run")
    with pytest.raises(ExportError, match="candidates: c001, c002, c003"):
        choose(records, "c009", "run")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    out = {}
    for i, shape in enumerate(GEMM_SHAPES):
        out[f"gemm{i}"] = _run(root / f"gemm{i}", "+kernel=gemm", f"kernel.shape={_flow(shape)}")
    out["attention"] = _run(root / "attn", "+kernel=attention", f"kernel.shape={_flow(ATTN_SHAPE)}")
    out["unverified"] = _run(
        root / "unverified",
        "+kernel=gemm",
        "verifier=none",
        f"kernel.shape={_flow(GEMM_SHAPES[0])}",
    )
    return out


@pytest.mark.slow
def test_export_refuses_what_it_cannot_stand_behind(runs, tmp_path):
    with pytest.raises(ExportError, match="not verified.*--allow-unverified"):
        build([runs["unverified"]], tmp_path / "a")
    build([runs["unverified"]], tmp_path / "a", allow_unverified=True)  # asked for: written
    with pytest.raises(ExportError, match="different kernels"):
        build([runs["gemm0"], runs["attention"]], tmp_path / "b")
    with pytest.raises(ExportError, match="same shape"):
        build([runs["gemm0"], runs["unverified"]], tmp_path / "c", allow_unverified=True)
    with pytest.raises(ExportError, match="does not exist"):
        build([tmp_path / "nope"], tmp_path / "d")
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "keep.txt").write_text("x")
    with pytest.raises(ExportError, match="not empty"):
        build([runs["gemm0"]], tmp_path / "e")


@pytest.mark.slow
def test_cli_export_writes_a_package_with_provenance_and_aot_binaries(runs, tmp_path):
    out = tmp_path / "pkg"
    done = _argus(tmp_path, "export", str(runs["gemm0"]), "--out", str(out), "--aot")
    assert done.returncode == 0, done.stderr[-2000:]
    pkg = out / "argus_gemm"
    manifest = json.loads((pkg / "manifest.json").read_text())
    op = manifest["ops"]["gemm"]
    assert [i["name"] for i in op["inputs"]] == ["a", "b"]
    assert op["outputs"] == [{"name": "c", "dims": ["M", "N"], "dtype": "bf16"}]
    assert op["domain"]["ranges"] == {s: [1, 1048576] for s in ("K", "M", "N")}
    (bucket,) = op["buckets"]
    assert bucket["provenance"]["verify"] == "verified"
    # the backend that evaluated it, from its record (backend=interpret here; auto resolves
    # where the run ran, and an export elsewhere must launch for that one)
    assert bucket["provenance"]["backend"] == "interpret"
    assert json.loads((runs["gemm0"] / "results.json").read_text())[0]["backend"] == "interpret"
    assert bucket["provenance"]["run"] == str(runs["gemm0"].resolve())
    assert (pkg / "kernels" / f"{bucket['module']}.py").read_text().startswith("# Lowered by Argus")
    kinds = sorted(Path(a["path"]).suffix for a in manifest["aot"])
    assert kinds == [".cubin", ".hsaco"]
    assert all((pkg / a["path"]).stat().st_size > 1000 for a in manifest["aot"])
    readme = (out / "README.md").read_text()
    assert "torch.ops.argus_gemm.gemm(a, b)" in readme and "(estimate)" in readme
    bad = _argus(tmp_path, "export", str(tmp_path / "missing"))
    assert bad.returncode == 2 and "does not exist" in bad.stderr


CHECK = r"""
import json, math, sys, torch
import argus_gemm, argus_attention
torch.manual_seed(0)
out = {}
a = torch.randn(96, 64, dtype=torch.bfloat16); b = torch.randn(64, 80, dtype=torch.bfloat16)
c = torch.ops.argus_gemm.gemm(a, b)
out["gemm_err"] = (c.float() - a.float() @ b.float()).abs().max().item()
big = torch.randn(500, 64, dtype=torch.bfloat16); bb = torch.randn(64, 250, dtype=torch.bfloat16)
out["gemm_err_other_shape"] = (torch.ops.argus_gemm.gemm(big, bb).float() - big.float() @ bb.float()).abs().max().item()
from argus_gemm import _runtime as rt
op = argus_gemm.MANIFEST["ops"]["gemm"]
out["buckets"] = [rt.bucket(op, {"M": m, "N": n, "K": 64}, {})["shape"] for m, n in ((100, 90), (600, 300))]
errors = {}
for label, args in {
    "k_mismatch": (a, torch.randn(63, 80, dtype=torch.bfloat16)),
    "dtype": (a.float(), b),
    "rank": (a[None], b),
}.items():
    try:
        torch.ops.argus_gemm.gemm(*args)
        errors[label] = None
    except Exception as exc:
        errors[label] = str(exc)
B, HQ, HKV, S, SKV, D = 1, 4, 2, 40, 48, 64
q = torch.randn(B, HQ, S, D, dtype=torch.bfloat16)
k = torch.randn(B, HKV, SKV, D, dtype=torch.bfloat16); v = torch.randn(B, HKV, SKV, D, dtype=torch.bfloat16)
qk_scale = math.log2(math.e) / math.sqrt(D)  # the kernel's softmax runs in base 2
o, lse = torch.ops.argus_attention.attention(q, k, v, qk_scale, 1)
kk, vv = (t.float().repeat_interleave(HQ // HKV, 1) for t in (k, v))
s = (q.float() @ kk.transpose(-1, -2)) / math.sqrt(D)
s = s.masked_fill(~torch.ones(S, SKV, dtype=torch.bool).tril(SKV - S), float("-inf"))
out["attn_err"] = (o.float() - torch.softmax(s, -1) @ vv).abs().max().item()
out["lse_err"] = (lse - torch.logsumexp(s, -1)).abs().max().item()
for label, args in {
    "gqa": (q, k[:, :1].repeat(1, 3, 1, 1), v[:, :1].repeat(1, 3, 1, 1), qk_scale, 1),
    "causal_s_gt_skv": (q, k[:, :, :30], v[:, :, :30], qk_scale, 1),
    "head_dim": (torch.randn(B, HQ, S, 192, dtype=torch.bfloat16),
                 torch.randn(B, HKV, SKV, 192, dtype=torch.bfloat16),
                 torch.randn(B, HKV, SKV, 192, dtype=torch.bfloat16), qk_scale, 1),
}.items():
    try:
        torch.ops.argus_attention.attention(*args)
        errors[label] = None
    except Exception as exc:
        errors[label] = str(exc)
out["errors"] = errors
torch.library.opcheck(torch.ops.argus_gemm.gemm.default, (a, b))
torch.library.opcheck(torch.ops.argus_attention.attention.default, (q, k, v, qk_scale, 1))
out["opcheck"] = True

class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(64, 64, dtype=torch.bfloat16), requires_grad=False)
    def forward(self, q, k, v):
        o, _ = torch.ops.argus_attention.attention(q, k, v, qk_scale, 1)
        x = o.reshape(-1, 64)
        return torch.relu(torch.ops.argus_gemm.gemm(x, self.w)) * 2

m = Block()
eager = m(q, k, v)
compiled = torch.compile(m, fullgraph=True)(q, k, v)
out["compile_err"] = (compiled.float() - eager.float()).abs().max().item()
print("RESULT " + json.dumps(out))
"""


@pytest.mark.slow
def test_exported_ops_install_in_a_fresh_venv_and_work_under_torch_compile(runs, tmp_path):
    gemm = build([runs["gemm0"], runs["gemm1"]], tmp_path / "gemm_pkg")
    attn = build([runs["attention"]], tmp_path / "attn_pkg")
    env_dir = tmp_path / "fresh"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    # torch and triton come from this environment (the packages' dependencies are installed)
    import sysconfig

    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    for pkg in (gemm, attn):
        done = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
             "--no-index", str(pkg)],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
    script = tmp_path / "check.py"
    script.write_text(textwrap.dedent(CHECK))
    env = {**_env(), "TRITON_INTERPRET": "1", "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "ind")}
    done = subprocess.run(
        [str(python), str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    out = json.loads(line[len("RESULT ") :])
    assert out["gemm_err"] < 0.5 and out["gemm_err_other_shape"] < 0.5  # bf16 outputs, |c| ~ 30
    assert out["buckets"] == [{"M": 96, "N": 80, "K": 64}, {"M": 512, "N": 256, "K": 64}]
    assert out["attn_err"] < 0.05 and out["lse_err"] < 1e-3
    errors = out["errors"]
    assert "both are K, they must agree" in errors["k_mismatch"]
    assert "dtype torch.float32" in errors["dtype"] and "torch.bfloat16" in errors["dtype"]
    assert "has 3 dims" in errors["rank"]
    assert "(HQ % HKV) == 0" in errors["gqa"] and "HKV=3" in errors["gqa"]
    assert "(causal == 0) or (S <= SKV)" in errors["causal_s_gt_skv"]
    assert "D <= 128" in errors["head_dim"]
    assert out["opcheck"] is True
    assert out["compile_err"] == 0.0


def test_a_sweep_directory_expands_to_its_jobs_in_job_order(tmp_path):
    from argus_core.export import expand_runs

    sweep = tmp_path / "multirun" / "2026-12-01_07-00-00"
    for job in ("10_kernel.shape=b", "2_kernel.shape=a", "notes"):
        (sweep / job).mkdir(parents=True)
    for job in ("10_kernel.shape=b", "2_kernel.shape=a"):
        (sweep / job / ".hydra").mkdir()
        (sweep / job / ".hydra" / "config.yaml").write_text("{}")
    assert [p.name for p in expand_runs([sweep])] == ["2_kernel.shape=a", "10_kernel.shape=b"]
    single = sweep / "2_kernel.shape=a"
    assert expand_runs([single]) == [single]
    with pytest.raises(ExportError, match="neither a run directory nor a sweep's"):
        expand_runs([sweep / "notes"])


@pytest.mark.slow
def test_a_run_killed_before_results_json_exports_from_its_jsonl(runs, tmp_path):
    """A run killed by SIGKILL has only results.jsonl (one record per finished candidate)."""
    import shutil

    killed = tmp_path / "killed"
    shutil.copytree(runs["gemm0"], killed)
    records = json.loads((killed / "results.json").read_text())
    (killed / "results.json").unlink()
    (killed / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    pkg = build([killed], tmp_path / "pkg")
    op = json.loads((pkg / "argus_gemm" / "manifest.json").read_text())["ops"]["gemm"]
    assert op["buckets"][0]["provenance"]["run"] == str(killed.resolve())
    (killed / "results.jsonl").unlink()
    with pytest.raises(ExportError, match="has no results.json or results.jsonl"):
        build([killed], tmp_path / "pkg2")
