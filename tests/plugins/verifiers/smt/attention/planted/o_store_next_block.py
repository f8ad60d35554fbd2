"""Planted bug (o_store_next_block): the output tile is stored one query block down (pm + 1)."""

# ruff: noqa: F821
from argus_plugins.dsl.tile import lang as al

LOG2E = 1.4426950408889634  # exp(x) == exp2(x * log2(e))
LN2 = 0.6931471805599453


def sees(row, key, s, skv, causal):
    """The family's mask (family.py), for specifications: query `row` sees `key` iff the
    key exists and, when causal, key <= row + (SKV - S) (bottom-right aligned)."""
    return (key < skv) & (causal.eq(0) | (key <= row + skv - s))


@al.kernel
def attention(
    q: al.Tensor["B", "HQ", "S", "D"],
    k: al.Tensor["B", "HKV", "SKV", "D"],
    v: al.Tensor["B", "HKV", "SKV", "D"],
    o: al.Tensor["B", "HQ", "S", "D"],
    lse: al.Tensor["B", "HQ", "S"],
    scale: al.f32,
    causal: al.i32,
    BM: al.constexpr,
    BN: al.constexpr,
    HEAD_D: al.constexpr,
):
    pm, b, h = al.program_ids((al.cdiv(q.shape[2], BM), q.shape[0], q.shape[1]))
    al.requires((q.shape[1] % k.shape[1]).eq(0))  # GQA: HQ is a multiple of HKV
    al.requires(q.shape[3] <= HEAD_D)  # one tile spans the head dim
    al.requires((causal >= 0) & (causal <= 1))
    al.requires(causal.eq(0) | (q.shape[2] <= k.shape[2]))  # causal needs S <= SKV
    hk = h // (q.shape[1] // k.shape[1])  # the KV head this query head reads (GQA)
    kv_head = h // (q.shape[1] // k.shape[1])  # spec (ghost): query head h reads KV head h // G
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
        al.assert_tag(lambda b_, g, d, j: b_.eq(b) & g.eq(kv_head), kt, arity=4)
        al.assert_tag(lambda b_, g, j, d: b_.eq(b) & g.eq(kv_head), vt, arity=4)
        s = al.dot(qt, kt) * scale * LOG2E
        i, j = al.indices((BM, BN))
        key = n * BN + j
        visible = (key < k.shape[2]) & (causal.eq(0) | (pm * BM + i + shift >= key))
        s = al.where(visible, s, float("-inf"))
        m_new = al.maximum(m_i, al.max(s, 1))
        p = al.exp2(s - m_new[:, None])
        # every live (unmasked) score pairs a query row with a key it may see
        al.assert_tag(lambda b_, h_, r, j: sees(r, j, q.shape[2], k.shape[2], causal), p, arity=4)
        alpha = al.exp2(m_i - m_new)
        l_i = l_i * alpha + al.sum(p, 1)
        acc = acc * alpha[:, None] + al.dot(p.to(v.dtype), vt)
        m_i = m_new
    # each output element sums exactly the keys its row sees, each once
    al.assert_contraction(
        acc,
        lambda b_, h_, r, d, j: (d < q.shape[3]) & sees(r, j, q.shape[2], k.shape[2], causal),
        arity=4,
    )
    al.store(  # <- violated: store_tag
        o[b, h].tile(BM, HEAD_D)[pm + 1, 0], (acc / l_i[:, None]).to(o.dtype)
    )
    al.store(lse[b, h].tile(BM)[pm], (m_i + al.log2(l_i)) * LN2)
