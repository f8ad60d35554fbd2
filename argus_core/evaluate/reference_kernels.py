"""Hand-written lowered kernels: what the DSL's Triton lowering produces for known families.

They let backends and the evaluator be tested without the DSL, and give the lowering a
target to compare itself against. Tests derive planted-bug variants by editing `source`.
"""

from __future__ import annotations

from argus_core.types import LoweredKernel, Param

GEMM_SOURCE = """\
import triton
import triton.language as tl


@triton.jit
def gemm(a, b, c, M, K, N, a_stride0, a_stride1, b_stride0, b_stride1, c_stride0, c_stride1,
         BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr):
    # grouped ordering: GROUP rows of tiles run together so their B panels stay in L2
    pid = tl.program_id(0)
    num_pm = tl.cdiv(M, BM)
    num_pn = tl.cdiv(N, BN)
    width = GROUP * num_pn
    first_pm = (pid // width) * GROUP
    group_rows = tl.minimum(num_pm - first_pm, GROUP)
    pm = first_pm + (pid % width) % group_rows
    pn = (pid % width) // group_rows
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + rk
        x = tl.load(a + rm[:, None] * a_stride0 + kk[None, :] * a_stride1,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        y = tl.load(b + kk[:, None] * b_stride0 + rn[None, :] * b_stride1,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(x{UPCAST}, y{UPCAST}, acc)
    tl.store(c + rm[:, None] * c_stride0 + rn[None, :] * c_stride1, acc.to(c.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))
"""


def gemm_params(dtype: str) -> list[Param]:
    """The GEMM's parameters and bindings, in the order the lowering emits them."""
    params = [Param(t, "ptr", ("tensor", t), dtype) for t in ("a", "b", "c")]
    params += [
        Param("M", "int", ("shape", "a", 0), "i32"),
        Param("K", "int", ("shape", "a", 1), "i32"),
        Param("N", "int", ("shape", "b", 1), "i32"),
    ]
    params += [
        Param(f"{t}_stride{d}", "int", ("stride", t, d), "i32")
        for t in ("a", "b", "c")
        for d in (0, 1)
    ]
    params += [Param(k, "constexpr", ("const", k)) for k in ("BM", "BN", "BK", "GROUP")]
    return params


def gemm_lowered(
    tiles: dict[str, int] | None = None, dtype: str = "bf16", dot_upcast_fp32: bool = False
) -> LoweredKernel:
    """The GEMM as the Triton lowering emits it; `dot_upcast_fp32` as the interpreter needs."""
    source = GEMM_SOURCE.replace("{UPCAST}", ".to(tl.float32)" if dot_upcast_fp32 else "")
    return LoweredKernel(
        name="gemm",
        source=source,
        params=gemm_params(dtype),
        grid="(triton.cdiv(M, BM) * triton.cdiv(N, BN),)",
        outputs=["c"],
        constexprs=dict(tiles or {"BM": 64, "BN": 64, "BK": 32, "GROUP": 8}),
    )
