"""Which synthesized invariants caught which candidates' mistakes, per run (issue #19).

A candidate rejected by an invariant synthesized from its family's reference carries a
counterexample with `assertion == "synth_dataflow"` (`synthesis.check`). Over a run's
results this module gives the invariant -> candidates map, the run's metrics (`synth_caught`:
candidates caught; `synth_caught_invariants`: distinct invariants that caught one;
`synth_caught.<output>.<tensor>`: candidates per output/input pair), an MLflow param (the
map as text) and the line the run's summary prints.
"""

from __future__ import annotations

import json
import re
from typing import Any

SYNTH = "synth_dataflow"
PARAM = "synth_caught_by"
_PAREN = re.compile(r"\(([A-Za-z_]\w*\[[^()]*(?:\([^()]*\)[^()]*)*\])\)")
_KEY = re.compile(r"[^A-Za-z0-9_\-. /]")


def invariant_of(cex: dict[str, Any]) -> str:
    """The invariant a synthesized counterexample violates: `out <- read` (the spec's read
    it pins, `o <- k[o0, o1 // (HQ // HKV), k1, k0]`), from its `invariant` field; for an
    older record, the read in the message's parenthesis, else its message."""
    if cex.get("invariant"):
        return str(cex["invariant"])
    msg = str(cex.get("message") or cex.get("text") or "")
    m = _PAREN.search(msg)
    return m.group(1) if m else msg


def _violated(result: Any) -> list[dict[str, Any]]:
    v = result.verify if not isinstance(result, dict) else None
    if v is None:
        verify = result.get("verify") or {}
        status, cexs = verify.get("status"), verify.get("counterexamples") or []
    else:
        status, cexs = v.status, v.counterexamples
    if status != "violated":
        return []
    return [c for c in cexs if isinstance(c, dict) and c.get("assertion") == SYNTH]


def catches(results: list[Any]) -> dict[str, list[str]]:
    """Invariant -> the ids of the candidates it caught (in run order). `results` are
    CandidateResults or their dicts (results.json)."""
    out: dict[str, list[str]] = {}
    for r in results:
        cid = r["candidate"]["id"] if isinstance(r, dict) else r.candidate.id
        for c in _violated(r):
            ids = out.setdefault(invariant_of(c), [])
            if cid not in ids:
                ids.append(cid)
    return out


def _pair(inv: str) -> str:
    """`o <- k[...]` -> "o.k" (an MLflow-safe key part)."""
    out, _, read = inv.partition(" <- ")
    tensor = read.split("[", 1)[0].strip() if read else ""
    key = f"{out.strip()}.{tensor}" if tensor else out.split("[", 1)[0].strip()
    return _KEY.sub("_", key)[:200] or "unknown"


def metrics(found: dict[str, list[str]]) -> dict[str, float]:
    """The run's metrics (logged on the MLflow parent run); all zero when nothing was caught."""
    cands = {c for ids in found.values() for c in ids}
    out: dict[str, float] = {
        "synth_caught": float(len(cands)),
        "synth_caught_invariants": float(len(found)),
    }
    for inv, ids in found.items():
        k = f"synth_caught.{_pair(inv)}"
        out[k] = out.get(k, 0.0) + len(ids)
    return out


def param(found: dict[str, list[str]], limit: int = 6000) -> str:
    """The invariant -> candidates map as one JSON text (an MLflow param holds 6000 chars)."""
    text = json.dumps(found, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def summary_line(found: dict[str, list[str]]) -> str | None:
    """`synthesized invariants caught 2 candidates: o <- k[...] caught c3, c5; ...`;
    None when none was caught."""
    if not found:
        return None
    n = len({c for ids in found.values() for c in ids})
    parts = [f"{inv} caught {', '.join(ids)}" for inv, ids in found.items()]
    return f"synthesized invariants caught {n} candidate{'s' * (n != 1)}: " + "; ".join(parts)


__all__ = ["PARAM", "catches", "invariant_of", "metrics", "param", "summary_line"]
