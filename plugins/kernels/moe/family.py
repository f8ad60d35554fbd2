"""The fused Mixture-of-Experts family's reference side: inputs, reference, FLOPs, bytes.

out[t] = Σ_s w[t, s] · W2[e] (silu(W1_gate[e] x[t]) ⊙ W1_up[e] x[t]),  e = ids[t, s],
with (ids, w) = `routing.route(router_logits, TOPK, RENORM)`. Expert weights are
w1 [E, 2I, H] (the I gate rows first, then the I up rows) and w2 [E, H, I]. The DSL
kernels live beside this file in `kernel.py`; `source()` returns their text.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from argus_core.errors import ConfigError, choices_error
from argus_core.evaluate.dtypes import element_bytes, torch_dtype
from argus_core.family import DSLKernelFamily
from argus_plugins.kernels.moe.routing import padded_capacity, route

# (atol, rtol) per dtype. Inputs are scaled so that every expert's output has unit variance
# (see make_inputs) and out, a weighted sum of topk of them, is O(1). A correct kernel
# rounds the intermediate silu(gate)·up and each slot's result to the input dtype; that
# stays under 0.4 of the tolerance, while a weight from the wrong slot, a token scattered to
# the wrong row or a padding row written out moves elements by 10x to 500x the tolerance
# (tests/plugins/kernels/test_moe_family.py simulates each).
TOLERANCES: dict[str, tuple[float, float]] = {
    "bf16": (2e-2, 2e-2),
    "fp16": (5e-3, 5e-3),
}

SHAPE_KEYS: tuple[str, ...] = ("T", "E", "TOPK", "H", "I", "RENORM")

# 1 / sqrt(E[silu(g)^2]) for g ~ N(0, 1): makes silu(gate)·up · w2 unit-variance
_W2_GAIN = 1.0 / math.sqrt(0.3557)

# published shapes (hidden H, expert intermediate I); RENORM as each model's router does
MODELS: dict[str, dict[str, int]] = {
    "mixtral": {"E": 8, "TOPK": 2, "H": 4096, "I": 14336, "RENORM": 1},  # Mixtral 8x7B
    "deepseek-v2-lite": {"E": 64, "TOPK": 6, "H": 2048, "I": 1408, "RENORM": 0},
    "qwen3-30b-a3b": {"E": 128, "TOPK": 8, "H": 2048, "I": 768, "RENORM": 1},
}
TOKENS: dict[str, int] = {"decode1": 1, "decode16": 16, "decode64": 64, "prefill": 4096}

# "<model>-<phase>" -> shape, e.g. "mixtral-prefill", "qwen3-30b-a3b-decode16"
PRESETS: dict[str, dict[str, int]] = {
    f"{model}-{phase}": {"T": t, **dims} for model, dims in MODELS.items() for phase, t in TOKENS.items()
}  # fmt: skip

# interpreter-sized shapes (the YAML draft's check_shapes)
CHECK_SHAPES: list[dict[str, int]] = [
    {"T": 37, "E": 8, "TOPK": 2, "H": 64, "I": 96, "RENORM": 1},
    {"T": 5, "E": 16, "TOPK": 4, "H": 32, "I": 48, "RENORM": 0},
    {"T": 3, "E": 64, "TOPK": 6, "H": 32, "I": 48, "RENORM": 1},  # decode: one slot per block
]


def moe_dims(shape: dict[str, int]) -> dict[str, int]:
    """The shape's T, E, TOPK, H, I, RENORM as ints, checked; ConfigError names the bad one."""
    missing = [k for k in SHAPE_KEYS if k not in shape]
    if missing:
        raise ConfigError(
            f"moe shape {shape} lacks {missing}; a moe shape has {', '.join(SHAPE_KEYS)}"
        )
    d = {k: int(shape[k]) for k in SHAPE_KEYS}
    for key in ("T", "E", "TOPK", "H", "I"):
        if d[key] < 1:
            raise ConfigError(f"invalid moe {key} {d[key]}; must be >= 1")
    if d["TOPK"] > d["E"]:
        raise ConfigError(f"invalid moe TOPK {d['TOPK']}; must be <= E ({d['E']})")
    if d["RENORM"] not in (0, 1):
        raise ConfigError(choices_error("moe RENORM", d["RENORM"], (0, 1)))
    return d


