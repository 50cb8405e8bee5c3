"""Inputs and conversions the Python tests share."""
import re

import numpy as np
import pytest

import ignis

NUMPY_DTYPES = {"f64": np.float64, "f32": np.float32, "f16": np.float16}
CUDA_DTYPES = ["f32", "f16", "bf16"]
ODD_SHAPES = [(1, 1), (3, 17), (17, 113), (5, 1023), (2, 5000)]


def normal(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def computed_as(x):
    """The values a CPU op computes on: f64 arrays go through f32 (the CPU paths are f32)."""
    return x.astype(np.float32) if x.dtype == np.float64 else x


def torch_dtype(torch, name):
    return {"f64": torch.float64, "f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[name]


def to_numpy64(t):
    return t.detach().double().cpu().numpy()


def cuda_normal(torch, rng, shape, dtype, scale=1.0, device="cuda"):
    return torch.from_numpy(normal(rng, shape, np.float64, scale)).to(device, torch_dtype(torch, dtype))


def raises(message):
    """pytest.raises for an ignis.Error whose whole message is `message`."""
    return pytest.raises(ignis.Error, match="^" + re.escape(message) + "$")


def bad_arguments_test(calls):
    """A test over calls = {case: (call, message)}: each call raises ignis.Error with exactly that
    message. Assign it to a module-level test_ name."""

    @pytest.mark.parametrize("case", list(calls))
    def test(case):
        call, message = calls[case]
        with raises(message):
            call()

    return test
