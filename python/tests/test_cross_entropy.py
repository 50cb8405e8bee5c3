"""ignis.cross_entropy: numpy against an fp64 reference, torch on a GPU against
torch.nn.functional.cross_entropy(ignore_index=pad) and its gradient."""
import numpy as np
import pytest

import ignis
from helpers import CUDA_DTYPES, NUMPY_DTYPES, bad_arguments_test, computed_as, cuda_normal, normal, raises, to_numpy64
from reference import assert_close, assert_within_naive, ref_cross_entropy

PAD = -100


def test_reference_cross_entropy_hand_values():
    loss, grad = ref_cross_entropy([[0.0, np.log(3.0)], [5.0, 5.0]], np.array([1, PAD]), PAD)
    assert loss == pytest.approx(-np.log(0.75), rel=1e-15)
    np.testing.assert_allclose(grad, [[0.25, -0.25], [0.0, 0.0]], rtol=1e-15)
    assert ref_cross_entropy([[1.0, 2.0]], np.array([PAD]), PAD)[0] == 0.0


def targets_with_pads(rng, n, vocab, pad_id, dtype):
    """About a quarter pad, row 0 never (torch's mean over no rows is NaN)."""
    targets = rng.integers(0, vocab, n)
    targets[1:][rng.random(n - 1) < 0.25] = pad_id
    return targets.astype(dtype)


