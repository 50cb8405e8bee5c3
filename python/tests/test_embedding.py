"""ignis.embedding / embedding_backward: numpy against numpy gathers and sums, torch on a GPU
against torch.nn.functional.embedding and its gradient."""
import numpy as np
import pytest

import ignis
from helpers import CUDA_DTYPES, NUMPY_DTYPES, bad_arguments_test, computed_as, cuda_normal, normal, raises, to_numpy64
from reference import assert_close, assert_within_naive


def ref_embedding_backward(dout, ids, vocab):
    dtable = np.zeros((vocab, dout.shape[1]))
    np.add.at(dtable, ids, np.asarray(dout, dtype=np.float64))
    return dtable


@pytest.mark.parametrize("id_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("shape", [(1, 1, 1), (17, 5, 113), (1000, 300, 64), (3, 2, 4099)])
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_embedding_numpy(rng, dtype, shape, id_dtype):
    vocab, n, dim = shape
    table = normal(rng, (vocab, dim), NUMPY_DTYPES[dtype])
    ids = rng.integers(0, vocab, n).astype(id_dtype)
    out = ignis.embedding(table, ids)
    assert type(out) is np.ndarray and out.dtype == table.dtype and out.shape == (n, dim)
    np.testing.assert_array_equal(out, computed_as(table)[ids].astype(table.dtype))
    dout = normal(rng, (n, dim), table.dtype)
    dtable = ignis.embedding_backward(dout, ids, vocab)
    assert dtable.dtype == table.dtype and dtable.shape == (vocab, dim)
    ref = ref_embedding_backward(computed_as(dout), ids, vocab)
    assert_close(dtable, ref, dtype, scale=np.max(np.abs(ref), initial=0.0))


T = np.ones((10, 4), np.float32)
IDS = np.array([1, 2, 3], np.int64)

BAD_CALLS = {
    "id out of range": (lambda: ignis.embedding(T, np.array([0, 10], np.int32)),
                        "embedding_forward: ids[1]: expected an index in [0, 10), got 10"),
    "negative id": (lambda: ignis.embedding(T, np.array([-1], np.int64)),
                    "embedding_forward: ids[0]: expected an index in [0, 10), got -1"),
    "float ids": (lambda: ignis.embedding(T, IDS.astype(np.float32)),
                  "embedding_forward: ids.dtype: expected i32 or i64, got f32"),
    "ids rank": (lambda: ignis.embedding(T, IDS.reshape(1, 3)), "embedding_forward: ids.dim: expected 1, got 2"),
    "table rank": (lambda: ignis.embedding(T[0], IDS), "embedding_forward: table.dim: expected 2, got 1"),
    "backward dout shape": (lambda: ignis.embedding_backward(T[:2], IDS, 10),
                            "embedding_backward: dout.shape: expected [3, 4], got [2, 4]"),
    "backward id range": (lambda: ignis.embedding_backward(T[:3], IDS, 3),
                          "embedding_backward: ids[2]: expected an index in [0, 3), got 3"),
    "backward num_embeddings": (lambda: ignis.embedding_backward(T[:3], IDS, -1),
                                "embedding_backward: num_embeddings: expected >= 0, got -1"),
}


test_embedding_bad_arguments = bad_arguments_test(BAD_CALLS)


# ---- torch on a GPU ------------------------------------------------------------------------------


@pytest.mark.parametrize("id_dtype", ["int32", "int64"])
@pytest.mark.parametrize("shape", [(1, 1, 1), (32000, 1024, 512), (1000, 517, 4096), (50, 10000, 64), (7, 100, 1023)])
@pytest.mark.parametrize("dtype", CUDA_DTYPES)
def test_embedding_cuda(cuda, rng, dtype, shape, id_dtype):
    torch = cuda
    F = torch.nn.functional
    vocab, n, dim = shape
    table = cuda_normal(torch, rng, (vocab, dim), dtype)
    ids = torch.from_numpy(rng.integers(0, vocab, n)).to("cuda", getattr(torch, id_dtype))
    out = ignis.embedding(table, ids)
    assert isinstance(out, torch.Tensor) and out.device == table.device and out.dtype == table.dtype
    assert torch.equal(out, F.embedding(ids.long(), table))
    # Repeated ids (vocab 50 with 10000 ids) sum many rows: the gradient against torch's.
    dout = cuda_normal(torch, rng, (n, dim), dtype)
    dtable = ignis.embedding_backward(dout, ids, vocab)
    assert dtable.dtype == table.dtype and dtable.shape == table.shape
    leaf = table.detach().clone().requires_grad_()
    F.embedding(ids.long(), leaf).backward(dout)
    ref = ref_embedding_backward(to_numpy64(dout), ids.cpu().numpy(), vocab)
    assert_within_naive(to_numpy64(dtable), ref, to_numpy64(leaf.grad), dtype, "dtable")


def test_embedding_cuda_deferred_flag(cuda, rng):
    torch = cuda
    table = cuda_normal(torch, rng, (1000, 64), "bf16")
    flag = torch.empty(3, dtype=torch.int64, device="cuda")
    ignis.embedding_clear_flag(flag)
    ids = torch.tensor([5, 1000, 7, 8], device="cuda")  # one bad id: which of several is recorded first may vary
    out = ignis.embedding(table, ids, flag=flag)
    assert torch.equal(out[0], table[5]) and torch.equal(out[2], table[7]) and not bool(out[1].any())
    with raises("embedding_forward: ids[1]: expected an index in [0, 1000), got 1000"):
        ignis.embedding_check_flag(flag)


def test_embedding_cuda_bad_id_names_it(cuda):
    torch = cuda
    table = torch.zeros((100, 8), device="cuda", dtype=torch.bfloat16)
    ids = torch.tensor([3, 99, 100, 5], device="cuda")
    with raises("embedding_forward: ids[2]: expected an index in [0, 100), got 100"):
        ignis.embedding(table, ids)
    with raises("embedding_forward: ids.device: expected cuda:0, got cpu"):
        ignis.embedding(table, ids.cpu())


def test_embedding_numpy_deferred_flag(rng):
    table = normal(rng, (10, 4), np.float32)
    flag = np.zeros(3, np.int64)
    ignis.embedding_clear_flag(flag)
    out = ignis.embedding(table, np.array([1, 2], np.int32), flag=flag)
    np.testing.assert_array_equal(out, table[[1, 2]])
    ignis.embedding_check_flag(flag)  # nothing recorded
    out = ignis.embedding(table, np.array([3, 12, -1], np.int64), flag=flag)
    np.testing.assert_array_equal(out, np.stack([table[3], np.zeros(4), np.zeros(4)]))
    with raises("embedding_forward: ids[1]: expected an index in [0, 10), got 12"):
        ignis.embedding_check_flag(flag)
    with raises("embedding_forward_deferred: flag.dtype: expected i64, got i32"):
        ignis.embedding(table, np.array([1], np.int32), flag=np.zeros(3, np.int32))
