"""`+verifier.options.synthesize=true`: a run verifies each candidate also against the
invariants synthesized from its family's reference; a candidate whose data flow differs is
rejected at the verify stage with the synthesized counterexample (never compiled or run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

KERNEL = Path(__file__).parent / "pipeline" / "attention_kv_head_mod.py"


@pytest.mark.slow
def test_run_rejects_a_wrong_kv_head_at_verify(tmp_path, run_argus):
    proc = run_argus(
        "+kernel=attention",
        "budget=1",
        f"kernel.source={KERNEL}",
        "+verifier.options.synthesize=true",
        "tracking=none",
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    (result,) = json.loads(
        next(Path(tmp_path, ".argus", "runs").glob("*/results.json")).read_text()
    )
    line = next(n for n, t in enumerate(KERNEL.read_text().splitlines(), 1) if "# <- synth" in t)
    assert result["failure"].startswith(f"verify: synth at attention_kv_head_mod.py:{line}")
    assert result["compile"] is None
    cex = result["verify"]["counterexamples"][0]
    assert cex["assertion"] == "synth_dataflow"
    assert cex["should_read"][1] != cex["reads"][1]  # the KV head
