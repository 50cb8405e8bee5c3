"""ignis.rope / rope_backward / rope_inv_freq: numpy against fp64 references, torch on a GPU against a
rotate-half implementation written in torch (as HF Llama's)."""
import numpy as np
import pytest

import ignis
from helpers import (CUDA_DTYPES, NUMPY_DTYPES, bad_arguments_test, computed_as, cuda_normal, normal, raises,
                     to_numpy64, torch_dtype)
from reference import assert_close, assert_within_naive, ref_inv_freq, ref_rope

# (batch, seqlen, heads, head_dim, rotary_dim)
SHAPES = [(1, 1, 1, 2, 2), (2, 17, 3, 64, 64), (3, 5, 2, 80, 32), (1, 33, 4, 128, 128), (2, 3, 1, 10, 6)]


def test_reference_rope_hand_values():
    # One pair at position 1, inv_freq 1 (angle 1 rad): (1, 0) -> (cos 1, sin 1).
    x = np.array([1.0, 0.0]).reshape(1, 1, 1, 2)
    got = ref_rope(x, [1.0], position_offset=1)
    np.testing.assert_allclose(got.ravel(), [np.cos(1.0), np.sin(1.0)], rtol=1e-15)
    np.testing.assert_allclose(ref_rope(got, [1.0], position_offset=1, sign=-1.0), x, atol=1e-15)
    np.testing.assert_allclose(ref_inv_freq(4, 100.0), [1.0, 0.1], rtol=1e-15)


def test_rope_inv_freq_numpy():
    got = ignis.rope_inv_freq(128, 500000.0)
    assert type(got) is np.ndarray and got.dtype == np.float32 and got.shape == (64,)
    np.testing.assert_array_equal(got, ref_inv_freq(128, 500000.0).astype(np.float32))
    np.testing.assert_array_equal(ignis.rope_inv_freq(64, 10000.0, scaling="linear", factor=4.0),
                                  (ref_inv_freq(64, 10000.0) / 4).astype(np.float32))
    # llama3: the highest frequencies stay, the lowest are divided by factor.
    plain = ref_inv_freq(128, 500000.0)
    llama3 = ignis.rope_inv_freq(128, 500000.0, scaling="llama3", factor=8.0, low_freq_factor=1.0,
                                 high_freq_factor=4.0, original_max_position_embeddings=8192)
    assert llama3[0] == np.float32(plain[0])
    assert llama3[-1] == np.float32(plain[-1] / 8)
    assert ignis.rope_attention_factor() == 1.0
    assert ignis.rope_attention_factor("yarn", 4.0) == pytest.approx(0.1 * np.log(4.0) + 1, rel=1e-7)


def rope_case(rng, shape, dtype):
    batch, seqlen, heads, head_dim, rotary_dim = shape
    x = normal(rng, (batch, seqlen, heads, head_dim), NUMPY_DTYPES[dtype])
    return x, ignis.rope_inv_freq(rotary_dim, 10000.0)


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_rope_numpy(rng, dtype, shape, interleaved):
    x, inv_freq = rope_case(rng, shape, dtype)
    offsets = np.arange(shape[0], dtype=np.int32) * 7 + 3
    kwargs = dict(interleaved=interleaved, position_offset=1000, batch_offsets=offsets, attention_factor=1.25)
    y = ignis.rope(x, inv_freq, **kwargs)
    assert type(y) is np.ndarray and y.dtype == x.dtype and y.shape == x.shape
    ref = ref_rope(computed_as(x), inv_freq, **kwargs)
    assert_close(y, ref, dtype, scale=np.max(np.abs(ref)))
    dx = ignis.rope_backward(x, inv_freq, **kwargs)
    ref_dx = ref_rope(computed_as(x), inv_freq, **kwargs, sign=-1.0)
    assert_close(dx, ref_dx, dtype, scale=np.max(np.abs(ref_dx)))


def test_rope_numpy_partial_rotary_dim_passes_the_rest_through(rng):
    x = normal(rng, (2, 9, 3, 16), np.float32)
    inv_freq = ignis.rope_inv_freq(8)
    y = ignis.rope(x, inv_freq, rotary_dim=8)
    np.testing.assert_array_equal(y[..., 8:], x[..., 8:])
    assert_close(y, ref_rope(x, inv_freq), "f32", scale=np.max(np.abs(x)))


X4 = np.ones((1, 2, 2, 8), np.float32)
F4 = np.ones(4, np.float32)

BAD_CALLS = {
    "inv_freq dtype": (lambda: ignis.rope(X4, F4.astype(np.float64)),
                       "rope_forward: inv_freq.dtype: expected f32, got f64"),
    "inv_freq length": (lambda: ignis.rope(X4, F4, rotary_dim=4),
                        "rope_forward: inv_freq.shape: expected [2], got [4]"),
    "odd rotary_dim": (lambda: ignis.rope(X4, F4[:1], rotary_dim=3),
                       "rope_forward: args.rotary_dim: expected even, in (0, head_dim = 8], got 3"),
    "rank": (lambda: ignis.rope(X4[0], F4), "rope_forward: x.dim: expected 4, got 3"),
    "negative offset": (lambda: ignis.rope(X4, F4, position_offset=-1),
                        "rope_forward: args.position_offset: expected >= 0, got -1"),
    "batch_offsets dtype": (lambda: ignis.rope(X4, F4, batch_offsets=np.zeros(1, np.int64)),
                            "rope_forward: args.batch_offsets.dtype: expected i32, got i64"),
    "backward names dy": (lambda: ignis.rope_backward(X4[0], F4), "rope_backward: dy.dim: expected 4, got 3"),
    "scaling name": (lambda: ignis.rope_inv_freq(8, scaling="dynamic"),
                     'rope_inv_freq: scaling: expected "none", "linear", "ntk", "llama3" or "yarn", got "dynamic"'),
}


