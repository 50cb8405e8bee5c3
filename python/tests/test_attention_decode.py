"""ignis.attention_decode (CUDA only): one query per sequence over a KV cache with per-sequence
lengths on the GPU, against the fp64 reference on each sequence's visible rows and the same
computation written plainly in torch in the storage precision (the naive bound)."""
import numpy as np
import pytest

import ignis
from helpers import CUDA_DTYPES, cuda_normal, raises, to_numpy64
from reference import assert_within_naive, ref_attention


def test_attention_decode_rejects_numpy():
    q = np.zeros((1, 1, 2, 8), np.float32)
    k = np.zeros((1, 4, 2, 8), np.float32)
    with raises("attention_decode_forward: q.device: expected cuda (there is no CPU implementation), got cpu"):
        ignis.attention_decode(q, k, k, np.array([3], np.int32))


# (heads_q, heads_kv, head_dim, max_seqlen, lengths)
CASES = [
    (9, 3, 64, 1152, [1024]),
    (32, 8, 128, 2048, [1, 17, 2048, 0]),
    (4, 4, 80, 300, [113, 3]),
    (8, 1, 256, 100, [99]),
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", CUDA_DTYPES)
def test_attention_decode_cuda(cuda, rng, dtype, case):
    torch = cuda
    hq, hkv, d, capacity, lengths = case
    batch = len(lengths)
    q = cuda_normal(torch, rng, (batch, 1, hq, d), dtype)
    k = cuda_normal(torch, rng, (batch, capacity, hkv, d), dtype)
    v = cuda_normal(torch, rng, (batch, capacity, hkv, d), dtype)
    seqlens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    o = ignis.attention_decode(q, k, v, seqlens)
    assert isinstance(o, torch.Tensor) and o.dtype == q.dtype and o.shape == q.shape
    scale = 1.0 / np.sqrt(d)
    got = to_numpy64(o)
    for b, n in enumerate(lengths):
        if n == 0:
            assert np.all(got[b] == 0)
            continue
        ref_o, _ = ref_attention(to_numpy64(q[b:b + 1]), to_numpy64(k[b:b + 1, :n]), to_numpy64(v[b:b + 1, :n]),
                                 scale)
        kk = k[b, :n].repeat_interleave(hq // hkv, dim=1).transpose(0, 1)  # [hq, n, d]
        vv = v[b, :n].repeat_interleave(hq // hkv, dim=1).transpose(0, 1)
        p = torch.softmax(torch.matmul(q[b, 0].unsqueeze(1), kk.transpose(1, 2)) * scale, dim=-1)
        naive = torch.matmul(p, vv).transpose(0, 1)  # [1, hq, d]
        assert_within_naive(got[b:b + 1], ref_o, to_numpy64(naive).reshape(ref_o.shape), dtype, f"o[{b}]")


def test_attention_decode_cuda_bad_arguments(cuda):
    torch = cuda
    q = torch.zeros((1, 1, 2, 12), device="cuda", dtype=torch.bfloat16)
    seqlens = torch.tensor([1], dtype=torch.int32, device="cuda")
    with raises("attention_decode_forward: q.size(3) (head_dim): expected a multiple of 8 up to 256, got 12"):
        ignis.attention_decode(q, q, q, seqlens)
