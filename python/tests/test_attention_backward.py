"""ignis.attention_backward. CUDA bfloat16/float16 (the fused kernel): wrapped with ignis.attention in a
torch.autograd.Function, as a training step uses them, its gradients against torch autograd in float64 (the
reference), within twice the error of torch autograd through the same computation written plainly in the storage
dtype (the naive bound), and against torch's own SDPA backward. numpy float32 on the CPU (the naive path): against
the float64 numpy reference. The errors of both."""
import math

import numpy as np
import pytest

import ignis
from helpers import cuda_normal, raises, to_numpy64
from reference import assert_within_naive, attention_mask, ref_attention_backward


def ignis_attention(torch):
    """ignis.attention with ignis.attention_backward as its gradient, flash_attn_func's way."""

    class Attention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, options):
            o, lse = ignis.attention(q, k, v, **options, return_lse=True)
            ctx.save_for_backward(q, k, v, o, lse)
            ctx.options = options
            return o

        @staticmethod
        def backward(ctx, dout):
            q, k, v, o, lse = ctx.saved_tensors
            dq, dk, dv = ignis.attention_backward(dout.contiguous(), q, k, v, o, lse, **ctx.options)
            return dq, dk, dv, None

    return Attention.apply


def plain_attention(torch, q, k, v, scale, mask, softcap):
    """o in q's dtype through torch's differentiable ops (GQA by repeat_interleave)."""
    group = q.shape[2] // k.shape[2]
    kk, vv = k.repeat_interleave(group, dim=2), v.repeat_interleave(group, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q, kk) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    p = torch.softmax(s.masked_fill(~mask, -math.inf), dim=-1)
    return torch.einsum("bhqk,bkhd->bqhd", p, vv)


def grads_of(fn, inputs, dout):
    leaves = [x.detach().clone().requires_grad_() for x in inputs]
    fn(*leaves).backward(dout)
    return [x.grad for x in leaves]


SHAPES = [
    (2, 17, 17, 4, 2, 64),
    (1, 128, 256, 8, 1, 128),
    (2, 300, 113, 6, 2, 64),
    (2, 1023, 1023, 4, 1, 64),
    (1, 700, 700, 4, 4, 128),
]

OPTIONS = [
    dict(causal=False),
    dict(causal=True),
    dict(causal=True, window=(16, 0)),
    dict(causal=False, window=(3, 5), softcap=20.0),
    dict(causal=False, softcap=5.0, softmax_scale=0.3),
]


@pytest.mark.parametrize("options", OPTIONS, ids=str)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_attention_backward_cuda(cuda, rng, dtype, shape, options):
    torch = cuda
    batch, sq, sk, hq, hkv, d = shape
    causal, window = options["causal"], options.get("window", (-1, -1))
    mask = torch.from_numpy(attention_mask(sq, sk, causal, window)).cuda()
    if not bool(mask.any(dim=-1).all()):
        pytest.skip("a query without keys: torch's softmax gives NaN there (the C++ tests cover such rows)")
    q = cuda_normal(torch, rng, (batch, sq, hq, d), dtype)
    k = cuda_normal(torch, rng, (batch, sk, hkv, d), dtype)
    v = cuda_normal(torch, rng, (batch, sk, hkv, d), dtype)
    dout = cuda_normal(torch, rng, (batch, sq, hq, d), dtype)
    scale = options.get("softmax_scale", 1.0 / math.sqrt(d))
    softcap = options.get("softcap", 0.0)
    plain = lambda q, k, v: plain_attention(torch, q, k, v, scale, mask, softcap)  # noqa: E731
    got = grads_of(lambda q, k, v: ignis_attention(torch)(q, k, v, options), (q, k, v), dout)
    ref = grads_of(plain, (q.double(), k.double(), v.double()), dout.double())
    naive = grads_of(plain, (q, k, v), dout)
    for name, g, r, n, x in zip(("dq", "dk", "dv"), got, ref, naive, (q, k, v)):
        assert isinstance(g, torch.Tensor) and g.dtype == x.dtype and g.shape == x.shape and g.device == x.device
        assert_within_naive(to_numpy64(g), to_numpy64(r), to_numpy64(n), dtype, name)


