"""The LLM path of `planner=icrl`: the model writes DSL kernels and repairs failed ones.

`LLMPolicy` builds the prompt (the DSL's rules and the family's own kernel as the example;
the task, the data-flow specification derived from the family's PyTorch reference
(issue #19: what each output element reads, in `argus_core.spec.prompt`'s compact form),
the best candidate so far with its report, the episode history with rewards, the KB
techniques for this family and target with the invariants each must preserve), asks for one fenced python block, and
turns the reply into a `Candidate(origin="llm")` under the best policy so far. A failed
candidate goes back in a repair request, within `repair_budget` repairs per lineage: a
violated one with its counterexamples verbatim (`verify.summary` and the JSON), one that
failed to parse or trace, lower, compile or compute the right values with that error (and
its largest errors against the reference). A counterexample of an invariant synthesized
from the reference (`assertion == "synth_dataflow"`) is restated against the specification
and counted per invariant (`caught`, the run's `synth_caught` metrics). The reply's code is never run here:
the pipeline parses `origin="llm"` candidates through `argus_core.sandbox`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from argus_core import kb
from argus_core.llm import LLMBudgetExceeded, LLMError, save_transcript
from argus_core.sandbox import SAFE_BUILTINS, truncate
from argus_core.spec.prompt import family_spec_lines
from argus_core.types import Candidate, CandidateResult, Policy

NEW = "llm"  # the technique an LLM-written candidate carries
REPAIR = "llm-repair"  # ... and a repair of a violated one
TRANSCRIPT_FILE = "llm_transcript.json"  # in the run directory, rewritten after each request

# a fenced block: ```python / ```py / ``` ... ```
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.DOTALL)


def dsl_rules(imports: str) -> str:
    """The system prompt's rules of a DSL module; `imports` is the DSL front end's
    `allowed_imports_text` ("from argus_plugins.dsl.tile import lang as al; import math"):
    the first import opens the module, the rest are all it may add."""
    first, _, rest = (part.strip() for part in imports.partition(";"))
    also = f"besides that only `{rest}` is\n  allowed" if rest else "nothing else is allowed"
    return f"""\
You write GPU kernels in Argus's tile DSL, a Python-embedded language that is traced into
an IR (never run as Python), verified against data-flow invariants by an SMT solver, and
lowered to Triton.

Rules of a DSL module:
- It starts with `{first}`; {also}. No other imports, no I/O, no classes, no try/with, no dunder or private names.
  Builtins allowed: {", ".join(sorted(SAFE_BUILTINS))}.
- Kernels are functions decorated with `@al.kernel`. Parameters are annotated
  `al.Tensor["M", "K"]` (symbolic dims), `al.constexpr` (a tile constant the policy sets),
  `al.i32` or `al.f32`.
- `al.program_ids(grid, order=...)` gives the program's tile coordinates; tiles are views
  made by dividing a tensor (`a.tile(BM, BK)[pm, k]`), masked at the edges by the view.
- `for k in al.range(n):` is traced once with a symbolic k: no Python `while` loops and no
  Python branches on tile values. Accumulate in f32 (`al.zeros(..., al.f32)`, `al.dot`).
- Invariants: every loaded element carries its global coordinates as a tag; `al.dot`
  asserts the contracted coordinates of its operands agree; `al.store` asserts each
  element lands where its tag says, exactly once across the grid; `al.tag`,
  `al.assert_tag_eq` and `al.assert_tag` state your own. A violated invariant comes back
  as a counterexample: the assertion, program point, program id, element, iteration.
- Keep the example's kernel names and constexpr parameter names: the policy sets them.