def experts_hit(tokens: int, num_experts: int, topk: int) -> float:
    """Expected number of distinct experts that `tokens` tokens route to, each choosing `topk`
    distinct experts uniformly: E·(1 - (1 - topk/E)^T), which is <= min(E, T·topk)."""
    return num_experts * (1.0 - (1.0 - topk / num_experts) ** tokens)


@functools.lru_cache(maxsize=4096)
def expected_blocks(tokens: int, p: float, block_m: int) -> float:
    """E[ceil(c / block_m)] for an expert's slot count c ~ Binomial(tokens, p): the blocks
    of `block_m` rows the alignment gives one expert, on average. Summed over the counts
    within 12 standard deviations of the mean (the rest weigh under 1e-30); cached, as the
    cost model asks it once per policy it estimates."""
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return float(-(-tokens // block_m))
    mean, sd = tokens * p, math.sqrt(tokens * p * (1.0 - p))
    lo, hi = max(1, int(mean - 12 * sd)), min(tokens, int(math.ceil(mean + 12 * sd)))
    total, log_p, log_q = 0.0, math.log(p), math.log1p(-p)
    for c in range(lo, hi + 1):
        log_pmf = math.lgamma(tokens + 1) - math.lgamma(c + 1) - math.lgamma(tokens - c + 1)
        total += math.exp(log_pmf + c * log_p + (tokens - c) * log_q) * -(-c // block_m)
    return total


class MoEFamily(DSLKernelFamily):
    """Fused MoE: softmax top-k routing, SiLU-gated expert MLPs, weighted combine per token."""

    name = "moe"
    dtypes = tuple(TOLERANCES)
    shape_dims = tuple((k, 0 if k == "RENORM" else 1) for k in SHAPE_KEYS)
    entry = "moe"
    outputs: tuple[str, ...] = ("out",)
    # the DSL kernels of `kernel.py`, in the order `program` launches them
    entries: tuple[str, ...] = ("moe_route", "moe_align", "moe_up", "moe_down", "moe_combine")
    # a layer is ~20 launches (routing, alignment, gather, two GEMMs, combine): decode, a
    # few ms of host launches around well under that of GPU work, is served under CUDA
    # graphs (as serving engines run it); kernel and baselines are timed so below this
    # (`timing.bench`; prefill, GPU-bound at 5+ ms, stays plain)
    graph_replay_below_ms = 4.0

    def make_inputs(
        self, shape: dict[str, int], dtype: str, seed: int, device: str
    ) -> dict[str, Any]:
        """x [T, H], w1 [E, 2I, H], w2 [E, H, I] in `dtype`; router_logits [T, E] fp32; out
        [T, H] uninitialized; the ints `topk` (TOPK) and `renorm` (RENORM).

        Random normal, drawn on the CPU from `seed` (the same numbers on every device), exact
        zeros replaced (never zeros). w1 is scaled by 1/sqrt(H) so gate and up are unit
        normal; w2 by 1/sqrt(I · E[silu²]) so every expert's output has unit variance.
        Weights are drawn one expert at a time, so fp32 staging never holds more than one.
        """
        import torch

        d = moe_dims(shape)
        tdt = torch_dtype(self._check_dtype(dtype))
        t, e, h, i = d["T"], d["E"], d["H"], d["I"]
        gen = torch.Generator(device="cpu").manual_seed(int(seed))

        def normal(*size: int, gain: float = 1.0, dt: Any = tdt) -> Any:
            x = torch.randn(*size, generator=gen, dtype=torch.float32) * gain
            return torch.where(x == 0, torch.full_like(x, gain), x).to(dt).to(device)

        x = normal(t, h)
        logits = normal(t, e, dt=torch.float32)
        w1 = torch.empty(e, 2 * i, h, dtype=tdt, device=device)
        w2 = torch.empty(e, h, i, dtype=tdt, device=device)
        for ex in range(e):
            w1[ex] = normal(2 * i, h, gain=1.0 / math.sqrt(h))
            w2[ex] = normal(h, i, gain=_W2_GAIN / math.sqrt(i))
        return {
            "x": x,
            "router_logits": logits,
            "w1": w1,
            "w2": w2,
            "out": torch.empty(t, h, dtype=tdt, device=device),
            "topk": d["TOPK"],
            "renorm": d["RENORM"],
        }

    def reference(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """The plain per-expert loop in fp32, cast to out's dtype at the end.

        Route (`routing.route`), then for each expert: gather its (token, slot) pairs,
        silu(x @ gate.T) * (x @ up.T) @ w2[e].T, times each pair's routing weight, added to
        its token's row.
        """
        import torch
        import torch.nn.functional as F

        x, w1, w2 = inputs["x"], inputs["w1"], inputs["w2"]
        inter = w2.shape[-1]
        ids, weights = route(inputs["router_logits"], int(inputs["topk"]), bool(inputs["renorm"]))
        out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
        for e in range(w1.shape[0]):
            token, slot = (ids == e).nonzero(as_tuple=True)
            if token.numel() == 0:
                continue
            xe = x[token].float()
            gate, up = w1[e, :inter].float(), w1[e, inter:].float()
            y = (F.silu(xe @ gate.T) * (xe @ up.T)) @ w2[e].float().T
            out.index_add_(0, token, y * weights[token, slot][:, None])
        return {"out": out.to(inputs["out"].dtype)}

    def baselines(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """PyTorch in the inputs' dtype: the per-expert loop, and (where this torch has it)
        `torch._grouped_mm` over tokens sorted by expert, routing included in both."""
        import torch

        out = {"torch per-expert loop": lambda: self._torch_loop(inputs)}
        if hasattr(torch, "_grouped_mm"):
            out["torch._grouped_mm"] = lambda: self._torch_grouped(inputs)
        return out

    @staticmethod
    def _torch_loop(inputs: dict[str, Any]) -> Any:
        import torch
        import torch.nn.functional as F

        x, w1, w2 = inputs["x"], inputs["w1"], inputs["w2"]
        inter = w2.shape[-1]
        ids, weights = route(inputs["router_logits"], int(inputs["topk"]), bool(inputs["renorm"]))
        out = torch.zeros_like(x)
        for e in range(w1.shape[0]):
            token, slot = (ids == e).nonzero(as_tuple=True)
            if token.numel() == 0:
                continue
            xe = x[token]
            y = (F.silu(xe @ w1[e, :inter].T) * (xe @ w1[e, inter:].T)) @ w2[e].T
            out.index_add_(0, token, y * weights[token, slot][:, None].to(x.dtype))
        return out

    @staticmethod
    def _torch_grouped(inputs: dict[str, Any]) -> Any:
        import torch
        import torch.nn.functional as F

        x, w1, w2 = inputs["x"], inputs["w1"], inputs["w2"]
        e_count, inter = w1.shape[0], w2.shape[-1]
        ids, weights = route(inputs["router_logits"], int(inputs["topk"]), bool(inputs["renorm"]))
        flat = ids.flatten()
        order = torch.argsort(flat, stable=True)
        counts = torch.bincount(flat, minlength=e_count)
        offs = torch.cumsum(counts, 0).to(torch.int32)
        xs = x[order // ids.shape[1]]
        h = torch._grouped_mm(xs, w1.transpose(1, 2), offs=offs)
        act = F.silu(h[:, :inter]) * h[:, inter:]
        y = torch._grouped_mm(act, w2.transpose(1, 2), offs=offs)
        y = y * weights.flatten()[order][:, None].to(y.dtype)
        out = torch.zeros_like(x)
        out.index_add_(0, order // ids.shape[1], y)
        return out

    def tile_extents(self, shape: dict[str, int]) -> dict[str, int]:
        """BM cuts one expert's routed slots (uniform routing), BN the up projection's 2I
        columns, BK the smaller reduction (H up, I down)."""
        d = moe_dims(shape)
        hit = max(1.0, experts_hit(d["T"], d["E"], d["TOPK"]))
        slots = int(math.ceil(d["T"] * d["TOPK"] / hit))
        return {"BM": slots, "BN": 2 * d["I"], "BK": min(d["H"], d["I"])}

    def gemm_problems(self, shape: dict[str, int], tiles: dict[str, int]) -> list[dict[str, int]]:
        """The grouped GEMMs as the cost model sees them: rows = the routed slots, padded to
        whole BM blocks per expert, times (2I x H) then (H x I). The blocks are their
        expectation under uniform routing, where an expert's slot count is binomial
        (T tokens, each picking it with probability TOPK/E), not the blocks of the mean
        count: at T64 on 8 experts (16 slots each on average, 11-20 measured) most experts
        need two 16-row blocks, and each block streams its expert's weights again."""
        d = moe_dims(shape)
        bm = int(tiles.get("BM", 64))
        rows = int(round(d["E"] * expected_blocks(d["T"], d["TOPK"] / d["E"], bm))) * bm
        return [
            {"M": rows, "N": 2 * d["I"], "K": d["H"], "GROUPED": 1},
            {"M": rows, "N": d["H"], "K": d["I"], "GROUPED": 1},
        ]

    def flops(self, shape: dict[str, int]) -> float:
        """Matmul flops of the routed slots: 2·T·TOPK·(H·2I + I·H).

        Routing softmax, SiLU·up and the weighted combine add O(T·(E + TOPK·(I + H))),
        under 0.1% at every preset, and are left out.
        """
        d = moe_dims(shape)
        return 2.0 * d["T"] * d["TOPK"] * (d["H"] * 2 * d["I"] + d["I"] * d["H"])

    def bytes(self, shape: dict[str, int], dtype: str) -> float:
        """Weights of the experts hit, read once, plus x read, out written, logits read.

        Experts hit: the expectation under uniform routing, `experts_hit` (2 of 8 for one
        Mixtral token, all of them at prefill). Decode is weight-streaming-bound: at T <= 64
        the expert weights are > 99% of the bytes and a kernel's speed is how fast it streams
        them. Routing metadata (ids, weights, sorted ids) is a few KiB and left out; a fused
        kernel need not write the [T·TOPK, I] intermediate, so it is not counted.
        """
        d = moe_dims(shape)
        e = element_bytes(dtype)
        weights = experts_hit(d["T"], d["E"], d["TOPK"]) * 3 * d["H"] * d["I"] * e
        activations = 2 * d["T"] * d["H"] * e + d["T"] * d["E"] * 4
        return float(weights + activations)

    def tensor_dtypes(self, dtype: str) -> dict[str, str]:
        """Element dtypes that do not follow the run's dtype: routing in fp32, indices int32,
        per-slot partial outputs in fp32 (summed over a token's slots before rounding)."""
        return {
            "logits": "fp32", "wts": "fp32", "y": "fp32",
            "ids": "i32", "sorted_ids": "i32", "block_expert": "i32",
        }  # fmt: skip

    def program(self, launch: Any, inputs: dict[str, Any], tiles: dict[str, int]) -> None:
        """Run the five kernels on `inputs`. Intermediates are allocated here, uninitialized
        (every element a kernel reads was written by an earlier kernel); reshapes are views.
        No arithmetic happens outside the kernels."""
        import torch

        x, w1, out = inputs["x"], inputs["w1"], inputs["out"]
        t, h = x.shape
        e, i = w1.shape[0], w1.shape[1] // 2
        k = int(inputs["topk"])
        slots, dev = t * k, x.device
        cap = padded_capacity(slots, e, int(tiles["BM"]))
        ids = torch.empty(t, k, dtype=torch.int32, device=dev)
        wts = torch.empty(t, k, dtype=torch.float32, device=dev)
        launch(
            "moe_route",
            {
                "logits": inputs["router_logits"],
                "ids": ids,
                "wts": wts,
                "renorm": int(inputs["renorm"]),
            },
        )
        sorted_ids = torch.empty(cap, dtype=torch.int32, device=dev)
        block_expert = torch.empty(cap // int(tiles["BM"]), dtype=torch.int32, device=dev)
        launch(
            "moe_align",
            {
                "ids": ids.view(slots),
                "sorted_ids": sorted_ids,
                "block_expert": block_expert,
                "num_experts": e,
            },
        )
        h1 = torch.empty(slots, i, dtype=x.dtype, device=dev)
        launch(
            "moe_up",
            {
                "x": x,
                "w1": w1.view(e, 2, i, h),
                "sorted_ids": sorted_ids,
                "block_expert": block_expert,
                "h1": h1,
                "topk": k,
            },
        )
        y = torch.empty(slots, h, dtype=torch.float32, device=dev)
        launch(
            "moe_down",
            {
                "h1": h1,
                "w2": inputs["w2"],
                "sorted_ids": sorted_ids,
                "block_expert": block_expert,
                "wts": wts.view(slots),
                "y": y,
            },
        )
        launch("moe_combine", {"y": y.view(t, k, h).permute(1, 0, 2), "out": out})

    def reference_specs(self, entry: str) -> list[tuple[dict[str, int], Any]]:
        """Issue #19: each kernel's stage of the reference as a data-flow spec (`spec.py`;
        reads through the routing ids); none for `moe_align` (it computes indices)."""
        from argus_plugins.kernels.moe.spec import reference_specs

        return reference_specs(entry)

    def explicit_spec(self, kernel: Any, consts: dict[str, int]) -> Any:
        """The grouped GEMM's stage of the reference (`spec.grouped_spec`) at the kernel's
        BM, gated where the kernel fuses SiLU: expert weights [E, (2,) N, K] viewed as
        [E * (2 *) N, K]; the launch's fact: M (the padded rows) a multiple of BM."""
        from argus_core.ir import Sym
        from argus_core.spec.explicit import ExplicitSpec, over_views
        from argus_plugins.kernels.moe.spec import grouped_spec

        bm = int(consts.get("BM", kernel.consts["BM"]))
        fused = bool(kernel.meta.get("fused"))
        M, N, K = (Sym(n, "shape", 1) for n in ("M", "N", "K"))
        E, NB = Sym("E", "shape", 1), Sym("NB", "shape", 1)
        dims = {"M": M, "N": N, "K": K, "E": E, "TWO": 2, "NB": NB}
        views = {"w": "2d"}
        return ExplicitSpec(
            over_views(grouped_spec(bm, fused), views),
            dims,
            views,
            ((M % bm).eq(0),),
            source=f"MoE grouped GEMM stage{' (gate/up, SiLU)' if fused else ''}",
        )

    def tolerance(self, dtype: str) -> tuple[float, float]:
        return TOLERANCES[self._check_dtype(dtype)]

    # ------------------------------------------------------------------ the explicit level
    def explicit_kernel(self, policy: Any, target: str, shape: dict[str, int]) -> Any:
        """The explicit-level grouped GEMM (`kernel_explicit.py`) of a `level: explicit` policy."""
        from argus_core.ir.explicit import explicit_knobs
        from argus_plugins.kernels.moe import kernel_explicit

        return kernel_explicit.for_policy(explicit_knobs(policy), dict(policy.tiles), target)

    def explicit_launcher(self, kernel: Any, lowered: Any) -> Any:
        """The MoE layer on this family's GPU inputs around the lowered grouped GEMM."""
        from argus_plugins.kernels.moe import kernel_explicit

        return kernel_explicit.launcher(kernel, lowered.source)

    @staticmethod
    def _check_dtype(dtype: str) -> str:
        if dtype not in TOLERANCES:
            raise ConfigError(choices_error("moe dtype", dtype, TOLERANCES))
        return dtype
