"""The synthesized specification in the LLM's prompt and repair requests (issue #19), with
the real LiteLLM client answering through litellm's `mock_response` (no network): the
first prompt shows the reference's data flow; a candidate the synthesized invariants catch
is repaired with the violated invariant restated against that specification, and the
planner records which invariant caught it."""

from __future__ import annotations

import functools
import pathlib

import pytest
from omegaconf import OmegaConf

from argus_core.llm import LiteLLMClient
from argus_core.pipeline import Stages
from argus_core.plugin_manager import Registry, default_plugin_manager
from argus_core.types import CandidateResult, Policy, TimingReport, VerifyReport
from argus_plugins.dsl.tile.frontend import TileFrontend
from argus_plugins.planners.icrl import IcrlPlanner
from argus_plugins.verifiers.smt.synth import check_modes
from tests.plugins.verifiers.smt.conftest import target_spec

pytest.importorskip("litellm")

BAD = pathlib.Path(__file__).parent / "pipeline" / "attention_kv_head_mod.py"
HEAD = "k[o0, o1 // (q.shape[1] // k.shape[1]), k1, k0]"  # the spec's KV head, as shown


class Mocked:
    """The real client; each request answered with the next `mock_response`."""

    def __init__(self, replies: list[str]):
        self.client = LiteLLMClient("gpt-4o-mini", "openai", options={})
        self.replies, self.model = list(replies), self.client.model

    def complete(self, messages, **kwargs):
        self.client.options["mock_response"] = self.replies.pop(0)
        return self.client.complete(messages, **kwargs)

    def usage(self):
        return self.client.usage()

    def transcript(self):
        return self.client.transcript()


@functools.cache
def _stages(kernel: str):
    from argus_core.config import compose

    cfg = compose([f"+kernel={kernel}", "backend=mi300x", "tracking=none"])
    return cfg, Stages.from_config(cfg, Registry(default_plugin_manager()))


def _session(tmp_path, kernel: str, replies: list[str]):
    cfg, st = _stages(kernel)
    ctx = {
        "family": st.family,
        "dsl": st.dsl,
        "backend": st.backend,
        "kernel_cfg": cfg.kernel,
        "backend_cfg": st.backend_cfg,
        "seed": 0,
        "budget": 8,
        "llm": Mocked(replies),
    }
    opts = {"values_path": str(tmp_path / "v.json"), "llm": True, "llm_every": 1}
    return IcrlPlanner().create(OmegaConf.create({"name": "icrl", "options": opts}), ctx), ctx


def _ok(cand, ms):
    res = CandidateResult(candidate=cand, timing=TimingReport(ms=ms, estimated=True))
    res.verify, res.reward = VerifyReport(status="verified"), 1.0
    return res


def _verified_by_synthesis(cand) -> CandidateResult:
    """The candidate's verify stage with the synthesized invariants (as the pipeline runs
    it with `+verifier.options.synthesize=true`)."""
    ir = TileFrontend().parse(cand.source, "attention", "<llm>")
    pol = Policy({c.name: {"BM": 32, "BN": 32, "HEAD_D": 64}[c.name] for c in ir.constexprs}, {})
    _, st = _stages("attention")
    rep = check_modes(ir, pol, st.family.reference_specs("attention"), target_spec())
    assert rep.status == "violated", rep.summary
    res = CandidateResult(candidate=cand, failure=f"verify: {rep.summary}", reward=-1.0)
    res.verify = VerifyReport(
        status="violated", counterexamples=rep.counterexamples, summary=rep.summary
    )
    return res


def test_prompt_and_repair_carry_the_synthesized_spec(tmp_path):
    bad = f"Packed heads:\n```python\n{BAD.read_text()}```\n"
    session, ctx = _session(tmp_path, "attention", [bad, bad])
    (start,) = session.propose(1)
    session.observe(_ok(start, 1.0))
    (cand,) = session.propose(1)
    assert cand.origin == "llm" and "% HKV" in cand.source
    first = ctx["llm"].transcript()[-1]["messages"][-1]["content"]
    assert "Data-flow specification, derived from the PyTorch reference" in first
    assert HEAD in first and "[causal=1]" in first and "where k1 <= o2" in first
    assert "must preserve: synth_" in first  # the KB techniques name their invariants
    session.observe(_verified_by_synthesis(cand))
    (fix,) = session.propose(1)
    assert fix.techniques == ["llm-repair"] and fix.parent == cand.id
    repair = ctx["llm"].transcript()[-1]["messages"][-1]["content"]
    assert "It violates the invariant `o <- k[o0, o1 // (HQ // HKV), k1, k0]`" in repair
    assert "o[0, 1, 0, 0] should read k[0, 0, 0, 0]" in repair
    assert "The specification it must follow:" in repair and HEAD in repair
    llm = session.state()["llm"]
    assert llm["synth_caught"] == 1
    assert session.llm.caught["o <- k[o0, o1 // (HQ // HKV), k1, k0]"] == [cand.id]


def test_gemm_prompt_names_the_contraction(tmp_path):
    session, ctx = _session(tmp_path, "gemm", ["no code here"])
    (start,) = session.propose(1)
    session.observe(_ok(start, 1.0))
    session.propose(1)
    first = ctx["llm"].transcript()[-1]["messages"][-1]["content"]
    assert "c[o0, o1] reads a[o0, k0]; b[k0, o1]; summed over k0 < a.shape[1]" in first