def test_attention_backward_matches_sdpa_causal(cuda, rng):
    """seqlen_q == seqlen_k, so the bottom-right causal mask is SDPA's is_causal: torch's own flash backward is a
    direct peer (its error bounds ours, against float64 autograd)."""
    torch = cuda
    shape = (2, 1024, 8, 128)
    q, k, v, dout = (cuda_normal(torch, rng, shape, "bf16") for _ in range(4))
    t = lambda x: x.transpose(1, 2)  # noqa: E731
    sdpa = lambda q, k, v: t(torch.nn.functional.scaled_dot_product_attention(t(q), t(k), t(v), is_causal=True))  # noqa: E731
    got = grads_of(lambda q, k, v: ignis_attention(torch)(q, k, v, dict(causal=True)), (q, k, v), dout)
    peer = grads_of(sdpa, (q, k, v), dout)
    ref = grads_of(sdpa, (q.double(), k.double(), v.double()), dout.double())
    for name, g, r, p in zip(("dq", "dk", "dv"), got, ref, peer):
        assert_within_naive(to_numpy64(g), to_numpy64(r), to_numpy64(p), "bf16", name + " vs sdpa")


def test_attention_backward_deterministic_dk_dv(cuda, rng):
    """dk and dv are summed in one block's registers: the same bits on every call (dq's atomics may not be)."""
    torch = cuda
    q, k, v, dout = (cuda_normal(torch, rng, (1, 500, 4, 64), "bf16") for _ in range(4))
    o, lse = ignis.attention(q, k, v, causal=True, return_lse=True)
    first = ignis.attention_backward(dout, q, k, v, o, lse, causal=True)
    second = ignis.attention_backward(dout, q, k, v, o, lse, causal=True)
    assert torch.equal(first[1], second[1]) and torch.equal(first[2], second[2])
    # dq may differ by the last bit of bf16 (2^-8 relative) where its fp32 atomics summed in another order.
    np.testing.assert_allclose(to_numpy64(first[0]), to_numpy64(second[0]), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("options", OPTIONS, ids=str)
@pytest.mark.parametrize("shape", [(1, 1, 1, 1, 1, 8), (2, 17, 40, 4, 2, 64), (1, 30, 30, 6, 2, 32)])
def test_attention_backward_cpu_f32(rng, shape, options):
    batch, sq, sk, hq, hkv, d = shape
    q, dout = (rng.standard_normal((batch, sq, hq, d)).astype(np.float32) for _ in range(2))
    k, v = (rng.standard_normal((batch, sk, hkv, d)).astype(np.float32) for _ in range(2))
    o, lse = ignis.attention(q, k, v, **options, return_lse=True)
    got = ignis.attention_backward(dout, q, k, v, o, lse, **options)
    ref = ref_attention_backward(q, k, v, dout, options.get("softmax_scale", 1.0 / math.sqrt(d)), options["causal"],
                                 options.get("window", (-1, -1)), options.get("softcap", 0.0))
    for name, g, r, x in zip(("dq", "dk", "dv"), got, ref, (q, k, v)):
        assert isinstance(g, np.ndarray) and g.dtype == np.float32 and g.shape == x.shape, name
        np.testing.assert_allclose(g, r, rtol=0, atol=1e-5 * max(1.0, np.abs(r).max()), err_msg=name)


def test_attention_backward_bad_arguments(rng):
    q = rng.standard_normal((1, 4, 2, 64)).astype(np.float32)
    lse = np.zeros((1, 2, 4), np.float32)
    with raises("attention_naive_backward: q.dtype: expected f32 (on the CPU), got f64"):
        q64 = q.astype(np.float64)
        ignis.attention_backward(q64, q64, q64, q64, q64, lse)
    with raises("attention_naive_backward: lse.shape: expected [1, 2, 4], got [1, 4, 2]"):
        ignis.attention_backward(q, q, q, q, q, np.zeros((1, 4, 2), np.float32))


def test_attention_backward_cuda_bad_arguments(cuda):
    torch = cuda
    q = torch.zeros((1, 4, 2, 64), device="cuda", dtype=torch.bfloat16)
    lse = torch.zeros((1, 2, 4), device="cuda", dtype=torch.float32)
    with raises("flash_attention_backward: dout.dtype: expected bf16, got f16"):
        ignis.attention_backward(q.half(), q, q, q, q, lse)
    with raises("flash_attention_backward: lse.dtype: expected f32, got bf16"):
        ignis.attention_backward(q, q, q, q, q, lse.bfloat16())
    with raises("attention_naive_backward: q: expected f32 on the CPU (on CUDA, flash_attention_backward takes bf16 "
                "and f16), got f32 on cuda:0"):
        ignis.attention_backward(q.float(), q.float(), q.float(), q.float(), q.float(), lse)
