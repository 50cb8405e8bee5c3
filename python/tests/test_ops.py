"""ignis's Python ops against fp64 numpy references: numpy arrays on the CPU (what CI runs), torch
tensors on the CPU and on a GPU (skipped without torch or without a GPU), and bad arguments."""
import re

import numpy as np
import pytest

import ignis
from helpers import (CUDA_DTYPES, NUMPY_DTYPES, ODD_SHAPES, bad_arguments_test, computed_as, cuda_normal, normal,
                     to_numpy64, torch_dtype)
from reference import assert_close, ref_softmax, ref_softmax_backward

# ---- the references themselves -------------------------------------------------------------------


def test_reference_softmax_hand_values():
    np.testing.assert_allclose(ref_softmax([[0.0, np.log(3.0)]]), [[0.25, 0.75]], rtol=1e-15)
    np.testing.assert_allclose(ref_softmax([[1000.0, 1000.0, -np.inf]]), [[0.5, 0.5, 0.0]], rtol=1e-15)
    assert np.array_equal(ref_softmax([[-np.inf, -np.inf]]), [[0.0, 0.0]])


def test_reference_softmax_backward_matches_finite_differences(rng):
    x = rng.standard_normal((3, 7))
    dy = rng.standard_normal((3, 7))
    h = 1e-6
    numeric = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[idx] = h
        numeric[idx] = np.sum(dy * (ref_softmax(x + step) - ref_softmax(x - step))) / (2 * h)
    np.testing.assert_allclose(ref_softmax_backward(ref_softmax(x), dy), numeric, rtol=1e-6, atol=1e-9)


# ---- numpy on the CPU ----------------------------------------------------------------------------


@pytest.mark.parametrize("shape", ODD_SHAPES)
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_softmax_numpy(rng, dtype, shape):
    x = normal(rng, shape, NUMPY_DTYPES[dtype], scale=3.0)
    before = x.copy()
    y = ignis.softmax(x)
    assert type(y) is np.ndarray and y.dtype == x.dtype and y.shape == x.shape and y.flags.c_contiguous
    assert not np.shares_memory(x, y)
    assert_close(y, ref_softmax(computed_as(x)), dtype)
    assert np.array_equal(x, before), "softmax wrote into its input"


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_softmax_numpy_large_logits_and_masks(rng, dtype):
    x = normal(rng, (6, 113), np.float64, scale=50.0)
    x[:, ::3] = -np.inf
    x[0, :] = -np.inf
    x = x.astype(NUMPY_DTYPES[dtype])
    y = ignis.softmax(x)
    assert_close(y, ref_softmax(computed_as(x)), dtype)
    assert np.all(y[0] == 0), "a fully masked row must give zeros"


def test_softmax_numpy_read_only_and_empty(rng):
    x = normal(rng, (2, 9), np.float32)
    x.setflags(write=False)
    assert_close(ignis.softmax(x), ref_softmax(x), "f32")
    assert ignis.softmax(np.zeros((0, 4), np.float32)).shape == (0, 4)
    assert ignis.softmax(np.zeros((3, 0), np.float16)).shape == (3, 0)


@pytest.mark.parametrize("shape", [(1, 1), (3, 17), (7, 1023)])
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_softmax_backward_numpy(rng, dtype, shape):
    t = NUMPY_DTYPES[dtype]
    y = ref_softmax(normal(rng, shape, np.float64, scale=2.0)).astype(t)
    dy = normal(rng, shape, t)
    dx = ignis.softmax_backward(y, dy)
    assert type(dx) is np.ndarray and dx.dtype == t and dx.shape == shape
    assert_close(dx, ref_softmax_backward(computed_as(y), computed_as(dy)), dtype)


def cast_expected(x, dst):
    # ignis rounds to f16 (and bf16) from f32, as the GPU does; numpy's f64 -> f16 rounds once.
    return x.astype(np.float32).astype(dst) if dst == np.float16 else x.astype(dst)


