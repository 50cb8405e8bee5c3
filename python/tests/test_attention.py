"""ignis.attention / attention_naive / attention_unfused / attention_scores (CUDA only): torch on a GPU against
an fp64 reference, the same computation written plainly in torch in the same precision (the naive
bound) and torch's scaled_dot_product_attention (GQA expanded with repeat_interleave, masks given
explicitly because ignis aligns them bottom-right). On the CPU: the references and the errors."""
import math

import numpy as np
import pytest

import ignis
from helpers import bad_arguments_test, cuda_normal, raises, to_numpy64, torch_dtype
from reference import assert_within_naive, attention_mask, ref_attention, ref_attention_scores


def test_reference_attention_hand_values():
    q = np.zeros((1, 2, 1, 4))
    k = np.zeros((1, 3, 1, 4))
    v = np.arange(12, dtype=np.float64).reshape(1, 3, 1, 4)
    o, lse = ref_attention(q, k, v, scale=1.0)
    np.testing.assert_allclose(o[0, :, 0], np.tile(v[0, :, 0].mean(axis=0), (2, 1)))
    np.testing.assert_allclose(lse, np.log(3.0))
    # Bottom-right causal: query 0 sees keys 0..1, query 1 sees all three.
    np.testing.assert_array_equal(attention_mask(2, 3, causal=True), [[True, True, False], [True, True, True]])
    # More queries than keys: the first query sees nothing, giving o = 0 and lse = -inf.
    o, lse = ref_attention(np.zeros((1, 3, 1, 4)), k[:, :2], v[:, :2], scale=1.0, causal=True)
    assert np.all(o[0, 0] == 0) and lse[0, 0, 0] == -np.inf
    np.testing.assert_array_equal(attention_mask(3, 3, window=(1, 0)),
                                  [[True, False, False], [True, True, False], [False, True, True]])
    s = ref_attention_scores(np.ones((1, 1, 2, 1)), np.full((1, 1, 1, 1), 100.0), 1.0, softcap=30.0)
    np.testing.assert_allclose(s[0, :, 0, 0], [30 * np.tanh(100 / 30)] * 2)


Q = np.zeros((1, 4, 2, 8), np.float32)

BAD_CALLS = {
    "f64 on the CPU": (lambda: ignis.attention(Q.astype(np.float64), Q.astype(np.float64), Q.astype(np.float64)),
                       "attention_naive_forward: q.dtype: expected f32 (on the CPU), got f64"),
    "heads": (lambda: ignis.attention_naive(Q, Q[:, :, :1].repeat(3, axis=2), Q[:, :, :1].repeat(3, axis=2)),
              "attention_naive_forward: q.size(2) (heads_q): expected a multiple of heads_kv (3), got 2"),
    "v shape": (lambda: ignis.attention_naive(Q, Q, Q[:, :3]),
                "attention_naive_forward: v.shape: expected [1, 4, 2, 8], got [1, 3, 2, 8]"),
    "rank": (lambda: ignis.attention_unfused(Q[0], Q, Q), "attention_unfused_forward: q.dim: expected 4, got 3"),
    "unfused on the CPU": (lambda: ignis.attention_unfused(Q, Q, Q),
                           "attention_unfused_forward: dtype on cpu: expected cuda with f32, f16 or bf16, got f32"),
    "scores on the CPU": (lambda: ignis.attention_scores(Q, Q),
                          "attention_scores: dtype on cpu: expected cuda with f64, f32, f16 or bf16, got f32"),
    "not an array": (lambda: ignis.attention_scores(Q, [1.0]),
                     "attention_scores: k: expected a numpy array or a torch tensor, got list"),
}


test_attention_bad_arguments = bad_arguments_test(BAD_CALLS)


@pytest.mark.parametrize("options", [dict(causal=False), dict(causal=True), dict(causal=True, window=(16, 0)),
                                     dict(causal=False, window=(3, 5), softcap=20.0),
                                     dict(causal=False, softcap=5.0, softmax_scale=0.3)], ids=str)