test_rope_bad_arguments = bad_arguments_test(BAD_CALLS)


def test_rope_inv_freq_bad_rotary_dim():
    with pytest.raises(ignis.Error, match="rotary_dim"):
        ignis.rope_inv_freq(7)


# ---- torch on a GPU ------------------------------------------------------------------------------


def torch_rope(torch, x, inv_freq, position_offset):
    """HF Llama's rotate-half RoPE: cos/sin from fp32 angles, cast to x's dtype, then x * cos +
    rotate_half(x) * sin in x's dtype: the naive same-precision computation."""
    seqlen, d = x.shape[1], 2 * inv_freq.shape[0]
    pos = torch.arange(position_offset, position_offset + seqlen, device=x.device, dtype=torch.float32)
    angles = torch.outer(pos, inv_freq)
    emb = torch.cat([angles, angles], dim=-1)[None, :, None, :]
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    rot, rest = x[..., :d], x[..., d:]
    half = torch.cat([-rot[..., d // 2 :], rot[..., : d // 2]], dim=-1)
    return torch.cat([rot * cos + half * sin, rest], dim=-1)


@pytest.mark.parametrize("shape", [(1, 4096, 32, 128, 128), (2, 17, 3, 64, 64), (3, 5, 2, 80, 32), (1, 1, 1, 2, 2)])
@pytest.mark.parametrize("dtype", CUDA_DTYPES)
def test_rope_cuda(cuda, rng, dtype, shape):
    torch = cuda
    batch, seqlen, heads, head_dim, rotary_dim = shape
    x = cuda_normal(torch, rng, (batch, seqlen, heads, head_dim), dtype)
    inv_freq = torch.from_numpy(ignis.rope_inv_freq(rotary_dim, 10000.0)).cuda()
    offset = 100
    y = ignis.rope(x, inv_freq, position_offset=offset)
    assert isinstance(y, torch.Tensor) and y.device == x.device and y.dtype == x.dtype and y.shape == x.shape
    x64, f64 = to_numpy64(x), to_numpy64(inv_freq)
    naive = torch_rope(torch, x, inv_freq, offset)
    assert_within_naive(to_numpy64(y), ref_rope(x64, f64, position_offset=offset), to_numpy64(naive), dtype, "y")
    # The backward is the transpose: rotating back recovers x within the format's rounding.
    dx = ignis.rope_backward(x, inv_freq, position_offset=offset)
    naive_back = torch_rope(torch, x, -inv_freq, offset)
    assert_within_naive(to_numpy64(dx), ref_rope(x64, f64, position_offset=offset, sign=-1.0), to_numpy64(naive_back),
                        dtype, "dx")


@pytest.mark.parametrize("dtype", CUDA_DTYPES)
def test_rope_cuda_matches_cpu_options(cuda, rng, dtype):
    """Interleaved pairs, partial rotary_dim, batch offsets and attention_factor on the GPU against
    the fp64 reference; the same call on a numpy f32 copy gives the f32 CPU result."""
    torch = cuda
    x = cuda_normal(torch, rng, (3, 19, 4, 96), dtype)
    inv_freq_np = ignis.rope_inv_freq(64, 500000.0, scaling="llama3", factor=8.0)
    inv_freq = torch.from_numpy(inv_freq_np).cuda()
    offsets = torch.tensor([0, 5, 1000], dtype=torch.int32, device="cuda")
    kwargs = dict(interleaved=True, position_offset=7, attention_factor=1.1)
    y = ignis.rope(x, inv_freq, batch_offsets=offsets, **kwargs)
    ref = ref_rope(to_numpy64(x), inv_freq_np, batch_offsets=offsets.cpu().numpy(), **kwargs)
    naive = ref.astype(np.float32)
    if dtype != "f32":
        naive = torch.from_numpy(naive).to(torch_dtype(torch, dtype)).double().numpy()
    assert_within_naive(to_numpy64(y), ref, naive, dtype, "y")
    y_cpu = ignis.rope(x.float().cpu().numpy(), inv_freq_np, batch_offsets=offsets.cpu().numpy(), **kwargs)
    assert_close(to_numpy64(y), y_cpu, dtype, scale=np.max(np.abs(ref)))


def test_rope_cuda_bad_arguments(cuda):
    torch = cuda
    x = torch.zeros((1, 2, 2, 8), device="cuda")
    with raises("rope_forward: inv_freq.device: expected cuda:0, got cpu"):
        ignis.rope(x, torch.ones(4))