@pytest.mark.parametrize("dst", NUMPY_DTYPES)
@pytest.mark.parametrize("src", NUMPY_DTYPES)
def test_cast_numpy(rng, src, dst):
    x = normal(rng, (5, 37), np.float64, scale=100.0)
    # Signed zeros, infinities, NaN, the f16 overflow edge (65519 rounds down, 65520 up to inf),
    # f16 subnormals, and ties at f16 precision (2049, 2051 round to even).
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 65519.0, 65520.0, 1e-6, -3e-8, 2049.0, 2051.0, 1 / 3]
    x.flat[: len(specials)] = specials
    with np.errstate(over="ignore"):
        x = x.astype(NUMPY_DTYPES[src])
        want = cast_expected(x, NUMPY_DTYPES[dst])
    got = ignis.cast(x, dst)
    assert type(got) is np.ndarray and got.dtype == want.dtype and got.shape == x.shape
    assert not np.shares_memory(x, got)
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))


# ---- bad arguments: ignis.Error, naming the argument ---------------------------------------------

X = np.linspace(-1.0, 1.0, 32, dtype=np.float32).reshape(4, 8)

BAD_CALLS = {
    "not an array": (lambda: ignis.softmax([[1.0, 2.0]]),
                     "softmax: x: expected a numpy array or a torch tensor, got list"),
    "dtype unknown to ignis": (lambda: ignis.softmax(X.astype(np.int16)),
                               "softmax: x.dtype: expected f64, f32, f16, bf16, i32, i64 or u8, got int16"),
    "dtype without softmax": (lambda: ignis.softmax(X.astype(np.int32)),
                              "softmax_forward: x.dtype on cpu: expected f32, got i32"),
    "rank": (lambda: ignis.softmax(X[0]), "softmax_forward: x.dim: expected 2, got 1"),
    "not contiguous": (lambda: ignis.softmax(X.T),
                       "softmax_forward: x.strides: expected contiguous [4, 1], got [1, 8]"),
    "backward shape": (lambda: ignis.softmax_backward(X, X[:3]),
                       "softmax_backward: dy.shape: expected [4, 8], got [3, 8]"),
    "backward dtype": (lambda: ignis.softmax_backward(X, X.astype(np.float64)),
                       "softmax_backward: dy.dtype: expected f32, got f64"),
    "backward dtype (staged)": (lambda: ignis.softmax_backward(X.astype(np.float64), X),
                                "softmax_backward: dy.dtype: expected f64, got f32"),
    "cast to bf16 numpy": (lambda: ignis.cast(X, "bf16"), "cast: dtype: expected f64, f32, f16, i32, i64 or u8 "
                           "for a numpy result (numpy has no bf16), got bf16"),
    "cast dtype name": (lambda: ignis.cast(X, "int8"),
                        'cast: dtype: expected "f64", "f32", "f16" or "bf16", got "int8"'),
    "cast integer source": (lambda: ignis.cast(X.astype(np.int32), "f32"),
                            "cast: dtypes: expected floating (f64, f32, f16, bf16), got i32 -> f32"),
}


test_bad_arguments_raise_naming_the_argument = bad_arguments_test(BAD_CALLS)


def test_error_is_value_error_and_runtime_error():
    assert issubclass(ignis.Error, ValueError) and issubclass(ignis.Error, RuntimeError)
    with pytest.raises(ValueError, match="x.dim"):
        ignis.softmax(X[0])


# ---- torch on the CPU ----------------------------------------------------------------------------


def test_softmax_torch_cpu_returns_torch(torch, rng):
    x = torch.from_numpy(normal(rng, (3, 50), np.float32))
    y = ignis.softmax(x)
    assert isinstance(y, torch.Tensor) and y.device.type == "cpu" and y.dtype == torch.float32
    assert_close(to_numpy64(y), ref_softmax(to_numpy64(x)), "f32")
    # bf16 exists in torch only; the CPU path goes through f32.
    xb = x.to(torch.bfloat16).requires_grad_()
    yb = ignis.softmax(xb)
    assert yb.dtype == torch.bfloat16
    assert_close(to_numpy64(yb), ref_softmax(to_numpy64(xb)), "bf16")