@pytest.mark.parametrize("shape", [(1, 1, 1, 1, 1, 8), (2, 17, 40, 4, 2, 64), (1, 50, 20, 3, 1, 32)])
def test_attention_cpu_f32(rng, shape, options):
    """numpy float32 on the CPU: ignis.attention (the naive path) against the float64 reference."""
    batch, sq, sk, hq, hkv, d = shape
    q = rng.standard_normal((batch, sq, hq, d)).astype(np.float32)
    k = rng.standard_normal((batch, sk, hkv, d)).astype(np.float32)
    v = rng.standard_normal((batch, sk, hkv, d)).astype(np.float32)
    o, lse = ignis.attention(q, k, v, **options, return_lse=True)
    assert isinstance(o, np.ndarray) and o.dtype == np.float32 and o.shape == q.shape and lse.dtype == np.float32
    scale = options.get("softmax_scale", 1.0 / math.sqrt(d))
    ref_o, ref_lse = ref_attention(q, k, v, scale, options["causal"], options.get("window", (-1, -1)),
                                   options.get("softcap", 0.0))
    np.testing.assert_allclose(o, ref_o, rtol=0, atol=2e-6 * max(1.0, np.abs(ref_o).max()))
    finite = np.isfinite(ref_lse)
    np.testing.assert_array_equal(np.isfinite(lse), finite)
    np.testing.assert_allclose(lse[finite], ref_lse[finite], rtol=2e-6, atol=2e-6)


# ---- torch on a GPU ------------------------------------------------------------------------------

# (batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim)
SHAPES = [
    (1, 1, 1, 1, 1, 1),
    (2, 17, 17, 4, 2, 64),
    (1, 128, 256, 8, 1, 128),
    (2, 33, 7, 6, 3, 80),
    (1, 1, 1000, 32, 8, 128),
    (1, 64, 64, 2, 2, 256),
]


def qkv(torch, rng, shape, dtype):
    batch, sq, sk, hq, hkv, d = shape
    q = cuda_normal(torch, rng, (batch, sq, hq, d), dtype)
    k = cuda_normal(torch, rng, (batch, sk, hkv, d), dtype)
    v = cuda_normal(torch, rng, (batch, sk, hkv, d), dtype)
    return q, k, v


def torch_scores(torch, q, k, scale, mask, softcap=0.0):
    """[batch, heads_q, seqlen_q, seqlen_k] in q's dtype: the plain same-precision computation."""
    group = q.shape[2] // k.shape[2]
    kk = k.repeat_interleave(group, dim=2)
    s = torch.matmul(q.transpose(1, 2), kk.permute(0, 2, 3, 1)) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    return s.masked_fill(~mask, -float("inf"))


