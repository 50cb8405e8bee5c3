"""fp64 numpy references of ignis's ops and the tolerance rule the Python tests judge by."""
import numpy as np


def ref_softmax(x):
    """Softmax over the last axis in float64; a row of all -inf gives zeros."""
    x = np.asarray(x, dtype=np.float64)
    top = np.max(x, axis=-1, keepdims=True)
    top = np.where(np.isneginf(top), 0.0, top)
    e = np.exp(x - top)
    total = np.sum(e, axis=-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def ref_softmax_backward(y, dy):
    """dx = y * (dy - sum(dy * y)) per row, in float64."""
    y = np.asarray(y, dtype=np.float64)
    dy = np.asarray(dy, dtype=np.float64)
    return y * (dy - np.sum(dy * y, axis=-1, keepdims=True))


# Relative error allowed per storage dtype: a few roundings of the format (results are computed in
# fp32 and rounded once to the storage dtype).
RTOL = {"f64": 2e-6, "f32": 2e-6, "f16": 1e-3, "bf16": 8e-3}


def assert_close(got, ref, dtype, scale=None):
    """|got - ref| <= rtol * (|ref| + scale), scale defaulting to max |ref| / 64 (guards entries
    that cancel to ~0 without hiding errors in the large ones)."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape
    assert np.all(np.isfinite(got)), "non-finite output"
    if scale is None:
        scale = np.max(np.abs(ref), initial=0.0) / 64 + 1e-30
    err = np.abs(got - ref)
    bound = RTOL[dtype] * (np.abs(ref) + scale)
    worst = np.argmax(err - bound) if err.size else 0
    assert np.all(err <= bound), (
        f"{dtype}: max error {err.flat[worst]:.3g} at flat index {worst} (got {got.flat[worst]!r}, "
        f"ref {ref.flat[worst]!r}, bound {bound.flat[worst]:.3g})"
    )


# Floor of the low-precision rule, relative to max |ref|: about half an ulp of the format.
FLOOR = {"f64": 1e-12, "f32": 1e-6, "f16": 5e-4, "bf16": 4e-3}


def assert_within_naive(got, ref, naive, dtype, what="", scale=None):
    """The low-precision rule: max |got - ref| <= 2 * max |naive - ref| + FLOOR * scale, where
    `naive` is the same computation done plainly in the storage precision (torch's own op, say) and
    scale defaults to max |ref| (give the size of the terms a result cancels, where it cancels)."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    naive = np.asarray(naive, dtype=np.float64)
    assert got.shape == ref.shape == naive.shape, (got.shape, ref.shape, naive.shape)
    assert np.all(np.isfinite(got) == np.isfinite(ref)), f"{what}: non-finite entries differ"
    finite = np.isfinite(ref)
    assert np.array_equal(got[~finite], ref[~finite]), f"{what}: infinite entries differ"
    # Differences of the finite entries only: inf - inf would be NaN (and a RuntimeWarning) before any mask.
    err = np.max(np.abs(got[finite] - ref[finite]), initial=0.0)
    naive_err = np.max(np.abs(naive[finite] - ref[finite]), initial=0.0)
    if scale is None:
        scale = np.max(np.abs(ref[finite]), initial=0.0)
    bound = 2 * naive_err + FLOOR[dtype] * scale
    assert err <= bound, f"{what} {dtype}: error {err:.3g} > bound {bound:.3g} (naive error {naive_err:.3g})"


def f64(x):
    return np.asarray(x, dtype=np.float64)


# ---- norms ---------------------------------------------------------------------------------------


def ref_rms_norm(x, w, eps):
    x, w = f64(x), f64(w)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def ref_rms_norm_backward(x, w, dy, eps):
    """(dx, dweight) of y = x r w, r = (mean(x^2) + eps)^-1/2."""
    x, w, dy = f64(x), f64(w), f64(dy)
    r = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    g = dy * w
    dx = r * g - r**3 * x * np.mean(g * x, axis=-1, keepdims=True)
    return dx, np.sum(dy * x * r, axis=0)


def ref_layer_norm(x, w, b, eps):
    x = f64(x)
    mu = np.mean(x, axis=-1, keepdims=True)
    var = np.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * f64(w) + f64(b)


def ref_layer_norm_backward(x, w, dy, eps):
    """(dx, dweight, dbias) of y = xhat w + b, xhat = (x - mean) r."""
    x, w, dy = f64(x), f64(w), f64(dy)
    mu = np.mean(x, axis=-1, keepdims=True)
    r = 1.0 / np.sqrt(np.mean((x - mu) ** 2, axis=-1, keepdims=True) + eps)
    xhat = (x - mu) * r
    g = dy * w
    dx = r * (g - np.mean(g, axis=-1, keepdims=True) - xhat * np.mean(g * xhat, axis=-1, keepdims=True))
    return dx, np.sum(dy * xhat, axis=0), np.sum(dy, axis=0)


# ---- activations ---------------------------------------------------------------------------------

GELU_C = np.sqrt(2.0 / np.pi)


def ref_gelu_tanh(x):
    x = f64(x)
    return 0.5 * x * (1.0 + np.tanh(GELU_C * (x + 0.044715 * x**3)))


def ref_gelu_tanh_backward(x, dy):
    x = f64(x)
    t = np.tanh(GELU_C * (x + 0.044715 * x**3))
    return f64(dy) * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_C * (1.0 + 3 * 0.044715 * x * x))


def sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * f64(x)))


