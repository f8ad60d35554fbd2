"""LLM-style GQA attention (non-causal), no tags: the value tile is loaded from k, not v
(V read from the k tensor: same shape, in bounds)."""
# spec: attention

# ruff: noqa: F821
from argus_plugins.dsl.tile import lang as al


@al.kernel
def attention(
    q: al.Tensor["B", "HQ", "S", "D"],
    k: al.Tensor["B", "HKV", "SKV", "D"],
    v: al.Tensor["B", "HKV", "SKV", "D"],
    o: al.Tensor["B", "HQ", "S", "D"],
    qk_scale: al.f32,
    BM: al.constexpr,
    BN: al.constexpr,
    HEAD_D: al.constexpr,
):
    pm, b, h = al.program_ids((al.cdiv(q.shape[2], BM), q.shape[0], q.shape[1]))
    al.requires((q.shape[1] % k.shape[1]).eq(0))
    al.requires(q.shape[3] <= HEAD_D)
    hk = h // (q.shape[1] // k.shape[1])
    qt = al.load(q[b, h].tile(BM, HEAD_D)[pm, 0])
    m_i = al.full((BM,), float("-inf"), al.f32)
    l_i = al.zeros((BM,), al.f32)
    acc = al.zeros((BM, HEAD_D), al.f32)
    for n in al.range(al.cdiv(k.shape[2], BN)):
        kt = al.load(al.permute(k[b, hk].tile(BN, HEAD_D)[n, 0], (1, 0)))
        vt = al.load(k[b, hk].tile(BN, HEAD_D)[n, 0])  # <- synth
        i, j = al.indices((BM, BN))
        s = al.where(n * BN + j < k.shape[2], al.dot(qt, kt) * qk_scale, float("-inf"))
        m_new = al.maximum(m_i, al.max(s, 1))
        p = al.exp2(s - m_new[:, None])
        alpha = al.exp2(m_i - m_new)
        l_i = l_i * alpha + al.sum(p, 1)
        acc = acc * alpha[:, None] + al.dot(p.to(v.dtype), vt)
        m_i = m_new
    al.store(o[b, h].tile(BM, HEAD_D)[pm, 0], (acc / l_i[:, None]).to(o.dtype))
