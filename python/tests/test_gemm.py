"""ignis.gemm_nn / gemm_nt and ignis.transpose: numpy against float64 products, torch on a GPU against
torch.matmul in the same dtype."""
import numpy as np
import pytest

import ignis
from helpers import (CUDA_DTYPES, NUMPY_DTYPES, bad_arguments_test, computed_as, cuda_normal, normal, to_numpy64,
                     torch_dtype)
from reference import assert_close, assert_within_naive

# (batch or None for one matrix, m, n, k)
SHAPES = [(None, 1, 1, 1), (None, 17, 33, 65), (3, 5, 7, 9), (2, 64, 48, 130), (1, 128, 1, 1023)]


def operands(rng, shape, t, trans_b):
    batch, m, n, k = shape
    lead = () if batch is None else (batch,)
    a = normal(rng, lead + (m, k), t)
    b = normal(rng, lead + ((n, k) if trans_b else (k, n)), t)
    return a, b


def product(a, b, trans_b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return a @ (np.swapaxes(b, -1, -2) if trans_b else b)


@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_gemm_numpy(rng, dtype, shape, trans_b):
    t = NUMPY_DTYPES[dtype]
    a, b = operands(rng, shape, t, trans_b)
    gemm = ignis.gemm_nt if trans_b else ignis.gemm_nn
    c = gemm(a, b)
    ref = product(computed_as(a), computed_as(b), trans_b)
    assert type(c) is np.ndarray and c.dtype == t and c.shape == ref.shape
    # An fp32 sum of k unit-sized products drifts by ~eps * k: judged against k.
    k = a.shape[-1]
    assert_close(c, ref, dtype, scale=k)
    # alpha and beta accumulate into a given c, in place.
    c0 = normal(rng, ref.shape, t)
    before = computed_as(c0).astype(np.float64)
    out = gemm(a, b, c0, alpha=0.5, beta=-2.0)
    assert out is c0
    assert_close(c0, 0.5 * ref - 2.0 * before, dtype, scale=k)


@pytest.mark.parametrize("shape", [(1, 1), (3, 17), (2, 33, 65), (4, 1023, 7)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int32, np.uint8])
def test_transpose_numpy(rng, dtype, shape):
    x = (rng.standard_normal(shape) * 50).astype(dtype)
    y = ignis.transpose(x)
    assert type(y) is np.ndarray and y.dtype == x.dtype and y.flags.c_contiguous
    np.testing.assert_array_equal(y, np.swapaxes(x, -1, -2))


A = np.ones((2, 3), np.float32)

BAD_CALLS = {
    "inner size": (lambda: ignis.gemm_nn(A, A), "gemm_nn: b.shape: expected [3, 3], got [2, 3]"),
    "nt inner size": (lambda: ignis.gemm_nt(A, A.T.copy()), "gemm_nt: b.shape: expected [3, 3], got [3, 2]"),
    "rank": (lambda: ignis.gemm_nn(A[0], A), "gemm_nn: a.dim: expected 2 or 3, got 1"),
    "mixed ranks": (lambda: ignis.gemm_nn(A[None], A.T.copy()), "gemm_nn: b.dim: expected 3, got 2"),
    "dtype": (lambda: ignis.gemm_nn(A, np.ones((3, 2))), "gemm_nn: b.dtype: expected f32, got f64"),
    "beta without c": (lambda: ignis.gemm_nn(A, A.T.copy(), beta=1.0),
                       "gemm_nn: c: expected an array to accumulate into when beta != 0, got None"),
    "read-only c": (lambda: ignis.gemm_nn(A, A.T.copy(), np.broadcast_to(np.float32(0), (2, 2))),
                    "gemm_nn: c: expected a writable array, got a read-only array"),
    "c shape": (lambda: ignis.gemm_nn(A, A.T.copy(), np.zeros((2, 3), np.float32)),
                "gemm_nn: c.shape: expected [2, 2], got [2, 3]"),
    "transpose rank": (lambda: ignis.transpose(A[0]), "transpose: x.dim: expected 2 or 3, got 1"),
}


test_gemm_bad_arguments = bad_arguments_test(BAD_CALLS)


# ---- torch on a GPU ------------------------------------------------------------------------------


@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("shape", SHAPES + [(None, 4096, 4096, 4096), (8, 128, 256, 128), (None, 1, 4096, 4096)])
@pytest.mark.parametrize("dtype", ["f64"] + CUDA_DTYPES)
def test_gemm_cuda(cuda, rng, dtype, shape, trans_b):
    torch = cuda
    batch, m, n, k = shape
    lead = () if batch is None else (batch,)
    a = cuda_normal(torch, rng, lead + (m, k), dtype)
    b = cuda_normal(torch, rng, lead + ((n, k) if trans_b else (k, n)), dtype)
    c = (ignis.gemm_nt if trans_b else ignis.gemm_nn)(a, b)
    assert isinstance(c, torch.Tensor) and c.dtype == a.dtype and c.device == a.device
    naive = torch.matmul(a, b.transpose(-1, -2) if trans_b else b)
    assert c.shape == naive.shape
    ref = product(to_numpy64(a), to_numpy64(b), trans_b)
    # f32/f64 accumulation drifts by ~eps * k (the floor's scale); f16/bf16 errors are the output's rounding.
    scale = None if dtype in ("f16", "bf16") else k
    assert_within_naive(to_numpy64(c), ref, to_numpy64(naive), dtype, "c", scale=scale)


def test_gemm_cuda_accumulates_in_place(cuda, rng):
    torch = cuda
    a, b = cuda_normal(torch, rng, (2, 33, 17), "f32"), cuda_normal(torch, rng, (2, 17, 9), "f32")
    c = cuda_normal(torch, rng, (2, 33, 9), "f32")
    want = 2.0 * torch.matmul(a, b) + 0.5 * c
    assert ignis.gemm_nn(a, b, c, alpha=2.0, beta=0.5) is c
    assert torch.allclose(c, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(1, 1), (3, 17), (4096, 4096), (8, 1023, 129), (32, 128, 4096)])
@pytest.mark.parametrize("dtype", ["f64", "f32", "bf16", "f16"])
def test_transpose_cuda(cuda, rng, dtype, shape):
    torch = cuda
    x = cuda_normal(torch, rng, shape, dtype)
    y = ignis.transpose(x)
    assert y.dtype == x.dtype and y.is_contiguous()
    assert torch.equal(y, x.transpose(-1, -2))
    assert torch_dtype(torch, dtype) == y.dtype
