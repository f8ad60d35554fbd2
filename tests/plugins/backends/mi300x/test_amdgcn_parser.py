"""The AMDGCN report parser on text in the form LLVM prints."""

from __future__ import annotations

from types import SimpleNamespace

from argus_plugins.backends.mi300x.amdgcn import count_instructions, parse_resources, report_fields

ASM = """\
gemm:
	s_load_dwordx4 s[0:3], s[0:1], 0x0
	buffer_load_dwordx4 v[2:5], v1, s[4:7], 0 offen
	global_load_ushort v6, v[7:8], off
	ds_write_b128 v9, v[2:5]
	s_waitcnt lgkmcnt(0)
	s_barrier
	ds_read2st64_b64 v[10:13], v14 offset1:1
	v_mfma_f32_16x16x16_bf16 a[0:3], v[10:11], v[12:13], a[0:3]
	v_mfma_f32_32x32x8_bf16 a[0:15], v[10:11], v[12:13], a[0:15]
	scratch_store_dword off, v15, s33
	buffer_store_dwordx2 v[2:3], v1, s[8:11], 0 offen
	s_endpgm
; codeLenInByte = 1234
; NumVgprs: 100
; NumAgprs: 64
; TotalNumVgprs: 164
; ScratchSize: 16
; Occupancy: 3
amdhsa.kernels:
  - .agpr_count:     64
    .private_segment_fixed_size: 16
    .sgpr_count:     40
    .sgpr_spill_count: 2
    .vgpr_count:     164
    .vgpr_spill_count: 5
"""


def test_resources():
    r = parse_resources(ASM)
    assert r == {
        "vgprs": 164,
        "sgprs": 40,
        "agprs": 64,
        "arch_vgprs": 100,
        "vgpr_spills": 5,
        "sgpr_spills": 2,
        "scratch_bytes": 16,
        "scratch_comment": 16,
        "occupancy": 3,
        "code_bytes": 1234,
    }


def test_instruction_mix():
    c = count_instructions(ASM)
    assert c["v_mfma"] == 2 and c["buffer_load"] == 1 and c["global_load"] == 1
    assert c["ds_read"] == 1 and c["ds_write"] == 1 and c["scratch_store"] == 1
    assert c["buffer_store"] == 1 and c["global_store"] == 0
    assert c["total"] == 12


def test_report_fields():
    f = report_fields(ASM, SimpleNamespace(shared=16384))
    assert (f["registers"], f["sgprs"], f["agprs"], f["spills"]) == (164, 40, 64, 7)
    assert (f["scratch_bytes"], f["occupancy"], f["shared_bytes"]) == (16, 3, 16384)
    assert (f["mma_count"], f["buffer_loads"]) == (2, 1)
    assert f["instructions"]["vgpr_spills"] == 5


def test_missing_figures_stay_unknown():
    f = report_fields("\tv_add_u32 v0, v1, v2\n", SimpleNamespace(shared=0))
    assert f["registers"] is None and f["spills"] is None and f["occupancy"] is None
    assert f["mma_count"] == 0
