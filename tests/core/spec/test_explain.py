"""`python -m argus_core.verify --explain`: the strength report, and the synthesized
invariants proved (or a counterexample) for a kernel of a family with a reference spec."""

from __future__ import annotations

import pathlib

from argus_core.verify import run

ROOT = pathlib.Path(__file__).parents[3]
GEMM = ROOT / "plugins" / "kernels" / "gemm" / "kernel.py"
ATTN = ROOT / "plugins" / "kernels" / "attention" / "kernel.py"
CORPUS = ROOT / "tests" / "plugins" / "verifiers" / "synth" / "corpus"


def dims(out, tensor):
    return [d["pinned_by"] for r in out["reads"] if r["tensor"] == tensor for d in r["dims"]]


def test_explain_gemm(capsys):
    code, res = run(
        [str(GEMM), "--kernel", "gemm", "--policy", "BM=32,BN=32,BK=32,GROUP=4", "--explain"]
    )
    assert code == 0 and res["synthesized"]["status"] == "verified"
    assert res["synthesized"]["assertions"] == 2 and res["synthesized"]["synth_seconds"] >= 0
    c = res["explain"]["outputs"]["c"]
    assert c["window"].startswith("implied")
    # a's row walks the output's rows, its column is contracted with b's row
    assert dims(c, "a") == [
        ["synthesized", "implied (output axis)"],
        ["synthesized (summed axis)", "implied (contracted)"],
    ]
    assert "strength report for gemm" in capsys.readouterr().err


def test_explain_attention_names_hand_written_and_left_to_correctness():
    code, res = run([str(ATTN), "--policy", "BM=32,BN=32,HEAD_D=64", "--explain"])
    assert code == 0 and res["synthesized"]["status"] == "verified"
    o, lse = res["explain"]["outputs"]["o"], res["explain"]["outputs"]["lse"]
    assert o["window"] == "hand-written assert_contraction"
    kv = [r["dims"][1]["pinned_by"] for r in o["reads"] if r["tensor"] in ("k", "v")]
    assert len(kv) == 4 and all({"hand-written", "synthesized"} <= set(p) for p in kv)
    # the key of lse's reads reaches only reductions: pinned by the synthesized role check
    assert ["synthesized (summed axis)"] in dims(lse, "k")


def test_synthesize_catches_a_corpus_kernel_the_plain_verifier_proves():
    path = CORPUS / "attention_kv_head_mod.py"
    args = [str(path), "--policy", "BM=32,BN=32,HEAD_D=64", "--family", "attention"]
    code, res = run(args)
    assert code == 0 and res["status"] == "verified"
    code, res = run([*args, "--synthesize"])
    assert code == 1 and res["status"] == "violated"
    cex = res["synthesized"]["counterexamples"][0]
    assert cex["assertion"] == "synth_dataflow" and "should read k[" in cex["text"]


def test_family_without_a_spec_is_a_clear_error():
    code, res = run([str(GEMM), "--kernel", "gemm", "--family", "moe", "--synthesize"])
    assert code == 2 and "moe" in res["error"] and "no reference spec" in res["error"]
