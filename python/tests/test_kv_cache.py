"""ignis.kv_cache_append: rows land behind each sequence's length, lengths advance, overflow writes
nothing; numpy on the CPU and torch on a GPU against plain index copies."""
import numpy as np
import pytest

import ignis
from helpers import bad_arguments_test, cuda_normal, normal, raises


def appended(cache, new, lengths):
    """cache with new[b] written at rows lengths[b]..., a copy."""
    out = cache.copy()
    for b, start in enumerate(lengths):
        out[b, start : start + new.shape[1]] = new[b]
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_kv_cache_append_numpy(rng, dtype):
    batch, max_seqlen, heads, dim = 3, 16, 2, 8
    k_cache = np.zeros((batch, max_seqlen, heads, dim), dtype)
    v_cache = np.zeros_like(k_cache)
    lengths = np.array([0, 5, 12], np.int32)
    host = lengths.tolist()
    for new_tokens in (3, 1):
        k_new, v_new = (normal(rng, (batch, new_tokens, heads, dim), dtype) for _ in range(2))
        want_k, want_v = appended(k_cache, k_new, host), appended(v_cache, v_new, host)
        host = ignis.kv_cache_append(k_cache, v_cache, k_new, v_new, lengths, host)
        np.testing.assert_array_equal(k_cache, want_k)
        np.testing.assert_array_equal(v_cache, want_v)
        assert lengths.tolist() == host
    assert host == [4, 9, 16]
    # Without host lengths they are read from `lengths`; a sequence past max_seqlen writes nothing.
    before = k_cache.copy()
    one = np.ones((batch, 1, heads, dim), dtype)
    with raises("kv_cache_append: context length exceeded: sequence 2 length + new_tokens: "
                "expected <= max_seqlen 16, got 16 + 1"):
        ignis.kv_cache_append(k_cache, v_cache, one, one, lengths)
    np.testing.assert_array_equal(k_cache, before)
    assert lengths.tolist() == [4, 9, 16]


KC = np.zeros((2, 4, 1, 2), np.float32)
KN = np.zeros((2, 1, 1, 2), np.float32)
LENS = np.zeros(2, np.int32)


def read_only(a):
    a = a.copy()
    a.setflags(write=False)
    return a


BAD_CALLS = {
    "read-only cache": (lambda: ignis.kv_cache_append(read_only(KC), KC.copy(), KN, KN, LENS.copy()),
                        "kv_cache_append: k_cache: expected a writable array, got a read-only array"),
    "read-only lengths": (lambda: ignis.kv_cache_append(KC.copy(), KC.copy(), KN, KN, read_only(LENS)),
                          "kv_cache_append: lengths: expected a writable array, got a read-only array"),
    "lengths dtype": (lambda: ignis.kv_cache_append(KC.copy(), KC.copy(), KN, KN, np.zeros(2, np.int64)),
                      "kv_cache_append: lengths.dtype: expected i32, got i64"),
    "host lengths size": (lambda: ignis.kv_cache_append(KC.copy(), KC.copy(), KN, KN, LENS.copy(), [0]),
                          "kv_cache_append: host_lengths.size(): expected 2, got 1"),
    "host and device disagree": (lambda: ignis.kv_cache_append(KC.copy(), KC.copy(), KN, KN, LENS.copy(), [0, 1]),
                                 "kv_cache_append: lengths[1]: expected 1 (host_lengths), got 0"),
    "new rows shape": (lambda: ignis.kv_cache_append(KC.copy(), KC.copy(), np.zeros((2, 1, 1, 1), np.float32), KN,
                                                     LENS.copy()),
                       "kv_cache_append: k_new.shape: expected [2, 1, 1, 2], got [2, 1, 1, 1]"),
}


test_kv_cache_bad_arguments = bad_arguments_test(BAD_CALLS)


# ---- torch on a GPU ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_kv_cache_append_cuda(cuda, rng, dtype):
    torch = cuda
    batch, max_seqlen, heads, dim = 4, 300, 8, 128
    k_cache = cuda_normal(torch, rng, (batch, max_seqlen, heads, dim), dtype)
    v_cache = cuda_normal(torch, rng, (batch, max_seqlen, heads, dim), dtype)
    lengths = torch.tensor([0, 7, 100, 299 - 17], dtype=torch.int32, device="cuda")
    host = None
    for new_tokens in (17, 1):
        k_new = cuda_normal(torch, rng, (batch, new_tokens, heads, dim), dtype)
        v_new = cuda_normal(torch, rng, (batch, new_tokens, heads, dim), dtype)
        starts = lengths.tolist()
        want_k, want_v = k_cache.clone(), v_cache.clone()
        for b, s in enumerate(starts):
            want_k[b, s : s + new_tokens] = k_new[b]
            want_v[b, s : s + new_tokens] = v_new[b]
        host = ignis.kv_cache_append(k_cache, v_cache, k_new, v_new, lengths, host)
        assert torch.equal(k_cache, want_k) and torch.equal(v_cache, want_v)
        assert lengths.tolist() == host == [s + new_tokens for s in starts]
    with raises("kv_cache_append: context length exceeded: sequence 3 length + new_tokens: "
                "expected <= max_seqlen 300, got 300 + 1"):
        ignis.kv_cache_append(k_cache, v_cache, k_new, v_new, lengths, host)
