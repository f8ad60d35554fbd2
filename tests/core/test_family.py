"""The family base: every optional `KernelFamily` member has its plain meaning, so the
pipeline calls it unprobed; `DSLKernelFamily` reads `kernel.py` or `kernel.source`."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from argus_core.errors import ConfigError
from argus_core.family import DSLKernelFamily, FamilyBase
from argus_core.protocols import KernelFamily
from argus_core.types import Candidate, Policy, TimingReport


class Tiny(FamilyBase):
    name, entry, outputs = "tiny", "tiny", ("y",)

    def source(self) -> str:
        return "made in memory"


def _cand(source: str = "x") -> Candidate:
    return Candidate(id="c1", kernel="tiny", source=source, entry="tiny", policy=Policy())


def test_the_defaults_are_one_kernel_in_the_run_dtype_without_a_baseline():
    fam = Tiny()
    assert fam.entries == ("tiny",) and fam.entries_for({"BM": 16}) == ("tiny",)
    assert fam.tensor_dtypes("bf16") == {} and fam.baselines({}) == {}
    assert fam.gemm_problems({"M": 1}, {}) == [] and fam.source_path is None
    launched = []
    fam.program(lambda name, tensors: launched.append((name, tensors)), {"y": 0}, {})
    assert launched == [("tiny", {"y": 0})]
    timing = TimingReport(ms=1.0, estimated=True)
    assert fam.baseline_estimate(timing, None) is timing  # type: ignore[arg-type]
    assert fam.candidate_kind(_cand()) == "dsl"


def test_a_family_without_a_kernel_file_refuses_kernel_source_and_programs():
    fam = Tiny()
    assert fam.bind(OmegaConf.create({"name": "tiny"}), None) is fam  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="kernel family 'tiny' does not take kernel.source"):
        fam.bind(OmegaConf.create({"source": "k.py"}), None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="checks DSL candidates only; candidate c1"):
        fam.check_program(_cand(), None)  # type: ignore[arg-type]


class Beside(DSLKernelFamily):
    name, entry, outputs = "beside", "k", ("y",)


def test_a_dsl_family_reads_the_kernel_beside_it_or_the_run_s_source(tmp_path):
    fam = Beside()
    assert fam.source_path == Path(__file__).with_name("kernel.py")
    mine = tmp_path / "mine.py"
    mine.write_text("# my kernel\n")
    bound = fam.bind(OmegaConf.create({"source": str(mine)}), None)  # type: ignore[arg-type]
    assert bound is not fam and bound.source() == "# my kernel\n"
    assert fam.source_path == Path(__file__).with_name("kernel.py")  # the registered one stays
    with pytest.raises(ConfigError, match=r"kernel.source='nope.py': no such file"):
        fam.bind(OmegaConf.create({"source": "nope.py"}), None)  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError, match="beside DSL source not found"):
        fam.source()


def test_every_built_in_family_follows_the_protocol():
    from argus_core.plugin_manager import Registry, make_plugin_manager

    families = Registry(make_plugin_manager(autoload=False)).all("kernel")
    assert {"gemm", "attention", "moe", "kernelbench"} <= set(families)
    assert all(isinstance(f, KernelFamily) for f in families.values())
