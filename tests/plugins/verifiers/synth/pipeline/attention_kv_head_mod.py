"""The shipped attention kernel as an LLM might rewrite it: no tags or tag assertions, and
query head h reads KV head h % HKV (in bounds; the reference's is h // (HQ // HKV)). The
implied assertions prove it; the invariants synthesized from the family's reference do not
(`+verifier.options.synthesize=true`)."""

# ruff: noqa: F821
from argus_plugins.dsl.tile import lang as al

LN2 = 0.6931471805599453


def kv_block(k, v, b, hk, n, BN, HEAD_D):
    kt = al.load(al.permute(k[b, hk].tile(BN, HEAD_D)[n, 0], (1, 0)))  # <- synth
    vt = al.load(v[b, hk].tile(BN, HEAD_D)[n, 0])
    return kt, vt


def softmax_step(s, vt, dtype, m_i, l_i, acc):
    m_new = al.maximum(m_i, al.max(s, 1))
    p = al.exp2(s - m_new[:, None])
    alpha = al.exp2(m_i - m_new)
    return m_new, l_i * alpha + al.sum(p, 1), acc * alpha[:, None] + al.dot(p.to(dtype), vt)


@al.kernel
def attention(
    q: al.Tensor["B", "HQ", "S", "D"],
    k: al.Tensor["B", "HKV", "SKV", "D"],
    v: al.Tensor["B", "HKV", "SKV", "D"],
    o: al.Tensor["B", "HQ", "S", "D"],
    lse: al.Tensor["B", "HQ", "S"],
    qk_scale: al.f32,
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
    hk = h % k.shape[1]  # BUG: the reference's KV head is h // (HQ // HKV)
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
    full = al.minimum(
        stop,
        al.maximum(
            0, (k.shape[2] - causal * al.maximum(0, k.shape[2] - (pm * BM + shift + 1))) // BN
        ),
    )
    for n in al.range(full):  # blocks every row sees whole: no mask
        kt, vt = kv_block(k, v, b, hk, n, BN, HEAD_D)
        s = al.dot(qt, kt) * qk_scale  # base-2 scores: qk_scale = scale * log2(e)
        m_i, l_i, acc = softmax_step(s, vt, v.dtype, m_i, l_i, acc)
    for n2 in al.range(full, stop):  # the diagonal and the ragged last block: masked
        kt2, vt2 = kv_block(k, v, b, hk, n2, BN, HEAD_D)
        i, j = al.indices((BM, BN))
        key = n2 * BN + j
        visible = (key < k.shape[2]) & (causal.eq(0) | (pm * BM + i + shift >= key))
        s2 = al.where(visible, al.dot(qt, kt2) * qk_scale, float("-inf"))
        m_i, l_i, acc = softmax_step(s2, vt2, v.dtype, m_i, l_i, acc)
    al.store(o[b, h].tile(BM, HEAD_D)[pm, 0], (acc / l_i[:, None]).to(o.dtype))
    al.store(lse[b, h].tile(BM)[pm], (m_i + al.log2(l_i)) * LN2)