def test_cast_torch_cpu_matches_torch(torch, rng):
    x = torch.from_numpy(normal(rng, (7, 33), np.float32, scale=100.0))
    for name in ("bf16", "f16", "f64"):
        got = ignis.cast(x, name)
        assert got.dtype == torch_dtype(torch, name)
        assert torch.equal(got, x.to(got.dtype))


# ---- torch on a GPU ------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", ODD_SHAPES + [(4, 4096), (3, 32768), (2, 128256)])
@pytest.mark.parametrize("dtype", CUDA_DTYPES)
def test_softmax_cuda(cuda, rng, dtype, shape):
    torch = cuda
    x = cuda_normal(torch, rng, shape, dtype, scale=3.0)
    y = ignis.softmax(x)
    assert isinstance(y, torch.Tensor) and y.device == x.device and y.dtype == x.dtype and y.shape == x.shape
    assert y.is_contiguous()
    ref = ref_softmax(to_numpy64(x))
    assert_close(to_numpy64(y), ref, dtype)
    assert_close(to_numpy64(y), to_numpy64(torch.softmax(x, dim=-1)), dtype)


@pytest.mark.parametrize("dtype", CUDA_DTYPES)
def test_softmax_cuda_large_logits_and_masks(cuda, rng, dtype):
    torch = cuda
    x = cuda_normal(torch, rng, (6, 1031), "f64", scale=50.0)
    x[:, ::3] = -float("inf")
    x[0, :] = -float("inf")
    x = x.to(torch_dtype(torch, dtype))
    y = ignis.softmax(x)
    assert_close(to_numpy64(y), ref_softmax(to_numpy64(x)), dtype)
    assert bool((y[0] == 0).all()), "a fully masked row must give zeros"


@pytest.mark.parametrize("shape", [(1, 1), (3, 17), (7, 1023), (4, 4096), (2, 32000)])
@pytest.mark.parametrize("dtype", CUDA_DTYPES)
def test_softmax_backward_cuda(cuda, rng, dtype, shape):
    torch = cuda
    y = torch.softmax(cuda_normal(torch, rng, shape, "f32", scale=2.0), dim=-1).to(torch_dtype(torch, dtype))
    dy = cuda_normal(torch, rng, shape, dtype)
    dx = ignis.softmax_backward(y, dy)
    assert dx.device == y.device and dx.dtype == y.dtype and dx.shape == y.shape
    assert_close(to_numpy64(dx), ref_softmax_backward(to_numpy64(y), to_numpy64(dy)), dtype)
    yf, dyf = y.float(), dy.float()
    by_torch = (yf * (dyf - (dyf * yf).sum(dim=-1, keepdim=True))).to(y.dtype)
    assert_close(to_numpy64(dx), to_numpy64(by_torch), dtype)


@pytest.mark.parametrize("dst", ["f64", "f32", "f16", "bf16"])
@pytest.mark.parametrize("src", ["f64", "f32", "f16", "bf16"])
def test_cast_cuda_matches_torch(cuda, rng, src, dst):
    torch = cuda
    x = cuda_normal(torch, rng, (3, 1000), "f64", scale=100.0)
    specials = [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 65519.0, 65520.0, 1e-6, 2049.0, 1e-40]
    x[0, : len(specials)] = torch.tensor(specials, dtype=torch.float64, device=x.device)
    x = x.to(torch_dtype(torch, src))
    got = ignis.cast(x, dst)
    assert got.device == x.device and got.dtype == torch_dtype(torch, dst)
    # ignis rounds to f16/bf16 from f32; so does torch from f32 (f64 sources go through f32 first).
    want = x.to(torch.float32).to(got.dtype) if src == "f64" and dst in ("f16", "bf16") else x.to(got.dtype)
    assert torch.equal(got.isnan(), want.isnan())
    same = (got == want) | (got.isnan() & want.isnan())
    assert bool(same.all()), f"{int((~same).sum())} elements differ from torch"
    assert torch.equal(torch.signbit(got) & ~got.isnan(), torch.signbit(want) & ~want.isnan())