def torch_attention(torch, q, k, v, scale, mask, softcap=0.0):
    """(o, lse) written plainly in q's dtype; rows without a visible key give o = 0."""
    s = torch_scores(torch, q, k, scale, mask, softcap)
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    vv = v.repeat_interleave(q.shape[2] // v.shape[2], dim=2)
    return torch.matmul(p, vv.transpose(1, 2)).transpose(1, 2), torch.logsumexp(s, dim=-1)


def sdpa(torch, q, k, v, scale, mask):
    """torch's scaled_dot_product_attention on the flash_attn layout, GQA expanded."""
    group = q.shape[2] // k.shape[2]
    t = lambda x: x.transpose(1, 2)  # noqa: E731
    o = torch.nn.functional.scaled_dot_product_attention(
        t(q), t(k.repeat_interleave(group, dim=2)), t(v.repeat_interleave(group, dim=2)), attn_mask=mask, scale=scale)
    return t(o)


def mask_of(torch, shape, causal, window):
    return torch.from_numpy(attention_mask(shape[1], shape[2], causal, window)).cuda()


OPTIONS = [
    dict(causal=False),
    dict(causal=True),
    dict(causal=True, window=(16, 0)),
    dict(causal=False, window=(3, 5), softcap=20.0),
    dict(causal=False, softcap=5.0, softmax_scale=0.3),
]


@pytest.mark.parametrize("options", OPTIONS, ids=str)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_attention_naive_cuda(cuda, rng, dtype, shape, options):
    torch = cuda
    q, k, v = qkv(torch, rng, shape, dtype)
    causal, window = options["causal"], options.get("window", (-1, -1))
    softcap = options.get("softcap", 0.0)
    scale = options.get("softmax_scale", 1.0 / math.sqrt(shape[-1]))
    o, lse = ignis.attention_naive(q, k, v, **options)
    assert isinstance(o, torch.Tensor) and o.dtype == q.dtype and o.shape == q.shape and o.device == q.device
    assert lse.shape == (shape[0], shape[3], shape[1])
    assert lse.dtype == (torch.float64 if dtype == "f64" else torch.float32)
    ref_o, ref_lse = ref_attention(to_numpy64(q), to_numpy64(k), to_numpy64(v), scale, causal, window, softcap)
    mask = mask_of(torch, shape, causal, window)
    naive_o, naive_lse = torch_attention(torch, q, k, v, scale, mask, softcap)
    assert_within_naive(to_numpy64(o), ref_o, to_numpy64(naive_o), dtype, "o")
    assert_within_naive(to_numpy64(lse), ref_lse, to_numpy64(naive_lse), dtype, "lse")
    if softcap == 0.0 and bool(mask.any(dim=-1).all()):  # SDPA gives NaN for a row without keys
        assert_within_naive(to_numpy64(o), ref_o, to_numpy64(sdpa(torch, q, k, v, scale, mask)), dtype, "o vs sdpa")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES + [(2, 512, 512, 8, 2, 128)])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_attention_unfused_cuda(cuda, rng, dtype, shape, causal):
    torch = cuda
    q, k, v = qkv(torch, rng, shape, dtype)
    scale = 1.0 / math.sqrt(shape[-1])
    o = ignis.attention_unfused(q, k, v, causal=causal)
    assert isinstance(o, torch.Tensor) and o.dtype == q.dtype and o.shape == q.shape
    ref_o, _ = ref_attention(to_numpy64(q), to_numpy64(k), to_numpy64(v), scale, causal)
    mask = mask_of(torch, shape, causal, (-1, -1))
    naive_o, _ = torch_attention(torch, q, k, v, scale, mask)
    assert_within_naive(to_numpy64(o), ref_o, to_numpy64(naive_o), dtype, "o")
    if bool(mask.any(dim=-1).all()):
        # The reference agrees with torch's own attention in float64.
        q64, k64, v64 = q.double(), k.double(), v.double()
        np.testing.assert_allclose(to_numpy64(sdpa(torch, q64, k64, v64, scale, mask)), ref_o, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["f64", "f32", "f16", "bf16"])
def test_attention_scores_cuda(cuda, rng, dtype, shape, causal):
    torch = cuda
    q, k, _ = qkv(torch, rng, shape, dtype)
    s = ignis.attention_scores(q, k, causal=causal, softmax_scale=0.125)
    assert isinstance(s, torch.Tensor) and s.dtype == q.dtype
    assert s.shape == (shape[0], shape[3], shape[1], shape[2])
    ref = ref_attention_scores(to_numpy64(q), to_numpy64(k), 0.125, causal)
    naive = torch_scores(torch, q, k, 0.125, mask_of(torch, shape, causal, (-1, -1)))
    assert_within_naive(to_numpy64(s), ref, to_numpy64(naive), dtype, "s")


FLASH_SHAPES = [
    (1, 1, 1, 1, 1, 64),
    (2, 17, 17, 4, 2, 64),
    (1, 128, 256, 8, 1, 128),
    (2, 300, 113, 6, 2, 64),
    (1, 1, 1000, 32, 8, 128),
    (2, 1023, 1023, 4, 1, 64),
]


@pytest.mark.parametrize("options", OPTIONS, ids=str)
@pytest.mark.parametrize("shape", FLASH_SHAPES)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_attention_flash_cuda(cuda, rng, dtype, shape, options):
    """ignis.attention on bf16/f16 runs the fused kernel: against the fp64 reference within twice the
    plain same-precision error, and against torch's SDPA where every row sees a key."""
    torch = cuda
    q, k, v = qkv(torch, rng, shape, dtype)
    causal, window = options["causal"], options.get("window", (-1, -1))
    softcap = options.get("softcap", 0.0)
    scale = options.get("softmax_scale", 1.0 / math.sqrt(shape[-1]))
    o, lse = ignis.attention(q, k, v, **options, return_lse=True)
    assert isinstance(o, torch.Tensor) and o.dtype == q.dtype and o.shape == q.shape and o.device == q.device
    assert lse.shape == (shape[0], shape[3], shape[1]) and lse.dtype == torch.float32
    assert torch.equal(ignis.attention(q, k, v, **options), o)
    ref_o, ref_lse = ref_attention(to_numpy64(q), to_numpy64(k), to_numpy64(v), scale, causal, window, softcap)
    mask = mask_of(torch, shape, causal, window)
    naive_o, naive_lse = torch_attention(torch, q, k, v, scale, mask, softcap)
    assert_within_naive(to_numpy64(o), ref_o, to_numpy64(naive_o), dtype, "o")
    assert_within_naive(to_numpy64(lse), ref_lse, to_numpy64(naive_lse), dtype, "lse")
    if softcap == 0.0 and bool(mask.any(dim=-1).all()):  # SDPA gives NaN for a row without keys
        assert_within_naive(to_numpy64(o), ref_o, to_numpy64(sdpa(torch, q, k, v, scale, mask)), dtype, "o vs sdpa")


