"""Fixtures of the Python module's tests: seeded inputs, and torch / GPU fixtures that skip cleanly
when torch or a GPU is missing (CI has neither; the lent GPU machine has both)."""
import numpy as np
import pytest

import ignis


@pytest.fixture
def rng(request):
    """A generator seeded from the test's name: fresh inputs per test, the same on every run."""
    seed = sum(ord(c) * (i + 1) for i, c in enumerate(request.node.nodeid)) % (2**32)
    return np.random.default_rng(seed)


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


@pytest.fixture
def cuda(torch):
    """The torch module, when torch sees a GPU. Fails when ignis does not see it too (built without
    nvcc, say), so that a GPU run cannot pass by skipping every GPU test."""
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    if not ignis.cuda_available():
        pytest.fail(f"torch sees a GPU but ignis does not: {ignis.cuda_device_summary()}")
    return torch
