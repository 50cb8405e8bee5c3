"""ignis.gelu_tanh / silu / swiglu and their backward passes: numpy against fp64 references, torch on
a GPU against torch.nn.functional."""
import numpy as np
import pytest

import ignis
from helpers import CUDA_DTYPES, NUMPY_DTYPES, bad_arguments_test, computed_as, cuda_normal, normal, raises, to_numpy64
from reference import (assert_close, assert_within_naive, ref_gelu_tanh, ref_gelu_tanh_backward, ref_silu,
                       ref_silu_backward, ref_swiglu, ref_swiglu_backward)

SHAPES = [(1,), (3, 17), (5, 1023), (2, 3, 113), (7, 4099)]


def test_reference_activation_derivatives(rng):
    x = rng.standard_normal(50) * 3
    dy = rng.standard_normal(50)
    up = rng.standard_normal(50)
    h = 1e-6
    numeric = dy * (ref_gelu_tanh(x + h) - ref_gelu_tanh(x - h)) / (2 * h)
    np.testing.assert_allclose(ref_gelu_tanh_backward(x, dy), numeric, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(ref_silu_backward(x, dy), dy * (ref_silu(x + h) - ref_silu(x - h)) / (2 * h),
                               rtol=1e-7, atol=1e-9)
    dgate, dup = ref_swiglu_backward(x, up, dy)
    numeric = dy * (ref_swiglu(x + h, up) - ref_swiglu(x - h, up)) / (2 * h)
    np.testing.assert_allclose(dgate, numeric, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(dup, dy * ref_silu(x), rtol=1e-15)
    # 0.5 * (1 + math.tanh(math.sqrt(2 / math.pi) * 1.044715)), from Python's math module.
    np.testing.assert_allclose(ref_gelu_tanh([0.0, 1.0]), [0.0, 0.8411919906082768], rtol=1e-12)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_activations_numpy(rng, dtype, shape):
    t = NUMPY_DTYPES[dtype]
    x, up, dy = normal(rng, shape, t, 3.0), normal(rng, shape, t), normal(rng, shape, t)
    x32, up32, dy32 = computed_as(x), computed_as(up), computed_as(dy)
    for got, ref in [
        (ignis.gelu_tanh(x), ref_gelu_tanh(x32)),
        (ignis.silu(x), ref_silu(x32)),
        (ignis.swiglu(x, up), ref_swiglu(x32, up32)),
        (ignis.gelu_tanh_backward(x, dy), ref_gelu_tanh_backward(x32, dy32)),
        (ignis.silu_backward(x, dy), ref_silu_backward(x32, dy32)),
        *zip(ignis.swiglu_backward(x, up, dy), ref_swiglu_backward(x32, up32, dy32)),
    ]:
        assert type(got) is np.ndarray and got.dtype == t and got.shape == shape
        # In the negative tail 1 + tanh and the derivatives cancel terms of size ~1 (the inputs
        # are O(1)): errors there are absolute, so they are judged against max(1, largest output).
        assert_close(got, ref, dtype, scale=max(1.0, np.max(np.abs(ref))))


A = np.ones((2, 8), np.float32)

BAD_CALLS = {
    "not an array": (lambda: ignis.silu((1.0, 2.0)), "silu: x: expected a numpy array or a torch tensor, got tuple"),
    "swiglu shapes": (lambda: ignis.swiglu(A, A[:1]), "swiglu_forward: up.shape: expected [2, 8], got [1, 8]"),
    "backward dtype": (lambda: ignis.gelu_tanh_backward(A, A.astype(np.float64)),
                       "gelu_tanh_backward: dy.dtype: expected f32, got f64"),
    "integer": (lambda: ignis.gelu_tanh(A.astype(np.int64)),
                "gelu_tanh_forward: x.dtype on cpu: expected f32, got i64"),
    "not contiguous": (lambda: ignis.silu(np.ones((8, 2), np.float32).T),
                       "silu_forward: x.strides: expected contiguous [8, 1], got [1, 2]"),
    "swiglu_backward dout": (lambda: ignis.swiglu_backward(A, A, A[:, :4]),
                             "swiglu_backward: dout.shape: expected [2, 8], got [2, 4]"),
}


test_activation_bad_arguments = bad_arguments_test(BAD_CALLS)


# ---- torch on a GPU ------------------------------------------------------------------------------


def torch_grad(torch, fn, x, dy):
    leaf = x.detach().clone().requires_grad_()
    fn(leaf).backward(dy)
    return leaf.grad


@pytest.mark.parametrize("shape", [(1,), (3, 17), (2, 3, 113), (7, 4099), (4096, 1024)])
@pytest.mark.parametrize("dtype", CUDA_DTYPES)
def test_activations_cuda(cuda, rng, dtype, shape):
    torch = cuda
    F = torch.nn.functional
    x, up, dy = (cuda_normal(torch, rng, shape, dtype, s) for s in (3.0, 1.0, 1.0))
    x64, up64, dy64 = to_numpy64(x), to_numpy64(up), to_numpy64(dy)
    gelu = lambda t: F.gelu(t, approximate="tanh")  # noqa: E731
    cases = {
        "gelu_tanh": (ignis.gelu_tanh(x), ref_gelu_tanh(x64), gelu(x)),
        "silu": (ignis.silu(x), ref_silu(x64), F.silu(x)),
        "swiglu": (ignis.swiglu(x, up), ref_swiglu(x64, up64), F.silu(x) * up),
        "gelu_tanh_backward": (ignis.gelu_tanh_backward(x, dy), ref_gelu_tanh_backward(x64, dy64),
                               torch_grad(torch, gelu, x, dy)),
        "silu_backward": (ignis.silu_backward(x, dy), ref_silu_backward(x64, dy64), torch_grad(torch, F.silu, x, dy)),
    }
    dgate, dup = ignis.swiglu_backward(x, up, dy)
    ref_dgate, ref_dup = ref_swiglu_backward(x64, up64, dy64)
    cases["swiglu_backward dgate"] = (dgate, ref_dgate, torch_grad(torch, lambda g: F.silu(g) * up, x, dy))
    cases["swiglu_backward dup"] = (dup, ref_dup, torch_grad(torch, lambda u: F.silu(x) * u, up, dy))
    for name, (got, ref, naive) in cases.items():
        assert isinstance(got, torch.Tensor) and got.device == x.device and got.dtype == x.dtype
        assert got.shape == x.shape, name
        assert_within_naive(to_numpy64(got), ref, to_numpy64(naive), dtype, name)


def test_activation_cuda_bad_arguments(cuda):
    torch = cuda
    x = torch.zeros((4, 8), device="cuda")
    with raises("swiglu_forward: up.device: expected cuda:0, got cpu"):
        ignis.swiglu(x, x.cpu())