def test_attention_flash_matches_sdpa_causal(cuda, rng):
    """With seqlen_q == seqlen_k the bottom-right and top-left causal masks agree, so is_causal=True
    SDPA (torch's own flash kernel on bf16) is a direct peer."""
    torch = cuda
    q, k, v = qkv(torch, rng, (2, 2048, 2048, 8, 8, 128), "bf16")
    o = ignis.attention(q, k, v, causal=True)
    t = lambda x: x.transpose(1, 2)  # noqa: E731
    peer = t(torch.nn.functional.scaled_dot_product_attention(t(q), t(k), t(v), is_causal=True))
    ref_o = t(torch.nn.functional.scaled_dot_product_attention(t(q).double(), t(k).double(), t(v).double(),
                                                               is_causal=True))
    assert_within_naive(to_numpy64(o), to_numpy64(ref_o), to_numpy64(peer), "bf16", "o vs sdpa")


@pytest.mark.parametrize("num_splits", [0, 1, 5])
def test_attention_flash_splits_match_sdpa(cuda, rng, num_splits):
    """A grid of 16 tiles x 4 heads, far below what the GPU holds: num_splits 0 lets the kernel split each
    tile's keys, 1 keeps them whole, 5 splits them five ways; each against SDPA's flash kernel."""
    torch = cuda
    q, k, v = qkv(torch, rng, (1, 1024, 1024, 4, 4, 64), "bf16")
    o, lse = ignis.attention(q, k, v, causal=True, return_lse=True, num_splits=num_splits)
    t = lambda x: x.transpose(1, 2)  # noqa: E731
    peer = t(torch.nn.functional.scaled_dot_product_attention(t(q), t(k), t(v), is_causal=True))
    ref_o = t(torch.nn.functional.scaled_dot_product_attention(t(q).double(), t(k).double(), t(v).double(),
                                                               is_causal=True))
    assert_within_naive(to_numpy64(o), to_numpy64(ref_o), to_numpy64(peer), "bf16", "o vs sdpa")
    scores = torch.einsum("bqhd,bkhd->bhqk", q.double(), k.double()) / 8.0
    scores = scores.masked_fill(torch.ones(1024, 1024, device="cuda", dtype=torch.bool).triu(1), -math.inf)
    np.testing.assert_allclose(to_numpy64(lse), to_numpy64(torch.logsumexp(scores, dim=-1)), rtol=1e-5)


def test_attention_num_splits_out_of_range(rng):
    q = rng.standard_normal((1, 4, 2, 64)).astype(np.float32)
    for bad in (-1, 65):
        with raises(f"attention: num_splits: expected 0 (automatic) to 64, got {bad}"):
            ignis.attention(q, q, q, num_splits=bad)


def test_attention_cuda_bad_arguments(cuda):
    torch = cuda
    q = torch.zeros((1, 4, 2, 8), device="cuda", dtype=torch_dtype(torch, "bf16"))
    with raises("attention_naive_forward: q.dtype: expected f32 or f64, got bf16"):
        ignis.attention_naive(q, q, q)
    with raises("flash_attention_forward: q.size(3) (head_dim): expected 64 or 128, got 8"):
        ignis.attention(q, q, q)
    with raises("attention_unfused_forward: k.device: expected cuda:0, got cpu"):
        ignis.attention_unfused(q, q.cpu(), q)
    with raises("attention_naive_forward: params.window_left: expected >= -1, got -2"):
        ignis.attention_naive(q.float(), q.float(), q.float(), window=(-2, 0))