@pytest.mark.parametrize("target_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("shape", [(1, 1), (3, 17), (17, 113), (5, 5000), (64, 1023)])
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_cross_entropy_numpy(rng, dtype, shape, target_dtype):
    logits = normal(rng, shape, NUMPY_DTYPES[dtype], scale=3.0)
    targets = targets_with_pads(rng, shape[0], shape[1], PAD, target_dtype)
    loss, dlogits = ignis.cross_entropy(logits, targets, PAD)
    assert type(loss) is np.ndarray and loss.shape == () and loss.dtype == np.float32
    assert type(dlogits) is np.ndarray and dlogits.dtype == logits.dtype and dlogits.shape == shape
    ref_loss, ref_grad = ref_cross_entropy(computed_as(logits), targets, PAD)
    assert_close(loss, ref_loss, "f32", scale=1.0)
    assert_close(dlogits, ref_grad, dtype, scale=np.max(np.abs(ref_grad)))
    loss_only, none = ignis.cross_entropy(logits, targets, PAD, grad=False)
    assert none is None and loss_only == loss


def test_cross_entropy_numpy_all_pad_and_custom_pad(rng):
    logits = normal(rng, (4, 9), np.float32)
    loss, dlogits = ignis.cross_entropy(logits, np.full(4, 7, np.int64), 7)
    assert loss == 0.0 and not np.any(dlogits)
    targets = np.array([0, 3, 8, 3], np.int32)
    loss, dlogits = ignis.cross_entropy(logits, targets, pad_id=3)
    ref_loss, ref_grad = ref_cross_entropy(logits, targets, 3)
    assert_close(loss, ref_loss, "f32", scale=1.0)
    assert_close(dlogits, ref_grad, "f32", scale=np.max(np.abs(ref_grad)))


def test_cross_entropy_numpy_deferred_flag(rng):
    logits = normal(rng, (4, 6), np.float32)
    flag = np.zeros(3, np.int64)
    ignis.cross_entropy_clear_flag(flag)
    good = np.array([0, PAD, 5, 3], np.int64)
    loss, dlogits = ignis.cross_entropy(logits, good, PAD, flag=flag)
    want_loss, want_grad = ignis.cross_entropy(logits, good, PAD)
    assert loss == want_loss and np.array_equal(dlogits, want_grad)
    ignis.cross_entropy_check_flag(flag)  # nothing recorded
    loss, dlogits = ignis.cross_entropy(logits, np.array([0, PAD, 6, 3], np.int32), PAD, flag=flag)
    want_loss, want_grad = ignis.cross_entropy(logits, np.array([0, PAD, PAD, 3], np.int32), PAD)
    assert loss == want_loss and np.array_equal(dlogits, want_grad)  # the bad row counts as pad
    with raises("cross_entropy: targets[2]: expected an index in [0, 6), got 6"):
        ignis.cross_entropy_check_flag(flag)
    ignis.cross_entropy_clear_flag(flag)
    ignis.cross_entropy_check_flag(flag)
    with raises("cross_entropy_deferred: flag.dtype: expected i64, got i32"):
        ignis.cross_entropy(logits, good, PAD, flag=np.zeros(3, np.int32))


L = np.zeros((3, 5), np.float32)

BAD_CALLS = {
    "target out of range": (lambda: ignis.cross_entropy(L, np.array([0, 5, 1])),
                            "cross_entropy: targets[1]: expected an index in [0, 5), got 5"),
    "targets length": (lambda: ignis.cross_entropy(L, np.array([0, 1])),
                       "cross_entropy: targets.shape: expected [3], got [2]"),
    "targets dtype": (lambda: ignis.cross_entropy(L, np.zeros(3, np.float32)),
                      "cross_entropy: targets.dtype: expected i32 or i64, got f32"),
    "logits rank": (lambda: ignis.cross_entropy(L[0], np.zeros(3, np.int64)),
                    "cross_entropy: logits.dim: expected 2, got 1"),
    "logits integer": (lambda: ignis.cross_entropy(L.astype(np.int32), np.zeros(3, np.int64)),
                       "cross_entropy: logits.dtype on cpu: expected f32, got i32"),
    "targets not an array": (lambda: ignis.cross_entropy(L, [0, 1, 2]),
                             "cross_entropy: targets: expected a numpy array or a torch tensor, got list"),
}


test_cross_entropy_bad_arguments = bad_arguments_test(BAD_CALLS)


# ---- torch on a GPU ------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(1, 1), (3, 17), (64, 1023), (256, 32000), (64, 128256), (7, 5000)])
@pytest.mark.parametrize("dtype", CUDA_DTYPES)
def test_cross_entropy_cuda(cuda, rng, dtype, shape):
    torch = cuda
    F = torch.nn.functional
    logits = cuda_normal(torch, rng, shape, dtype, scale=3.0)
    targets = torch.from_numpy(targets_with_pads(rng, shape[0], shape[1], PAD, np.int64)).cuda()
    loss, dlogits = ignis.cross_entropy(logits, targets, PAD)
    assert isinstance(loss, torch.Tensor) and loss.shape == () and loss.dtype == torch.float32
    assert loss.device == logits.device and dlogits.dtype == logits.dtype and dlogits.shape == logits.shape
    ref_loss, ref_grad = ref_cross_entropy(to_numpy64(logits), targets.cpu().numpy(), PAD)
    # The loss is f32 whatever the logits' dtype: torch's f32 loss on the same logits is the naive one.
    naive_loss = F.cross_entropy(logits.float(), targets, ignore_index=PAD)
    assert_within_naive(to_numpy64(loss), np.array(ref_loss), to_numpy64(naive_loss), "f32", "loss")
    leaf = logits.detach().clone().requires_grad_()
    F.cross_entropy(leaf, targets, ignore_index=PAD).backward()
    assert_within_naive(to_numpy64(dlogits), ref_grad, to_numpy64(leaf.grad), dtype, "dlogits")


def test_cross_entropy_cuda_int32_targets_and_bad_target(cuda, rng):
    torch = cuda
    logits = cuda_normal(torch, rng, (5, 100), "bf16")
    targets = torch.tensor([1, 99, PAD, 0, 50], dtype=torch.int32, device="cuda")
    loss, _ = ignis.cross_entropy(logits, targets, PAD)
    want = torch.nn.functional.cross_entropy(logits.float(), targets.long(), ignore_index=PAD)
    assert abs(loss.item() - want.item()) <= 1e-5 * abs(want.item()) + 1e-6
    with raises("cross_entropy: targets[1]: expected an index in [0, 100), got 100"):
        ignis.cross_entropy(logits, torch.tensor([1, 100, 2, 3, 4], device="cuda"), PAD)


@pytest.mark.parametrize("shape", [(64, 1023), (256, 32000), (16, 50257), (64, 128256)])
@pytest.mark.parametrize("dtype", CUDA_DTYPES)
def test_cross_entropy_cuda_deferred_flag(cuda, rng, dtype, shape):
    torch = cuda
    logits = cuda_normal(torch, rng, shape, dtype, scale=3.0)
    targets = torch.from_numpy(targets_with_pads(rng, shape[0], shape[1], PAD, np.int64)).cuda()
    flag = torch.empty(3, dtype=torch.int64, device="cuda")
    ignis.cross_entropy_clear_flag(flag)
    loss, dlogits = ignis.cross_entropy(logits, targets, PAD, flag=flag)
    want_loss, want_grad = ignis.cross_entropy(logits, targets, PAD)
    assert torch.equal(loss, want_loss) and torch.equal(dlogits, want_grad)
    ignis.cross_entropy_check_flag(flag)  # nothing recorded
    bad = targets.clone()
    bad[0] = shape[1]
    loss, dlogits = ignis.cross_entropy(logits, bad, PAD, flag=flag)
    bad[0] = PAD
    want_loss, want_grad = ignis.cross_entropy(logits, bad, PAD)
    assert torch.equal(loss, want_loss) and torch.equal(dlogits, want_grad)
    with raises(f"cross_entropy: targets[0]: expected an index in [0, {shape[1]}), got {shape[1]}"):
        ignis.cross_entropy_check_flag(flag)