def ref_silu(x):
    return f64(x) * sigmoid(x)


def ref_silu_backward(x, dy):
    x = f64(x)
    s = sigmoid(x)
    return f64(dy) * s * (1.0 + x * (1.0 - s))


def ref_swiglu(gate, up):
    return ref_silu(gate) * f64(up)


def ref_swiglu_backward(gate, up, dout):
    """(dgate, dup)."""
    return ref_silu_backward(gate, f64(dout) * f64(up)), f64(dout) * ref_silu(gate)


# ---- rope ----------------------------------------------------------------------------------------


def ref_inv_freq(rotary_dim, theta):
    return f64(theta) ** (-np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim)


def ref_rope(x, inv_freq, rotary_dim=None, interleaved=False, position_offset=0, batch_offsets=None,
             attention_factor=1.0, sign=1.0):
    """x: [batch, seqlen, heads, head_dim]; pair (a, b) at angle t -> f (a cos t - b sin t, b cos t + a sin t),
    sin negated for sign = -1 (the backward)."""
    x = f64(x).copy()
    inv_freq = f64(inv_freq)
    batch, seqlen = x.shape[:2]
    d = rotary_dim or 2 * len(inv_freq)
    starts = np.zeros(batch) if batch_offsets is None else f64(batch_offsets)
    pos = position_offset + starts[:, None] + np.arange(seqlen)[None, :]  # [batch, seqlen]
    t = pos[:, :, None, None] * inv_freq[None, None, None, :]  # [batch, seqlen, 1, d/2]
    cos, sin = np.cos(t) * attention_factor, sign * np.sin(t) * attention_factor
    if interleaved:
        a, b = x[..., 0:d:2].copy(), x[..., 1:d:2].copy()
        x[..., 0:d:2], x[..., 1:d:2] = a * cos - b * sin, b * cos + a * sin
    else:
        a, b = x[..., : d // 2].copy(), x[..., d // 2 : d].copy()
        x[..., : d // 2], x[..., d // 2 : d] = a * cos - b * sin, b * cos + a * sin
    return x


# ---- cross-entropy -------------------------------------------------------------------------------


def ref_cross_entropy(logits, targets, pad_id):
    """(mean loss over non-pad rows, dlogits)."""
    x = f64(logits)
    targets = np.asarray(targets)
    keep = targets != pad_id
    count = int(np.sum(keep))
    top = np.max(x, axis=-1, keepdims=True)
    lse = top[:, 0] + np.log(np.sum(np.exp(x - top), axis=-1))
    rows = np.flatnonzero(keep)
    loss = np.sum(lse[rows] - x[rows, targets[rows]]) / count if count else 0.0
    grad = np.zeros_like(x)
    if count:
        grad[rows] = np.exp(x[rows] - lse[rows, None])
        grad[rows, targets[rows]] -= 1.0
        grad /= count
    return loss, grad


# ---- sampling ------------------------------------------------------------------------------------

MASK64 = (1 << 64) - 1


def mix64(z):
    z = (z + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def sampling_uniform(seed, step, row):
    """The uniform draw in [0, 1) of one (seed, step, row) (src/ops/sampling_rule.h)."""
    return (mix64(mix64(mix64(seed) ^ step) ^ row) >> 11) * 2.0**-53


def rank_order(row):
    """Indices by value, larger first, lower index first among equals."""
    return np.lexsort((np.arange(len(row)), -f64(row)))


def ref_top_k_mask(x, k):
    y = f64(x).copy()
    if 0 < k < y.shape[1]:
        for row in y:
            row[rank_order(row)[k:]] = -np.inf
    return y


def keep_top_p(row, p):
    """Masks one float64 row in place; returns the distance of the p target from the nearest
    cumulative boundary, relative to the row's total (inf when nothing is cut). The top token is kept
    whatever p is, so a row that keeps one token has no lower boundary to be near."""
    top = np.max(row)
    if p >= 1.0 or top == -np.inf:
        return np.inf
    prob = np.exp(row - top)
    order = rank_order(row)
    cum = np.cumsum(prob[order])
    total = np.sum(prob)
    target = p * total
    kept = min(int(np.searchsorted(cum, target, side="left")) + 1, len(row))
    lower = target - cum[kept - 2] if kept >= 2 else np.inf
    row[order[kept:]] = -np.inf
    return min(lower, cum[kept - 1] - target) / total


def ref_top_p_mask(x, p):
    """(masked rows, margins)."""
    y = f64(x).copy()
    margins = np.array([keep_top_p(row, p) for row in y])
    return y, margins


def ref_sample(x, temperature=1.0, top_k=0, top_p=1.0, seed=0, step=0):
    """(ids, margins): the real-valued rule of src/ref/sampling.h."""
    x = f64(x)
    ids = np.zeros(x.shape[0], dtype=np.int64)
    margins = np.full(x.shape[0], np.inf)
    for r, row in enumerate(x):
        ids[r] = np.argmax(row)
        if temperature == 0.0 or row[ids[r]] == -np.inf:
            continue
        y = ref_top_k_mask((row / temperature)[None, :], top_k)[0]
        margin_p = keep_top_p(y, top_p)
        w = np.exp(y - np.max(y))
        cum = np.cumsum(w)
        threshold = sampling_uniform(seed, step, r) * cum[-1]
        i = int(np.searchsorted(cum, threshold, side="right"))
        ids[r] = i
        before = cum[i - 1] if i else 0.0
        margins[r] = min(margin_p, min(threshold - before, cum[i] - threshold) / cum[-1])
    return ids, margins


# ---- attention -----------------------------------------------------------------------------------


def attention_mask(seqlen_q, seqlen_k, causal=False, window=(-1, -1)):
    """[seqlen_q, seqlen_k] bool, bottom-right aligned: key j is visible to query i when j <= i + d
    (causal) and i + d - left <= j <= i + d + right (window sides, -1 unlimited), d = seqlen_k - seqlen_q."""
    i = np.arange(seqlen_q)[:, None] + (seqlen_k - seqlen_q)
    j = np.arange(seqlen_k)[None, :]
    visible = np.ones((seqlen_q, seqlen_k), dtype=bool)
    if causal:
        visible &= j <= i
    left, right = window
    if left >= 0:
        visible &= j >= i - left
    if right >= 0:
        visible &= j <= i + right
    return visible


def ref_attention_scores(q, k, scale, causal=False, window=(-1, -1), softcap=0.0):
    """q: [batch, seqlen_q, heads_q, d], k: [batch, seqlen_k, heads_kv, d] -> scores
    [batch, heads_q, seqlen_q, seqlen_k] in float64, -inf where masked (GQA: head h reads h // group)."""
    q, k = f64(q), f64(k)
    group = q.shape[2] // k.shape[2]
    kk = np.repeat(k, group, axis=2)
    s = np.einsum("bqhd,bkhd->bhqk", q, kk) * scale
    if softcap > 0:
        s = softcap * np.tanh(s / softcap)
    return np.where(attention_mask(q.shape[1], k.shape[1], causal, window), s, -np.inf)


def ref_attention_backward(q, k, v, dout, scale, causal=False, window=(-1, -1), softcap=0.0):
    """(dq, dk, dv) of sum(dout * o) for o = ref_attention(q, k, v, ...), in float64, by the chain rule through the
    softmax and the softcap (delta = sum_k P dP, not dout . o); dk and dv summed over each kv head's query heads."""
    q, k, v, dout = f64(q), f64(k), f64(v), f64(dout)
    group = q.shape[2] // k.shape[2]
    kk, vv = np.repeat(k, group, axis=2), np.repeat(v, group, axis=2)
    raw = np.einsum("bqhd,bkhd->bhqk", q, kk) * scale
    s = softcap * np.tanh(raw / softcap) if softcap > 0 else raw
    s = np.where(attention_mask(q.shape[1], k.shape[1], causal, window), s, -np.inf)
    top = np.max(s, axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isneginf(top), 0.0, top))
    total = np.sum(e, axis=-1, keepdims=True)
    p = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    dp = np.einsum("bqhd,bkhd->bhqk", dout, vv)
    ds = p * (dp - np.sum(p * dp, axis=-1, keepdims=True))
    if softcap > 0:
        ds = ds * (1.0 - np.tanh(raw / softcap) ** 2)
    ds = ds * scale
    batch, seqlen_k, heads_kv, d = k.shape
    per_group = lambda x: x.reshape(batch, seqlen_k, heads_kv, group, d).sum(axis=3)  # noqa: E731
    return (np.einsum("bhqk,bkhd->bqhd", ds, kk), per_group(np.einsum("bhqk,bqhd->bkhd", ds, q)),
            per_group(np.einsum("bhqk,bqhd->bkhd", p, dout)))


def ref_attention(q, k, v, scale, causal=False, window=(-1, -1), softcap=0.0):
    """(o [batch, seqlen_q, heads_q, d], lse [batch, heads_q, seqlen_q]); a query with no visible key
    gives o = 0 and lse = -inf."""
    s = ref_attention_scores(q, k, scale, causal, window, softcap)
    top = np.max(s, axis=-1, keepdims=True)
    top = np.where(np.isneginf(top), 0.0, top)
    e = np.exp(s - top)
    total = np.sum(e, axis=-1, keepdims=True)
    with np.errstate(divide="ignore"):
        lse = np.where(total[..., 0] > 0, top[..., 0] + np.log(total[..., 0]), -np.inf)
    p = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    group = q.shape[2] // v.shape[2]
    vv = np.repeat(f64(v), group, axis=2)
    return np.einsum("bhqk,bkhd->bqhd", p, vv), lse
