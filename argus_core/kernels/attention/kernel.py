"""Flash attention (forward) in the Argus tile DSL.

One program computes BM query rows of one (batch, query head): it streams the keys and
values of that head's KV head in blocks of BN, keeping a running row max `m_i` and row sum
`l_i` (online softmax, base 2 with the scale folded in), and writes the output rows and
their log-sum-exp (natural log) once. Grouped-query attention: query head h reads KV head
h // (HQ // HKV). Causal (`causal != 0`) is bottom-right aligned: query row i sees key j
only when j <= i + (SKV - S) (the last query sees every key; needs S <= SKV), and key blocks
wholly after the query block's last visible key are never visited. The key loop is split in
two: blocks every row of the query block sees whole run without a mask; only the diagonal
blocks (causal) and the ragged last block pay for one. `qk_scale` is the softmax scale
times log2(e): one multiply per score.

Invariants (ghost code, erased by the lowering; proved by `verifier=smt`, docs/verifier.md):
preconditions (`al.requires`), the KV head each K/V tile is read from, the keys that reach
the softmax, and the exact set of keys summed into each output row. Q·Kᵀ pairing head-dim
indices, P·V pairing key indices, row ownership of the running max/sum, and each o/lse row
written once are implied by the ops themselves.
"""

from argus_plugins.dsl.tile import lang as al

LN2 = 0.6931471805599453


def sees(row, key, s, skv, causal):
    """The family's mask (family.py), for specifications: query `row` sees `key` iff the
    key exists and, when causal, key <= row + (SKV - S) (bottom-right aligned)."""
    return (key < skv) & (causal.eq(0) | (key <= row + skv - s))


@al.kernel
def attention(q: al.Tensor["B", "HQ", "S", "D"], k: al.Tensor["B", "HKV", "SKV", "D"],
              v: al.Tensor["B", "HKV", "SKV", "D"], o: al.Tensor["B", "HQ", "S", "D"],
              lse: al.Tensor["B", "HQ", "S"], qk_scale: al.f32, causal: al.i32,
              BM: al.constexpr, BN: al.constexpr, HEAD_D: al.constexpr):
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
    # blocks every row of this query block sees whole (no mask needed): all keys < SKV and,
    # when causal, <= the block's first row + shift
    full = al.minimum(stop, al.maximum(0, (k.shape[2] - causal * al.maximum(0, k.shape[2] - (pm * BM + shift + 1))) // BN))
    for n in al.range(full):
        kt = al.load(al.permute(k[b, hk].tile(BN, HEAD_D)[n, 0], (1, 0)))  # K^T block
        vt = al.load(v[b, hk].tile(BN, HEAD_D)[n, 0])
        al.assert_tag(lambda b_, g, d, j: b_.eq(b) & g.eq(kv_head), kt, arity=4)
        al.assert_tag(lambda b_, g, j, d: b_.eq(b) & g.eq(kv_head), vt, arity=4)
        s = al.dot(qt, kt) * qk_scale  # base-2 scores: qk_scale = scale * log2(e)
        m_new = al.maximum(m_i, al.max(s, 1))
        p = al.exp2(s - m_new[:, None])
        al.assert_tag(lambda b_, h_, r, j: sees(r, j, q.shape[2], k.shape[2], causal), p, arity=4)
        alpha = al.exp2(m_i - m_new)
        l_i = l_i * alpha + al.sum(p, 1)
        acc = acc * alpha[:, None] + al.dot(p.to(v.dtype), vt)
        m_i = m_new
    for n2 in al.range(full, stop):  # the diagonal and the ragged last block: masked
        kt2 = al.load(al.permute(k[b, hk].tile(BN, HEAD_D)[n2, 0], (1, 0)))
        vt2 = al.load(v[b, hk].tile(BN, HEAD_D)[n2, 0])
        al.assert_tag(lambda b_, g, d, j: b_.eq(b) & g.eq(kv_head), kt2, arity=4)
        al.assert_tag(lambda b_, g, j, d: b_.eq(b) & g.eq(kv_head), vt2, arity=4)
        s2 = al.dot(qt, kt2) * qk_scale
        i, j = al.indices((BM, BN))
        key = n2 * BN + j
        visible = (key < k.shape[2]) & (causal.eq(0) | (pm * BM + i + shift >= key))
        s2 = al.where(visible, s2, float("-inf"))
        m_new2 = al.maximum(m_i, al.max(s2, 1))
        p2 = al.exp2(s2 - m_new2[:, None])
        al.assert_tag(lambda b_, h_, r, j: sees(r, j, q.shape[2], k.shape[2], causal), p2, arity=4)
        alpha2 = al.exp2(m_i - m_new2)
        l_i = l_i * alpha2 + al.sum(p2, 1)
        acc = acc * alpha2[:, None] + al.dot(p2.to(v.dtype), vt2)
        m_i = m_new2
    # each output element sums exactly the keys its row sees, each once
    al.assert_contraction(acc, lambda b_, h_, r, d, j: (d < q.shape[3]) & sees(r, j, q.shape[2], k.shape[2], causal), arity=4)
    al.store(o[b, h].tile(BM, HEAD_D)[pm, 0], (acc / l_i[:, None]).to(o.dtype))
    al.store(lse[b, h].tile(BM)[pm], (m_i + al.log2(l_i)) * LN2)
