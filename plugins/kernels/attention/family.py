"""The flash-attention (forward) family's reference side: inputs, reference, FLOPs, bytes.

O = softmax(Q Kᵀ · scale + mask) V per (batch, query head), with grouped-query attention
(query head h reads key/value head h // (HQ / HKV)) and the log-sum-exp of each query row's
scaled, masked scores as a second output. The DSL kernel lives beside this file in
`kernel.py`; `source()` returns its text.

Causal convention: **bottom-right aligned**, as flash-attention (>= 2.1) and KV-cache
decoding use it: query row i of S sees key j of S_KV iff j <= i + (S_KV - S), so the last
query sees every key. (PyTorch's `scaled_dot_product_attention(is_causal=True)` is top-left
aligned, j <= i, and differs whenever S != S_KV; the reference therefore passes an explicit
mask.) Causal mode requires S <= S_KV, so that every query row sees at least one key and no
row's softmax is empty. With S == S_KV both conventions agree.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

from argus_core.errors import ConfigError, choices_error
from argus_core.evaluate.dtypes import element_bytes, torch_dtype
from argus_core.family import DSLKernelFamily
from argus_core.ir.explicit import explicit_knobs
from argus_plugins.kernels.attention import kernel_explicit

# (atol, rtol) per dtype of q/k/v/o, applied to both outputs. Scores have std Q_GAIN, so
# each output row is a peaked average of a few unit-normal values of v and O(0.1..1). A
# correct kernel differs from the fp32 reference by the rounding of P to the input dtype
# before P·V (2^-9 relative for bf16, 2^-12 for fp16, averaged over keys) and by the final
# rounding of o (one ulp from the reference's own rounding): under half the tolerance.
# A stale running max, an off-by-one mask or a wrong KV head moves some element by 30x to
# 1000x the tolerance (tests/plugins/kernels/test_attention_family.py simulates each).
TOLERANCES: dict[str, tuple[float, float]] = {
    "bf16": (1e-2, 1e-2),
    # fp16 keeps 3 more mantissa bits than bf16; still 100x below the bugs' errors
    "fp16": (5e-3, 5e-3),
}

SHAPE_KEYS: tuple[str, ...] = ("B", "HQ", "HKV", "S", "SKV", "D", "CAUSAL", "VARLEN")

# q is drawn with this standard deviation (k, v unit normal), so scores q·k/sqrt(D) have std
LOG2E = 1.4426950408889634  # exp(x) == exp2(x * log2(e))
# Q_GAIN at any D: peaked enough that outputs are O(1) and that skipping the rescale by a
# new running max is visible, small enough that exp() is far from overflow.
Q_GAIN = 2.0

# the reference materializes scores in row chunks of at most this many fp32 elements
_SCORE_CHUNK = 1 << 25

# estimate-shape presets (the YAML's `options.presets`), Llama-3-8B-like heads
PRESETS: dict[str, dict[str, int]] = {
    "prefill-4k": {"B": 4, "HQ": 32, "HKV": 8, "S": 4096, "SKV": 4096, "D": 128, "CAUSAL": 1, "VARLEN": 0},
    "prefill-varlen": {"B": 8, "HQ": 32, "HKV": 8, "S": 2048, "SKV": 2048, "D": 128, "CAUSAL": 1, "VARLEN": 1},
    "chunked-prefill": {"B": 4, "HQ": 32, "HKV": 8, "S": 512, "SKV": 4096, "D": 128, "CAUSAL": 1, "VARLEN": 0},
    "decode": {"B": 64, "HQ": 32, "HKV": 8, "S": 1, "SKV": 4096, "D": 128, "CAUSAL": 1, "VARLEN": 0},
    "encoder-d64": {"B": 8, "HQ": 16, "HKV": 16, "S": 1024, "SKV": 1024, "D": 64, "CAUSAL": 0, "VARLEN": 0},
}  # fmt: skip


@dataclass(frozen=True)
class AttnDims:
    """A validated attention shape: B sequences of (at most) S queries and SKV keys."""

    b: int
    hq: int
    hkv: int
    s: int
    skv: int
    d: int
    causal: bool
    varlen: bool

    @property
    def group(self) -> int:
        """Query heads per key/value head."""
        return self.hq // self.hkv

    def visible_pairs(self) -> int:
        """(query, key) pairs of one sequence and head that the mask lets through."""
        if not self.causal:
            return self.s * self.skv
        # row i sees i + (SKV - S) + 1 keys, i = 0..S-1
        return self.s * (self.skv - self.s) + self.s * (self.s + 1) // 2


def attn_dims(shape: dict[str, int]) -> AttnDims:
    """Parse and check an attention shape dict; ConfigError names the bad key and value."""
    missing = [k for k in SHAPE_KEYS if k not in shape]
    if missing:
        raise ConfigError(
            f"attention shape {shape} lacks {missing}; an attention shape has {', '.join(SHAPE_KEYS)}"
        )
    v = {k: int(shape[k]) for k in SHAPE_KEYS}
    for key in ("B", "HQ", "HKV", "S", "SKV", "D"):
        if v[key] < 1:
            raise ConfigError(f"invalid attention {key} {v[key]}; must be >= 1")
    for key in ("CAUSAL", "VARLEN"):
        if v[key] not in (0, 1):
            raise ConfigError(choices_error(f"attention {key}", v[key], (0, 1)))
    if v["HQ"] % v["HKV"]:
        raise ConfigError(
            f"invalid attention HQ {v['HQ']} with HKV {v['HKV']}; HQ must be a multiple of HKV"
        )
    if v["CAUSAL"] and v["S"] > v["SKV"]:
        raise ConfigError(
            f"invalid causal attention S {v['S']} > SKV {v['SKV']}; bottom-right causal "
            "masking needs S <= SKV (else leading query rows see no key)"
        )
    return AttnDims(
        v["B"], v["HQ"], v["HKV"], v["S"], v["SKV"], v["D"], bool(v["CAUSAL"]), bool(v["VARLEN"])
    )


def causal_mask(s: int, skv: int, device: Any = "cpu") -> Any:
    """Bool [s, skv], True where query i may see key j: j <= i + (skv - s) (bottom-right)."""
    import torch

    i = torch.arange(s, device=device)[:, None]
    j = torch.arange(skv, device=device)[None, :]
    return j <= i + (skv - s)


def attend(q: Any, k: Any, v: Any, scale: float, causal: bool) -> tuple[Any, Any]:
    """(o, lse) in fp32 for one sequence: q [HQ, S, D], k and v [HKV, SKV, D].

    o is SDPA (math in fp32, `enable_gqa`) under an explicit bottom-right causal mask;
    lse [HQ, S] is logsumexp over keys of the scaled, masked fp32 scores, natural log.
    Query rows are processed in chunks so the score matrix stays bounded at any S.
    """
    import torch
    import torch.nn.functional as F

    hq, s, d = q.shape
    hkv, skv, _ = k.shape
    q, k, v = q.float(), k.float(), v.float()
    mask = causal_mask(s, skv, q.device) if causal else None
    rows = max(1, _SCORE_CHUNK // (hq * skv))
    outs, lses = [], []
    for r0 in range(0, s, rows):
        qc = q[:, r0 : r0 + rows]
        mc = mask[r0 : r0 + rows] if mask is not None else None
        o = F.scaled_dot_product_attention(
            qc[None], k[None], v[None], attn_mask=mc, scale=scale, enable_gqa=True
        )[0]
        # group g of consecutive query heads shares kv head g: a view, not a copy of k
        scores = qc.view(hkv, hq // hkv, -1, d) @ k[:, None].transpose(-1, -2) * scale
        scores = scores.reshape(hq, -1, skv)
        if mc is not None:
            scores = scores.masked_fill(~mc, float("-inf"))
        outs.append(o)
        lses.append(torch.logsumexp(scores, dim=-1))
    return torch.cat(outs, dim=1), torch.cat(lses, dim=1)


def varlen_lengths(dims: AttnDims, gen: Any) -> tuple[list[int], list[int]]:
    """Per-sequence (query lengths, key lengths) of a varlen shape, drawn from `gen`.

    Query lengths are uniform in [1, S] with the last one exactly S (so max_seqlen_q == S);
    each sequence has SKV - S more keys than queries (a cached prefix), at least one.
    """
    import torch

    sq = torch.randint(1, dims.s + 1, (dims.b,), generator=gen).tolist()
    sq[-1] = dims.s
    sk = [max(1, n + dims.skv - dims.s) for n in sq]
    return sq, sk


def _cumulative(lengths: list[int]) -> Any:
    import torch

    return torch.tensor([0, *lengths], dtype=torch.int64).cumsum(0).to(torch.int32)


def _normal(gen: Any, *size: int, gain: float = 1.0) -> Any:
    """Random normal fp32 times `gain`, exact zeros replaced by `gain` (never zeros)."""
    import torch

    x = torch.randn(*size, generator=gen, dtype=torch.float32) * gain
    return torch.where(x == 0, torch.full_like(x, gain), x)


class AttentionFamily(DSLKernelFamily):
    """Flash-attention forward: o = softmax(q kᵀ·scale + causal mask) v, and lse per row."""

    name = "attention"
    dtypes = tuple(TOLERANCES)
    shape_dims = tuple((k, 0 if k in ("CAUSAL", "VARLEN") else 1) for k in SHAPE_KEYS)
    entry = "attention"
    outputs: tuple[str, ...] = ("o", "lse")

    def make_inputs(
        self, shape: dict[str, int], dtype: str, seed: int, device: str
    ) -> dict[str, Any]:
        """Random q, k, v (never zeros), uninitialized o and lse, and the scalars.

        Dense: q [B, HQ, S, D], k and v [B, HKV, SKV, D], o like q, lse [B, HQ, S] fp32.
        Varlen (VARLEN=1): the B sequences are packed along the sequence axis of a batch of
        one, q [1, HQ, total_q, D], k and v [1, HKV, total_k, D], with `cu_seqlens_q`,
        `cu_seqlens_k` (int32 [B + 1], cumulative lengths from 0) and `max_seqlen_q` (== S).
        Scalars: `scale` = 1/sqrt(D), `qk_scale` = log2(e)/sqrt(D) and `causal` (0/1, CAUSAL). Drawn on the CPU from `seed`, then moved to `device`.
        """
        import torch

        dims = attn_dims(shape)
        tdt = torch_dtype(self._check_dtype(dtype))
        gen = torch.Generator(device="cpu").manual_seed(int(seed))
        extra: dict[str, Any] = {}
        if dims.varlen:
            sq, sk = varlen_lengths(dims, gen)
            batch, nq, nk = 1, sum(sq), sum(sk)
            extra = {
                "cu_seqlens_q": _cumulative(sq).to(device),
                "cu_seqlens_k": _cumulative(sk).to(device),
                "max_seqlen_q": dims.s,
            }
        else:
            batch, nq, nk = dims.b, dims.s, dims.skv
        q = _normal(gen, batch, dims.hq, nq, dims.d, gain=Q_GAIN).to(tdt)
        k = _normal(gen, batch, dims.hkv, nk, dims.d).to(tdt)
        v = _normal(gen, batch, dims.hkv, nk, dims.d).to(tdt)
        return {
            "q": q.to(device),
            "k": k.to(device),
            "v": v.to(device),
            "o": torch.empty_like(q, device=device),
            "lse": torch.empty(batch, dims.hq, nq, dtype=torch.float32, device=device),
            "scale": 1.0 / math.sqrt(dims.d),
            # the same scale times log2(e), for kernels whose softmax runs in base 2: one
            # multiply per score (a kernel takes whichever of the two it declares)
            "qk_scale": LOG2E / math.sqrt(dims.d),
            "causal": int(dims.causal),
            **extra,
        }

    def reference(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """o (in o's dtype) and lse (fp32) per `attend`, sequence by sequence.

        Reads the mask mode from `inputs["causal"]` and, when present, the packing from
        `cu_seqlens_q` / `cu_seqlens_k` (varlen); everything else from the tensors.
        """
        import torch

        q, k, v, scale = inputs["q"], inputs["k"], inputs["v"], float(inputs["scale"])
        causal = bool(inputs["causal"])
        o = torch.empty(q.shape, dtype=torch.float32, device=q.device)
        lse = torch.empty(q.shape[:-1], dtype=torch.float32, device=q.device)
        if "cu_seqlens_q" in inputs:
            cq = inputs["cu_seqlens_q"].tolist()
            ck = inputs["cu_seqlens_k"].tolist()
            for i in range(len(cq) - 1):
                (q0, q1), (k0, k1) = (cq[i], cq[i + 1]), (ck[i], ck[i + 1])
                o[0, :, q0:q1], lse[0, :, q0:q1] = attend(
                    q[0, :, q0:q1], k[0, :, k0:k1], v[0, :, k0:k1], scale, causal
                )
        else:
            for b in range(q.shape[0]):
                o[b], lse[b] = attend(q[b], k[b], v[b], scale, causal)
        return {"o": o.to(inputs["o"].dtype), "lse": lse}

    def reference_specs(self, entry: str) -> list[tuple[dict[str, int], Any]]:
        """The data-flow spec of `attention` per mask mode, derived from the reference's
        graph (`attend` without its chunking: SDPA with GQA under the bottom-right causal
        mask, and the logsumexp of the masked scores), captured on meta tensors."""
        if entry != "attention":
            return []
        return [({"causal": 0}, _spec(False)), ({"causal": 1}, _spec(True))]

    def explicit_spec(self, kernel: Any, consts: dict[str, int]) -> Any:
        """The reference's spec (its mask mode the kernel's) over the explicit kernels'
        2-D views (q/k/v/o [B * H(KV) * S, D], lse [B * H * S]); the launch facts the
        kernels rely on: S a multiple of BM (a query block stays in its head), the grid's
        query blocks (pid < S / BM) and heads (pid_y < B * H), whole groups of query heads
        (H % HKV == 0), and, causal, S == SKV (`kernel_explicit`'s docstring)."""
        from argus_core.ir import Sym
        from argus_core.spec.explicit import ExplicitSpec, over_views
        from argus_plugins.dsl.explicit.lang import pid, pid_y

        causal = bool(kernel.meta.get("causal"))
        B, H, HKV, S, SKV = (Sym(n, "shape", 1) for n in ("B", "H", "HKV", "S", "SKV"))
        BM = Sym("BM", "const", 1)
        d = int(consts.get("D", kernel.consts.get("D", 0)))
        dims = {"q_0": B, "q_1": H, "q_2": S, "q_3": d}
        for t in ("k", "v"):
            dims |= {f"{t}_0": B, f"{t}_1": HKV, f"{t}_2": SKV, f"{t}_3": d}
        views = {"q": "2d", "k": "2d", "v": "2d", "o": "2d", "lse": "1d"}
        assume = [(S % BM).eq(0), pid < S // BM, pid_y < B * H, (H % HKV).eq(0)]
        if causal:
            assume.append(SKV.eq(S))
        return ExplicitSpec(
            over_views(_spec(causal), views),
            dims,
            views,
            tuple(assume),
            source=f"attention reference ({'causal' if causal else 'full'} mask)",
        )

    def baselines(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """SDPA's flash and cuDNN backends on these inputs (dense layouts only). Causal with
        S != SKV has no SDPA equivalent (SDPA aligns top-left): no baseline then."""
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel

        if "cu_seqlens_q" in inputs:
            return {}
        q, k, v, scale = inputs["q"], inputs["k"], inputs["v"], float(inputs["scale"])
        causal = bool(inputs["causal"])
        if causal and q.shape[2] != k.shape[2]:
            return {}
        group = q.shape[1] // k.shape[1]
        # cuDNN takes no grouped heads: expand K and V once, outside the timed call
        ke, ve = (
            (k, v) if group == 1 else (k.repeat_interleave(group, 1), v.repeat_interleave(group, 1))
        )

        def sdpa(backend: Any, kk: Any, vv: Any, gqa: bool) -> Any:
            def call() -> Any:
                with sdpa_kernel([backend]):
                    return F.scaled_dot_product_attention(
                        q, kk, vv, is_causal=causal, scale=scale, enable_gqa=gqa
                    )

            return call

        return {
            "SDPA flash": sdpa(SDPBackend.FLASH_ATTENTION, k, v, group > 1),
            "SDPA cuDNN": sdpa(SDPBackend.CUDNN_ATTENTION, ke, ve, False),
        }

    def tile_extents(self, shape: dict[str, int]) -> dict[str, int]:
        """BM cuts the queries (S), BN the keys (SKV); HEAD_D is the config's (>= D)."""
        dims = attn_dims(shape)
        return {"BM": dims.s, "BN": dims.skv}

    def pipelined_smem(self, tiles: dict[str, int], stages: int, elem_bytes: int) -> int | None:
        """The Q tile once, K and V tiles per stage: (BM + 2·BN·stages)·HEAD_D elements
        (what Triton 3.6 allocated on the H200: 294912 bytes at BM=BN=128, 4 stages)."""
        if not all(k in tiles for k in ("BM", "BN", "HEAD_D")):
            return None
        return (tiles["BM"] + 2 * tiles["BN"] * stages) * tiles["HEAD_D"] * elem_bytes

    def flops(self, shape: dict[str, int]) -> float:
        """4·D per visible (query, key) pair per head: Q·Kᵀ and P·V, 2 flops per MAC.

        Non-causal: 4·B·HQ·S·SKV·D. Causal counts exactly the pairs the bottom-right mask
        keeps (about half when S == SKV). Varlen: every sequence at its maximum length, an
        upper bound.
        """
        dims = attn_dims(shape)
        return 4.0 * dims.b * dims.hq * dims.visible_pairs() * dims.d

    def bytes(self, shape: dict[str, int], dtype: str) -> float:
        """q, k, v read once, o written once (all in `dtype`), lse written once (fp32).

        Varlen adds the two int32 cumulative-length arrays and counts every sequence at its
        maximum length (an upper bound, like `flops`).
        """
        dims = attn_dims(shape)
        e = element_bytes(dtype)
        qo = 2 * dims.b * dims.hq * dims.s * dims.d
        kv = 2 * dims.b * dims.hkv * dims.skv * dims.d
        lse = dims.b * dims.hq * dims.s * 4
        cu = 2 * (dims.b + 1) * 4 if dims.varlen else 0
        return float((qo + kv) * e + lse + cu)

    def tensor_dtypes(self, dtype: str) -> dict[str, str]:
        """Element dtypes that do not follow the run's dtype: the log-sum-exp is fp32."""
        return {"lse": "fp32"}

    def tolerance(self, dtype: str) -> tuple[float, float]:
        return TOLERANCES[self._check_dtype(dtype)]

    @staticmethod
    def _check_dtype(dtype: str) -> str:
        if dtype not in TOLERANCES:
            raise ConfigError(choices_error("attention dtype", dtype, TOLERANCES))
        return dtype

    # ------------------------------------------------------------------ the explicit level
    def explicit_kernel(self, policy: Any, target: str, shape: dict[str, int]) -> Any:
        """The explicit-level kernel (`kernel_explicit.py`) of a `level: explicit` policy."""
        return kernel_explicit.for_policy(
            explicit_knobs(policy), dict(policy.tiles), target, dict(shape)
        )

    def explicit_launcher(self, kernel: Any, lowered: Any) -> Any:
        """Runs the lowered explicit kernel on this family's GPU inputs."""
        return kernel_explicit.launcher(kernel, lowered.source)


@functools.cache
def _spec(causal: bool) -> Any:
    import torch
    import torch.nn.functional as F

    from argus_core.spec import spec_of_module

    class Attend(torch.nn.Module):  # `attend`, whole: o and lse of one launch
        def forward(self, q, k, v):
            s, skv = q.size(2), k.size(2)
            mask = torch.ones((s, skv), dtype=torch.bool, device=q.device)
            if causal:
                mask = mask.tril(diagonal=skv - s)  # bottom-right aligned (`causal_mask`)
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
            kk = k.repeat_interleave(q.size(1) // k.size(1), dim=1)
            scores = (q @ kk.transpose(-1, -2)).masked_fill(~mask, float("-inf"))
            return o, torch.logsumexp(scores, dim=-1)

    shapes = [(2, 4, 16, 8), (2, 2, 24, 8), (2, 2, 24, 8)]
    return spec_of_module(
        Attend,
        lambda: [torch.randn(*s) for s in shapes],
        ["q", "k", "v"],
        ["o", "lse"],
        name="attention",
    )
