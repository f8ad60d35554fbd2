"""Correct variant of the shipped attention kernel: the GQA head mapping computed by a
helper function (`kv_head_of`), not inline."""

# ruff: noqa: E501, E731, F821
# fmt: off

from argus_plugins.dsl.tile import lang as al

LN2 = 0.6931471805599453


def kv_head_of(h, hq, hkv):
    """The KV head query head `h` reads: heads in groups of hq // hkv."""
    group = hq // hkv
    return h // group


def sees(row, key, s, skv, causal):
    """The family's mask (family.py), for specifications: query `row` sees `key` iff the
    key exists and, when causal, key <= row + (SKV - S) (bottom-right aligned)."""
    return (key < skv) & (causal.eq(0) | (key <= row + skv - s))


def kv_block(k, v, b, hk, kv_head, n, BN, HEAD_D):
    """Kᵀ and V of key block `n` of KV head `hk`, each tagged with the batch and KV head it
    must come from (the spec `kv_head`)."""
    kt = al.load(al.permute(k[b, hk].tile(BN, HEAD_D)[n, 0], (1, 0)))
    vt = al.load(v[b, hk].tile(BN, HEAD_D)[n, 0])
    al.assert_tag(lambda b_, g, d, j: b_.eq(b) & g.eq(kv_head), kt, arity=4)
    al.assert_tag(lambda b_, g, j, d: b_.eq(b) & g.eq(kv_head), vt, arity=4)
    return kt, vt


def softmax_step(s, vt, dtype, m_i, l_i, acc, live):
    """One key block of the online softmax in base 2: the new running max, the rescaled row
    sums and accumulator plus this block's share. `live` specifies which (row, key) pairs
    may carry a live (unmasked) score."""
    m_new = al.maximum(m_i, al.max(s, 1))
    p = al.exp2(s - m_new[:, None])
    al.assert_tag(live, p, arity=4)  # every live score pairs a row with a key it may see
    alpha = al.exp2(m_i - m_new)
    return m_new, l_i * alpha + al.sum(p, 1), acc * alpha[:, None] + al.dot(p.to(dtype), vt)


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
    hk = kv_head_of(h, q.shape[1], k.shape[1])  # the KV head this query head reads (GQA)
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
    live = lambda b_, h_, r, j: sees(r, j, q.shape[2], k.shape[2], causal)  # noqa: E731
    for n in al.range(full):  # blocks every row sees whole: no mask
        kt, vt = kv_block(k, v, b, hk, kv_head, n, BN, HEAD_D)
        s = al.dot(qt, kt) * qk_scale  # base-2 scores: qk_scale = scale * log2(e)
        m_i, l_i, acc = softmax_step(s, vt, v.dtype, m_i, l_i, acc, live)
    for n2 in al.range(full, stop):  # the diagonal and the ragged last block: masked
        kt2, vt2 = kv_block(k, v, b, hk, kv_head, n2, BN, HEAD_D)
        i, j = al.indices((BM, BN))
        key = n2 * BN + j
        visible = (key < k.shape[2]) & (causal.eq(0) | (pm * BM + i + shift >= key))
        s2 = al.where(visible, al.dot(qt, kt2) * qk_scale, float("-inf"))
        m_i, l_i, acc = softmax_step(s2, vt2, v.dtype, m_i, l_i, acc, live)
    # each output element sums exactly the keys its row sees, each once
    al.assert_contraction(acc, lambda b_, h_, r, d, j: (d < q.shape[3]) & sees(r, j, q.shape[2], k.shape[2], causal), arity=4)
    al.store(o[b, h].tile(BM, HEAD_D)[pm, 0], (acc / l_i[:, None]).to(o.dtype))
    al.store(lse[b, h].tile(BM)[pm], (m_i + al.log2(l_i)) * LN2)
