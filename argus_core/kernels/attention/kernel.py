"""Flash attention (forward) in the Argus tile DSL.

One program computes BM query rows of one (batch, query head): it streams the keys and
values of that head's KV head in blocks of BN, keeping a running row max `m_i` and row sum
`l_i` (online softmax, base 2 with the scale folded in), and writes the output rows and
their log-sum-exp (natural log) once. Grouped-query attention: query head h reads KV head
h // (HQ // HKV). Causal (`causal != 0`) is bottom-right aligned: query row i sees key j
only when j <= i + (SKV - S) (the last query sees every key; needs S <= SKV), and key blocks
wholly after the query block's last visible key are never visited.
"""

from argus_plugins.dsl.tile import lang as al

LOG2E = 1.4426950408889634  # exp(x) == exp2(x * log2(e))
LN2 = 0.6931471805599453


@al.kernel
def attention(q: al.Tensor["B", "HQ", "S", "D"], k: al.Tensor["B", "HKV", "SKV", "D"],
              v: al.Tensor["B", "HKV", "SKV", "D"], o: al.Tensor["B", "HQ", "S", "D"],
              lse: al.Tensor["B", "HQ", "S"], scale: al.f32, causal: al.i32,
              BM: al.constexpr, BN: al.constexpr, HEAD_D: al.constexpr):
    pm, b, h = al.program_ids((al.cdiv(q.shape[2], BM), q.shape[0], q.shape[1]))
    hk = h // (q.shape[1] // k.shape[1])  # the KV head this query head reads (GQA)
    qt = al.load(q[b, h].tile(BM, HEAD_D)[pm, 0])
    m_i = al.full((BM,), float("-inf"), al.f32)
    l_i = al.zeros((BM,), al.f32)
    acc = al.zeros((BM, HEAD_D), al.f32)
    n_blocks = al.cdiv(k.shape[2], BN)
    shift = k.shape[2] - q.shape[2]  # bottom-right causal alignment: row i sees keys <= i + shift
    # causal: stop after the key block holding the block's last visible key
    stop = n_blocks + causal * (al.minimum(n_blocks, al.cdiv((pm + 1) * BM + shift, BN)) - n_blocks)
    for n in al.range(stop):
        kt = al.load(al.permute(k[b, hk].tile(BN, HEAD_D)[n, 0], (1, 0)))  # K^T block
        vt = al.load(v[b, hk].tile(BN, HEAD_D)[n, 0])
        s = al.dot(qt, kt) * scale * LOG2E
        i, j = al.indices((BM, BN))
        key = n * BN + j
        visible = (key < k.shape[2]) & (causal.eq(0) | (pm * BM + i + shift >= key))
        s = al.where(visible, s, float("-inf"))
        m_new = al.maximum(m_i, al.max(s, 1))
        p = al.exp2(s - m_new[:, None])
        alpha = al.exp2(m_i - m_new)
        l_i = l_i * alpha + al.sum(p, 1)
        acc = acc * alpha[:, None] + al.dot(p.to(v.dtype), vt)
        m_i = m_new
    al.store(o[b, h].tile(BM, HEAD_D)[pm, 0], (acc / l_i[:, None]).to(o.dtype))
    al.store(lse[b, h].tile(BM)[pm], (m_i + al.log2(l_i)) * LN2)
