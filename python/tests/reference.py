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