def filled_late(torch, src):
    """A side stream and a tensor that the side stream fills with src only after spinning for tens
    of ms: an op that reads it on any other stream sees zeros."""
    if not hasattr(torch.cuda, "_sleep"):
        pytest.skip("torch.cuda._sleep is missing")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        x = torch.zeros_like(src)
        torch.cuda._sleep(100_000_000)
        x.copy_(src)
    return side, x


def test_cuda_runs_on_torch_current_stream(cuda, rng):
    torch = cuda
    src = cuda_normal(torch, rng, (256, 4096), "f32")
    side, x = filled_late(torch, src)
    with torch.cuda.stream(side):
        y = ignis.softmax(x)
    side.synchronize()
    assert_close(to_numpy64(y), ref_softmax(to_numpy64(src)), "f32")


def test_cuda_explicit_stream(cuda, rng):
    torch = cuda
    src = cuda_normal(torch, rng, (256, 4096), "f32")
    side, x = filled_late(torch, src)
    y = ignis.cast(x, "bf16", stream=side.cuda_stream)
    side.synchronize()
    assert torch.equal(y, src.to(torch.bfloat16))


def test_cuda_requires_grad_input(cuda, rng):
    torch = cuda
    x = cuda_normal(torch, rng, (3, 100), "f32").requires_grad_()
    y = ignis.softmax(x)
    assert not y.requires_grad
    assert_close(to_numpy64(y), ref_softmax(to_numpy64(x)), "f32")


def test_cuda_views_that_torch_resolves_lazily(cuda, rng):
    """A neg view records a pending negation instead of negating the data; the bindings export torch tensors
    through torch.utils.dlpack.to_dlpack, so they must resolve it first. A conj view (complex, which no op takes)
    and a sparse tensor, which torch may refuse to export, give an ignis.Error naming the argument."""
    torch = cuda
    x = cuda_normal(torch, rng, (3, 100), "f32")
    negated = torch._neg_view(x)
    assert negated.is_neg()
    assert_close(to_numpy64(ignis.softmax(negated)), ref_softmax(-to_numpy64(x)), "f32")
    z = torch.zeros((2, 4), dtype=torch.complex64, device="cuda").conj()
    with pytest.raises(ignis.Error, match=r"^softmax: x(\.dtype)?: expected "):
        ignis.softmax(z)
    with pytest.raises(ignis.Error, match=r"^softmax: x: expected a numpy array or a torch tensor"):
        ignis.softmax(torch.zeros((2, 4), device="cuda").to_sparse())


def test_cuda_second_device(cuda, rng):
    torch = cuda
    if torch.cuda.device_count() < 2:
        pytest.skip("one GPU")
    x = cuda_normal(torch, rng, (5, 777), "bf16", device="cuda:1")
    y = ignis.softmax(x)
    assert y.device == x.device
    assert_close(to_numpy64(y), ref_softmax(to_numpy64(x)), "bf16")


def test_cuda_bad_arguments(cuda):
    torch = cuda
    x = torch.zeros((4, 8), device="cuda")
    message = "softmax_forward: x.dtype on cuda:0: expected f32, f16 or bf16, got f64"
    with pytest.raises(ignis.Error, match=re.escape(message)):
        ignis.softmax(x.double())
    with pytest.raises(ignis.Error, match=re.escape("softmax_backward: dy.device: expected cuda:0, got cpu")):
        ignis.softmax_backward(x, x.cpu())
    with pytest.raises(ignis.Error, match=re.escape("softmax_forward: x.strides")):
        ignis.softmax(x.t())
