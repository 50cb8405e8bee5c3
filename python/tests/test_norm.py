"""ignis.rms_norm / layer_norm and their backward passes: numpy against fp64 references, torch on a
GPU against torch.nn.functional."""
import numpy as np
import pytest

import ignis
from helpers import (CUDA_DTYPES, NUMPY_DTYPES, ODD_SHAPES, bad_arguments_test, computed_as, cuda_normal, normal,
                     raises, to_numpy64)
from reference import (assert_close, assert_within_naive, ref_layer_norm, ref_layer_norm_backward, ref_rms_norm,
                       ref_rms_norm_backward)


def finite_diff(f, x, dy, h=1e-6):
    """sum(dy * df/dx) by central differences, per entry of x."""
    out = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[idx] = h
        out[idx] = np.sum(dy * (f(x + step) - f(x - step))) / (2 * h)
    return out


def test_reference_norm_backward_matches_finite_differences(rng):
    x, dy = rng.standard_normal((3, 6)), rng.standard_normal((3, 6))
    w, b = rng.standard_normal(6), rng.standard_normal(6)
    eps = 1e-3
    dx, dw = ref_rms_norm_backward(x, w, dy, eps)
    np.testing.assert_allclose(dx, finite_diff(lambda t: ref_rms_norm(t, w, eps), x, dy), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(dw, finite_diff(lambda t: ref_rms_norm(x, t, eps), w, dy), rtol=1e-6, atol=1e-8)
    dx, dw, db = ref_layer_norm_backward(x, w, dy, eps)
    np.testing.assert_allclose(dx, finite_diff(lambda t: ref_layer_norm(t, w, b, eps), x, dy), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(dw, finite_diff(lambda t: ref_layer_norm(x, t, b, eps), w, dy), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(db, finite_diff(lambda t: ref_layer_norm(x, w, t, eps), b, dy), rtol=1e-6, atol=1e-8)


def test_reference_norm_hand_values():
    np.testing.assert_allclose(ref_rms_norm([[3.0, 4.0]], [1.0, 2.0], 0.0), [[3 / np.sqrt(12.5), 8 / np.sqrt(12.5)]])
    np.testing.assert_allclose(ref_layer_norm([[1.0, 3.0]], [1.0, 1.0], [0.5, 0.5], 0.0), [[-0.5, 1.5]])


def cancelled_scale(x, w, dy, second_moment, eps):
    """max |r * dy * w|: the size of the terms dx cancels (a dim-1 row gives dx ~ 0 from terms of
    this size), to judge dx against."""
    x, w, dy = (np.asarray(t, dtype=np.float64) for t in (x, w, dy))
    r = 1.0 / np.sqrt(second_moment(x)[:, None] + eps)
    return np.max(np.abs(r * dy * w))


def mean_square(x):
    return np.mean(x * x, axis=-1)


def variance(x):
    return np.var(x, axis=-1)


def inputs(rng, shape, dtype, n_extra):
    t = NUMPY_DTYPES[dtype]
    x = normal(rng, shape, t, scale=2.0) + t(0.5)
    extra = [normal(rng, shape[1:], t) for _ in range(n_extra)]
    return x, extra


# eps 0.5 is large enough that dropping it (or using another) fails the test.
@pytest.mark.parametrize("eps", [1e-5, 0.5])
@pytest.mark.parametrize("shape", ODD_SHAPES)
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_rms_norm_numpy(rng, dtype, shape, eps):
    x, (w,) = inputs(rng, shape, dtype, 1)
    y = ignis.rms_norm(x, w, eps)
    assert type(y) is np.ndarray and y.dtype == x.dtype and y.shape == x.shape
    assert_close(y, ref_rms_norm(computed_as(x), computed_as(w), eps), dtype)
    dy = normal(rng, shape, x.dtype)
    dx, dw = ignis.rms_norm_backward(x, w, dy, eps)
    assert dx.shape == x.shape and dw.shape == w.shape and dw.dtype == x.dtype
    ref_dx, ref_dw = ref_rms_norm_backward(computed_as(x), computed_as(w), computed_as(dy), eps)
    assert_close(dx, ref_dx, dtype, scale=cancelled_scale(*map(computed_as, (x, w, dy)), mean_square, eps))
    assert_close(dw, ref_dw, dtype, scale=np.max(np.abs(ref_dw)))


@pytest.mark.parametrize("eps", [1e-5, 0.5])
@pytest.mark.parametrize("shape", ODD_SHAPES)
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_layer_norm_numpy(rng, dtype, shape, eps):
    x, (w, b) = inputs(rng, shape, dtype, 2)
    y = ignis.layer_norm(x, w, b, eps)
    assert type(y) is np.ndarray and y.dtype == x.dtype and y.shape == x.shape
    # xhat * w + b cancels to ~0 in places: judged against the largest output.
    ref_y = ref_layer_norm(computed_as(x), computed_as(w), computed_as(b), eps)
    assert_close(y, ref_y, dtype, scale=np.max(np.abs(ref_y)))
    dy = normal(rng, shape, x.dtype)
    dx, dw, db = ignis.layer_norm_backward(x, w, dy, eps)
    ref_dx, ref_dw, ref_db = ref_layer_norm_backward(computed_as(x), computed_as(w), computed_as(dy), eps)
    assert_close(dx, ref_dx, dtype, scale=cancelled_scale(*map(computed_as, (x, w, dy)), variance, eps))
    assert_close(dw, ref_dw, dtype, scale=np.max(np.abs(ref_dw)))
    assert_close(db, ref_db, dtype, scale=np.max(np.abs(ref_db)))


NX = np.ones((2, 8), np.float32)
NW = np.ones(8, np.float32)

BAD_CALLS = {
    "weight not an array": (lambda: ignis.rms_norm(NX, 1.0),
                            "rms_norm: weight: expected a numpy array or a torch tensor, got float"),
    "weight shape": (lambda: ignis.rms_norm(NX, NW[:7]), "rmsnorm_forward: weight.shape: expected [8], got [7]"),
    "weight dtype": (lambda: ignis.layer_norm(NX, NW.astype(np.float64), NW),
                     "layernorm_forward: weight.dtype: expected f32, got f64"),
    "bias shape": (lambda: ignis.layer_norm(NX, NW, NW[:3]), "layernorm_forward: bias.shape: expected [8], got [3]"),
    "rank": (lambda: ignis.layer_norm(NX[0], NW, NW), "layernorm_forward: x.dim: expected 2, got 1"),
    "negative eps": (lambda: ignis.rms_norm(NX, NW, -1.0), "rmsnorm_forward: eps: expected finite and >= 0, got -1"),
    "not contiguous": (lambda: ignis.rms_norm(np.ones((8, 2), np.float32).T, NW),
                       "rmsnorm_forward: x.strides: expected contiguous [8, 1], got [1, 2]"),
    "backward dy shape": (lambda: ignis.rms_norm_backward(NX, NW, NX[:1]),
                          "rmsnorm_backward: dy.shape: expected [2, 8], got [1, 8]"),
    "backward dy dtype": (lambda: ignis.layer_norm_backward(NX, NW, NX.astype(np.float16)),
                          "layernorm_backward: dy.dtype: expected f32, got f16"),
    "integer x": (lambda: ignis.rms_norm(NX.astype(np.int32), NW.astype(np.int32)),
                  "rmsnorm_forward: x.dtype on cpu: expected f32, got i32"),
}


test_norm_bad_arguments = bad_arguments_test(BAD_CALLS)


# ---- torch on a GPU ------------------------------------------------------------------------------

CUDA_SHAPES = [(1, 1), (3, 17), (17, 113), (5, 1023), (4, 4096), (3, 8192), (2, 16384), (2, 5000)]


def torch_rms_norm(torch, x, w, eps):
    f = getattr(torch.nn.functional, "rms_norm", None)
    if f is not None:
        return f(x, (x.shape[-1],), w, eps)
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def torch_grads(torch, fn, tensors, dy):
    """fn(*tensors) backpropagated from dy, in the tensors' own dtype (torch's naive gradients)."""
    leaves = [t.detach().clone().requires_grad_() for t in tensors]
    fn(*leaves).backward(dy)
    return [leaf.grad for leaf in leaves]


@pytest.mark.parametrize("shape", CUDA_SHAPES)
@pytest.mark.parametrize("dtype", CUDA_DTYPES)
def test_rms_norm_cuda(cuda, rng, dtype, shape):
    torch = cuda
    x = cuda_normal(torch, rng, shape, dtype, scale=2.0)
    w = cuda_normal(torch, rng, shape[1:], dtype)
    dy = cuda_normal(torch, rng, shape, dtype)
    eps = 1e-6
    y = ignis.rms_norm(x, w, eps)
    assert isinstance(y, torch.Tensor) and y.device == x.device and y.dtype == x.dtype and y.shape == x.shape
    x64, w64, dy64 = to_numpy64(x), to_numpy64(w), to_numpy64(dy)
    assert_within_naive(to_numpy64(y), ref_rms_norm(x64, w64, eps), to_numpy64(torch_rms_norm(torch, x, w, eps)),
                        dtype, "y")
    dx, dw = ignis.rms_norm_backward(x, w, dy, eps)
    assert dx.dtype == x.dtype and dw.dtype == x.dtype and dw.shape == w.shape
    naive_dx, naive_dw = torch_grads(torch, lambda a, b: torch_rms_norm(torch, a, b, eps), [x, w], dy)
    ref_dx, ref_dw = ref_rms_norm_backward(x64, w64, dy64, eps)
    assert_within_naive(to_numpy64(dx), ref_dx, to_numpy64(naive_dx), dtype, "dx",
                        scale=cancelled_scale(x64, w64, dy64, mean_square, eps))
    assert_within_naive(to_numpy64(dw), ref_dw, to_numpy64(naive_dw), dtype, "dweight")


@pytest.mark.parametrize("shape", CUDA_SHAPES)
@pytest.mark.parametrize("dtype", CUDA_DTYPES)
def test_layer_norm_cuda(cuda, rng, dtype, shape):
    torch = cuda
    F = torch.nn.functional
    x = cuda_normal(torch, rng, shape, dtype, scale=2.0) + 0.5
    w, b = cuda_normal(torch, rng, shape[1:], dtype), cuda_normal(torch, rng, shape[1:], dtype)
    dy = cuda_normal(torch, rng, shape, dtype)
    eps = 1e-5
    y = ignis.layer_norm(x, w, b, eps)
    assert isinstance(y, torch.Tensor) and y.device == x.device and y.dtype == x.dtype and y.shape == x.shape
    x64, w64, b64, dy64 = to_numpy64(x), to_numpy64(w), to_numpy64(b), to_numpy64(dy)
    naive = F.layer_norm(x, (shape[-1],), w, b, eps)
    assert_within_naive(to_numpy64(y), ref_layer_norm(x64, w64, b64, eps), to_numpy64(naive), dtype, "y")
    dx, dw, db = ignis.layer_norm_backward(x, w, dy, eps)
    naive_dx, naive_dw, naive_db = torch_grads(torch, lambda a, c, d: F.layer_norm(a, (shape[-1],), c, d, eps),
                                               [x, w, b], dy)
    ref_dx, ref_dw, ref_db = ref_layer_norm_backward(x64, w64, dy64, eps)
    assert_within_naive(to_numpy64(dx), ref_dx, to_numpy64(naive_dx), dtype, "dx",
                        scale=cancelled_scale(x64, w64, dy64, variance, eps))
    assert_within_naive(to_numpy64(dw), ref_dw, to_numpy64(naive_dw), dtype, "dweight")
    assert_within_naive(to_numpy64(db), ref_db, to_numpy64(naive_db), dtype, "dbias")


def test_norm_cuda_bad_arguments(cuda):
    torch = cuda
    x = torch.zeros((4, 8), device="cuda")
    with raises("rmsnorm_forward: weight.device: expected cuda:0, got cpu"):
        ignis.rms_norm(x, torch.ones(8))
    with raises("layernorm_forward: x.dtype on cuda:0: expected f32, f16 or bf16, got f64"):
        ignis.layer_norm(x.double(), torch.ones(8, device="cuda").double(), torch.ones(8, device="cuda").double())