Answer with exactly one fenced ```python block holding the complete module, then at most
one line saying what you changed.
"""


# failures an LLM can repair from the error text (policy and internal errors are ours)
REPAIRABLE = ("parse", "lower", "compile", "correctness")
REPAIR_HINTS = {
    "parse": "Fix it so that the module traces as DSL code (only the DSL's imports and "
    "builtins are allowed; the trace has a time limit).\n",
    "lower": "Fix the construct the lowering rejects.\n",
    "compile": "Fix what the compiler rejects (shapes, dtypes, resources the target lacks).\n",
    "correctness": "The kernel verified but computes the wrong values: check the arithmetic "
    "(scaling, accumulation dtype, masks' `other` values) against the task.\n",
}


def failure_stage(result: CandidateResult) -> str:
    """The pipeline stage a failure names (`"compile: ..."` -> "compile"); "" if none."""
    failure = result.failure or ""
    head = failure.split(":", 1)[0].strip()
    return head if ":" in failure and head.isidentifier() else ""


def extract_code(text: str | None) -> str | None:
    """The code of the reply's python block (the first one that defines an `@...kernel`,
    else the first python or untagged block); None when the reply has no fenced block."""
    blocks = [
        body for lang, body in _FENCE.findall(text or "") if lang.lower() in ("", "python", "py")
    ]
    if not blocks:
        return None
    kernels = [b for b in blocks if re.search(r"^\s*@\s*\w+\.kernel\b", b, re.MULTILINE)]
    return (kernels or blocks)[0].strip() + "\n"


def synth_violations(result: CandidateResult) -> list[dict[str, Any]]:
    """The counterexamples of invariants synthesized from the reference (issue #19)."""
    if result.verify.status != "violated":
        return []
    return [c for c in result.verify.counterexamples if c.get("assertion") == "synth_dataflow"]


def invariant_key(cex: dict[str, Any]) -> str:
    """The synthesized invariant a counterexample violates, by the spec's read it pins:
    `k[o0, o1 // (HQ // HKV), k1, k0]` (from the message's parenthesis), else its text."""
    from argus_core.spec.caught import invariant_of

    return invariant_of(cex)


def report_line(result: CandidateResult) -> str:
    """'verified yes, correct yes, 0.2220 ms (estimated), registers 68, spills 0' or the
    failure: what the prompt says about one candidate."""
    v = {"verified": "yes", "violated": "NO", "unknown": "unknown"}.get(
        result.verify.status, "not checked"
    )
    c = result.correctness
    parts = [f"verified {v}", f"correct {'yes' if c and c.ok else 'no' if c else 'not run'}"]
    if result.timing is not None:
        kind = "estimated" if result.timing.estimated else "measured"
        parts.append(f"{result.timing.ms:.4f} ms ({kind})")
    if result.compile is not None:
        parts.append(f"registers {result.compile.registers}, spills {result.compile.spills}")
    if result.failure:  # may quote untrusted code's own text: cut to a few KiB
        parts.append(f"FAILED {truncate(result.failure)}")
    return ", ".join(parts)


def run_directory() -> Path | None:
    """The Hydra run's output directory, None outside a Hydra run (a test's session)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return Path(HydraConfig.get().runtime.output_dir)
    except Exception:
        return None


@dataclass
class LLMPolicy:
    """One run's use of the LLM: prompts, replies -> candidates, and the repair budget."""

    client: Any  # argus_core.llm.LLMClient
    family: Any
    dsl_imports: str  # the DSL front end's `allowed_imports_text`, for the rules
    backend: str
    shape: dict[str, int]
    dtype: str
    repair_budget: int = 2
    techniques: list[str] = field(default_factory=list)  # KB summaries for the prompt
    spec: list[str] = field(default_factory=list)  # the reference's data flow (spec lines)
    transcript_dir: Path | None = None
    stopped: str | None = None  # why the LLM is no longer asked (its budget is spent)
    requests: int = 0
    repairs: int = 0
    malformed: int = 0
    lineage: dict[str, str] = field(default_factory=dict)  # candidate -> its first LLM ancestor
    repairs_used: dict[str, int] = field(default_factory=dict)  # lineage root -> repairs
    # synthesized invariant (the spec's read it pins) -> LLM candidates it caught
    caught: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def from_ctx(cls, ctx: dict[str, Any], repair_budget: int) -> LLMPolicy:
        """A policy over `ctx["llm"]` for `ctx`'s family, DSL, backend, shape and dtype."""
        family, backend = ctx["family"], ctx["backend"]
        kcfg = ctx["kernel_cfg"]
        shape = {str(k): int(v) for k, v in dict(kcfg.get("shape") or {}).items()}
        base = kb.load()
        fam = family.name if family.name in base.families else None
        tgt = backend.name if backend.name in base.backend_targets else None
        found = base.query(family=fam, target=tgt, shape=shape)
        return cls(
            client=ctx["llm"],
            family=family,
            dsl_imports=ctx["dsl"].allowed_imports_text,
            backend=backend.name,
            shape=shape,
            dtype=str(kcfg.get("dtype", "")),
            repair_budget=repair_budget,
            techniques=[t.summary() for t in found],
            spec=family_spec_lines(family),
            transcript_dir=run_directory(),
        )

    @property
    def active(self) -> bool:
        return self.stopped is None

    # ------------------------------------------------------------------ prompts
    def system_message(self) -> dict[str, str]:
        example = self.family.source()
        return {
            "role": "system",
            "content": f"{dsl_rules(self.dsl_imports)}\nExample: the {self.family.name} family's own kernel module\n"
            f"```python\n{example.rstrip()}\n```\n",
        }

    def context(self, best: CandidateResult | None, policy: Policy, history: Sequence[str]) -> str:
        """The task, the best candidate so far with its report, the history, the KB."""
        entries = list(self.family.entries)
        lines = [
            f"Task: kernel family {self.family.name}, shape {self.shape}, dtype {self.dtype}, "
            f"target {self.backend}. Write a module defining the kernel(s) {', '.join(entries)}.",
            f"Policy the candidate runs with: {policy.key()} (tile constants {sorted(policy.tiles)}).",
            "",
        ]
        if best is not None:
            lines += [
                f"Best candidate so far: {best.candidate.id} ({report_line(best)})",
                f"```python\n{best.candidate.source.rstrip()}\n```",
                "",
            ]
        if self.spec:
            lines += [
                "Data-flow specification, derived from the PyTorch reference: what output "
                "element (o0, o1, ...) reads. Every candidate must keep it; the verifier "
                "synthesizes invariants from it and proves them on the kernel (a load of "
                "the wrong batch, head, expert or key block is a counterexample):",
                *self.spec,
                "",
            ]
        lines.append("Episode history (candidate, technique, reward; reward = speedup over")
        lines.append("the starting candidate, -1 failed verification or correctness, -0.5 other):")
        lines += [f"- {h}" for h in history] or ["- (none yet)"]
        lines += ["", "Knowledge-base techniques for this family and target:"]
        lines += [f"- {t}" for t in self.techniques] or ["- (none)"]
        return "\n".join(lines)

    def new_messages(
        self, best: CandidateResult | None, policy: Policy, history: Sequence[str]
    ) -> list[dict[str, str]]:
        ask = (
            "Write a faster kernel module that still satisfies every invariant (same kernel "
            "names and constexpr parameters)."
        )
        return [
            self.system_message(),
            {"role": "user", "content": f"{self.context(best, policy, history)}\n\n{ask}"},
        ]

    def repair_messages(
        self,
        violated: CandidateResult,
        best: CandidateResult | None,
        policy: Policy,
        history: Sequence[str],
    ) -> list[dict[str, str]]:
        """The repair request for a failed LLM candidate: its source and, verbatim, what
        failed — the verifier's counterexamples, or the parse/trace, lowering, compile or
        correctness error with its numbers."""
        v = violated.verify
        source = f"```python\n{violated.candidate.source.rstrip()}\n```\n"
        if v.status == "violated":
            cex = json.dumps(v.counterexamples, indent=2, default=str)
            synth = synth_violations(violated)
            spec_note = "".join(
                f"It violates the invariant `{invariant_key(c)}` synthesized from the "
                f"PyTorch reference: {c.get('message') or c.get('text')}\n"
                for c in synth[:3]
            )
            if synth and self.spec:
                spec_note += "The specification it must follow:\n" + "\n".join(self.spec) + "\n"
            ask = (
                f"Your candidate {violated.candidate.id} FAILED verification. Its source:\n"
                f"{source}"
                f"Counterexample:\n{v.summary}\n"
                f"{spec_note}"
                f"Counterexamples (JSON):\n```json\n{cex}\n```\n"
                "Repair the kernel so that this invariant holds; change only what the "
                "counterexample points at. Answer with the complete corrected module."
            )
        else:
            stage = failure_stage(violated)
            detail = ""
            c = violated.correctness
            # a candidate that crashed or timed out before any comparison has no errors
            if stage == "correctness" and c is not None and c.max_abs_err is not None:
                rel = "n/a" if c.max_rel_err is None else f"{c.max_rel_err:.3g}"
                detail = (
                    f"Largest errors against the PyTorch reference: abs {c.max_abs_err:.3g}, "
                    f"rel {rel}.\n"
                )
            ask = (
                f"Your candidate {violated.candidate.id} FAILED at the {stage} stage. Its "
                f"source:\n{source}"
                f"The error:\n{truncate(violated.failure or '')}\n{detail}"
                f"{REPAIR_HINTS.get(stage, '')}"
                "Answer with the complete corrected module."
            )
        return [
            self.system_message(),
            {"role": "user", "content": f"{self.context(best, policy, history)}\n\n{ask}"},
        ]

    # ------------------------------------------------------------------ candidates
    def propose(
        self,
        cid: str,
        policy: Policy,
        best: CandidateResult | None,
        history: Sequence[str],
    ) -> Candidate | None:
        """A new LLM-written candidate `cid` under `policy`; None once the LLM budget is
        spent (the caller falls back to the bandit for the rest of the run)."""
        parent = best.candidate.id if best is not None else None
        messages = self.new_messages(best, policy, history)
        cand = self._ask(cid, messages, policy, parent, NEW, "llm: a kernel written by the LLM")
        if cand is not None:
            self.lineage[cid] = cid
        return cand

    def wants_repair(self, result: CandidateResult) -> bool:
        """True for a failed LLM candidate (violated, or failed to parse, lower, compile or
        check correct) whose lineage has repairs left."""
        cid = result.candidate.id
        if cid not in self.lineage:
            return False
        for c in synth_violations(result):  # the planner's record of what the spec caught
            key = invariant_key(c)
            if cid not in self.caught.setdefault(key, []):
                self.caught[key].append(cid)
        if not self.active:
            return False
        if result.verify.status != "violated" and failure_stage(result) not in REPAIRABLE:
            return False
        if "the LLM request failed" in (result.failure or ""):  # nothing of its to repair
            return False
        return self.repairs_used.get(self.lineage[cid], 0) < self.repair_budget

    def repair(
        self,
        cid: str,
        violated: CandidateResult,
        best: CandidateResult | None,
        history: Sequence[str],
    ) -> Candidate | None:
        """Candidate `cid`: the LLM's repair of `violated`, under the same policy, with its
        counterexamples in the request verbatim. None once the LLM budget is spent."""
        root = self.lineage[violated.candidate.id]
        used = self.repairs_used.get(root, 0) + 1
        policy = violated.candidate.policy
        messages = self.repair_messages(violated, best, policy, history)
        why = violated.verify.summary if violated.verify.status == "violated" else violated.failure
        note = f"llm-repair {used}/{self.repair_budget} of {violated.candidate.id}: {why[:200]}"
        cand = self._ask(cid, messages, policy, violated.candidate.id, REPAIR, note)
        if cand is not None:
            self.repairs_used[root] = used
            self.repairs += 1
            self.lineage[cid] = root
        return cand

    def _ask(
        self,
        cid: str,
        messages: list[dict[str, str]],
        policy: Policy,
        parent: str | None,
        technique: str,
        note: str,
    ) -> Candidate | None:
        """The request; its reply's code as a candidate. A failed request or a reply
        without code gives a candidate with empty source whose note says why (the
        pipeline fails it at parse with that reason)."""
        source = ""
        try:
            self.requests += 1
            reply = self.client.complete(messages)
        except LLMBudgetExceeded as exc:
            self.requests -= 1  # refused before it was sent
            self.stopped = str(exc)
            return None
        except LLMError as exc:
            self.malformed += 1
            note = f"no code: the LLM request failed: {exc}"
        else:
            code = extract_code(reply.text)
            if code is None:
                self.malformed += 1
                note = "no code: the LLM's reply holds no fenced ```python block"
            else:
                source = code
        finally:
            self._save_transcript()
        return Candidate(
            id=cid,
            kernel=self.family.name,
            source=source,
            entry=self.family.entry,
            policy=policy,
            techniques=[technique],
            parent=parent,
            note=note,
            origin="llm",
        )

    def _save_transcript(self) -> None:
        # every request, as sent, beside the run's results (tracking=none keeps no artifact)
        if self.transcript_dir is not None and self.client.transcript():
            save_transcript(self.transcript_dir / TRANSCRIPT_FILE, self.client)

    def state(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "repairs": self.repairs,
            "malformed": self.malformed,
            "active": int(self.active),
            "stopped": self.stopped,
            # candidates the synthesized invariants caught, and the invariants that did
            "synth_caught": len({c for ids in self.caught.values() for c in ids}),
            "synth_invariants": len(self.caught),
        }
