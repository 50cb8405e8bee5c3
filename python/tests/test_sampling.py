"""ignis.top_k_mask / top_p_mask / sample: numpy against fp64 references of the documented rule;
torch on a GPU against torch.topk, a sort + cumsum top-p, the CPU path (the ids must be identical)
and the frequencies of torch.multinomial's distribution."""
import numpy as np
import pytest

import ignis
from helpers import CUDA_DTYPES, NUMPY_DTYPES, bad_arguments_test, cuda_normal, normal, to_numpy64
from reference import ref_sample, ref_top_k_mask, ref_top_p_mask, sampling_uniform

# Draws within this fraction of the row total of a decision boundary may go either way between the
# real-valued rule and the fixed-point one (below 4e-9, sampling_rule.h; 2.5x that here): set aside.
AMBIGUOUS = 1e-8


def test_reference_sampling_hand_values():
    x = np.array([[1.0, 3.0, 3.0, 2.0, -np.inf]])
    np.testing.assert_array_equal(ref_top_k_mask(x, 2), [[-np.inf, 3.0, 3.0, -np.inf, -np.inf]])
    np.testing.assert_array_equal(ref_top_k_mask(x, 1), [[-np.inf, 3.0, -np.inf, -np.inf, -np.inf]])
    masked, margin = ref_top_p_mask(np.log([[0.3, 0.5, 0.2]]), 0.7)
    np.testing.assert_array_equal(np.isfinite(masked), [[True, True, False]])
    assert margin[0] == pytest.approx(0.1, rel=1e-12)
    assert ref_sample(x, temperature=0.0)[0][0] == 1
    assert 0.0 <= sampling_uniform(1, 2, 3) < 1.0 and sampling_uniform(1, 2, 3) != sampling_uniform(1, 2, 4)


def logits_with_ties(rng, shape, dtype, scale=2.0):
    x = normal(rng, shape, np.float64, scale)
    x[:, ::7] = np.round(x[:, ::7])  # repeated values: ties broken by index
    return x.astype(dtype)


@pytest.mark.parametrize("k", [0, 1, 5, 50, 1023, 5000])
@pytest.mark.parametrize("shape", [(1, 1), (3, 17), (4, 1023), (2, 5000)])
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_top_k_mask_numpy(rng, dtype, shape, k):
    x = logits_with_ties(rng, shape, NUMPY_DTYPES[dtype])
    got = ignis.top_k_mask(x, k)
    assert type(got) is np.ndarray and got.dtype == x.dtype and got.shape == shape
    want = ref_top_k_mask(x.astype(np.float32), k).astype(x.dtype)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("p", [1e-9, 0.1, 0.5, 0.9, 0.999, 1.0])
@pytest.mark.parametrize("shape", [(1, 1), (3, 17), (4, 1023), (2, 5000)])
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_top_p_mask_numpy(rng, dtype, shape, p):
    x = logits_with_ties(rng, shape, NUMPY_DTYPES[dtype])
    got = ignis.top_p_mask(x, p)
    assert type(got) is np.ndarray and got.dtype == x.dtype and got.shape == shape
    want, margins = ref_top_p_mask(x.astype(np.float32), p)
    clear = margins > AMBIGUOUS
    assert np.count_nonzero(clear) >= shape[0] // 2, "too many ambiguous rows to judge"
    np.testing.assert_array_equal(got[clear], want.astype(x.dtype)[clear])


SAMPLE_PARAMS = [
    dict(temperature=0.0),
    dict(temperature=1.0),
    dict(temperature=0.7, top_k=50),
    dict(temperature=1.3, top_p=0.9),
    dict(temperature=0.8, top_k=20, top_p=0.5, seed=12345, step=7),
]


@pytest.mark.parametrize("params", SAMPLE_PARAMS, ids=str)
@pytest.mark.parametrize("shape", [(1, 1), (8, 17), (16, 1023), (4, 32000)])
def test_sample_numpy(rng, shape, params):
    x = logits_with_ties(rng, shape, np.float32)
    ids = ignis.sample(x, **params)
    assert type(ids) is np.ndarray and ids.dtype == np.int32 and ids.shape == (shape[0],)
    want, margins = ref_sample(x, **params)
    clear = margins > AMBIGUOUS
    assert np.count_nonzero(clear) >= shape[0] // 2, "too many ambiguous draws to judge"
    np.testing.assert_array_equal(ids[clear], want[clear])
    np.testing.assert_array_equal(ignis.sample(x, **params), ids)  # same (seed, step): same ids


def test_sample_numpy_follows_the_distribution(rng):
    """20000 rows of one 6-token distribution (each row draws its own uniform) against the softmax
    probabilities: every frequency within 5 standard deviations."""
    logits = np.log(np.array([0.4, 0.25, 0.15, 0.1, 0.07, 0.03], np.float32))
    rows = 20000
    ids = ignis.sample(np.tile(logits, (rows, 1)), temperature=1.0, seed=99)
    freq = np.bincount(ids, minlength=6) / rows
    p = np.exp(logits.astype(np.float64))
    p /= p.sum()
    assert np.all(np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / rows)), (freq, p)


def test_sampling_numpy_masked_rows(rng):
    x = np.full((2, 8), -np.inf, np.float32)
    x[1, 3] = 1.0
    np.testing.assert_array_equal(ignis.sample(x, seed=1), [0, 3])
    np.testing.assert_array_equal(ignis.top_p_mask(x, 0.5), x)


LG = np.zeros((2, 6), np.float32)

BAD_CALLS = {
    "negative k": (lambda: ignis.top_k_mask(LG, -1), "top_k_mask: k: expected >= 0 (0 keeps every token), got -1"),
    "p zero": (lambda: ignis.top_p_mask(LG, 0.0), "top_p_mask: top_p: expected a value in (0, 1], got 0"),
    "p above one": (lambda: ignis.sample(LG, top_p=1.5), "sample: top_p: expected a value in (0, 1], got 1.5"),
    "negative temperature": (lambda: ignis.sample(LG, temperature=-1.0),
                             "sample: temperature: expected a finite value >= 0 (0 is greedy), got -1"),
    "rank": (lambda: ignis.sample(LG[0]), "sample: logits.dim: expected 2, got 1"),
    "integer logits": (lambda: ignis.top_k_mask(LG.astype(np.int32), 1),
                       "top_k_mask: logits.dtype on cpu: expected f32, got i32"),
}


test_sampling_bad_arguments = bad_arguments_test(BAD_CALLS)


# ---- torch on a GPU ------------------------------------------------------------------------------

CUDA_SHAPES = [(1, 32000), (7, 1023), (64, 32000), (4, 128256), (2, 262144), (3, 17)]


def cpu_copy(t):
    """The f32 numpy copy the CPU path computes on (bf16 and f16 widen exactly)."""
    return t.float().cpu().numpy()


@pytest.mark.parametrize("k", [1, 50, 1024])
@pytest.mark.parametrize("shape", CUDA_SHAPES)
@pytest.mark.parametrize("dtype", CUDA_DTYPES)
def test_top_k_mask_cuda(cuda, rng, dtype, shape, k):
    torch = cuda
    x = cuda_normal(torch, rng, shape, dtype, scale=3.0)
    got = ignis.top_k_mask(x, k)
    assert isinstance(got, torch.Tensor) and got.device == x.device and got.dtype == x.dtype and got.shape == shape
    kept = torch.isfinite(got)
    keep = min(k, shape[1])
    assert bool((kept.sum(dim=1) == keep).all()), "exactly min(k, vocab) tokens survive"
    assert torch.equal(got[kept], x[kept]), "survivors keep their values"
    # The survivors' values are torch.topk's values (which indices win a tie may differ).
    survivors = torch.sort(torch.where(kept, got, torch.full_like(got, -float("inf"))), dim=1, descending=True).values
    assert torch.equal(survivors[:, :keep], torch.topk(x, keep, dim=1).values)
    # Ties go to the lower index, as on the CPU: the masks are identical.
    np.testing.assert_array_equal(cpu_copy(got), ignis.top_k_mask(cpu_copy(x), k))


def torch_top_p_keep(torch, x, p):
    """Kept-token counts of torch's sort + cumsum top-p (the naive one): the shortest prefix of the
    descending order whose probability reaches p."""
    probs = torch.softmax(x.double(), dim=-1)
    sorted_probs = torch.sort(probs, dim=-1, descending=True, stable=True).values
    before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
    return (before < p).sum(dim=-1)


@pytest.mark.parametrize("p", [0.1, 0.9, 0.999])
@pytest.mark.parametrize("shape", CUDA_SHAPES)
@pytest.mark.parametrize("dtype", CUDA_DTYPES)
def test_top_p_mask_cuda(cuda, rng, dtype, shape, p):
    torch = cuda
    x = cuda_normal(torch, rng, shape, dtype, scale=3.0)
    got = ignis.top_p_mask(x, p)
    assert isinstance(got, torch.Tensor) and got.dtype == x.dtype and got.shape == shape
    kept = torch.isfinite(got)
    assert torch.equal(got[kept], x[kept])
    # The fixed-point rule gives the same mask on every device.
    np.testing.assert_array_equal(cpu_copy(got), ignis.top_p_mask(cpu_copy(x), p))
    # At p = 0.999 over 262144 tokens the boundary tokens weigh ~3e-8 of the row, so most rows lie
    # near one: those may keep one token more or less than torch's float64 cumsum, the rest the same count.
    _, margins = ref_top_p_mask(to_numpy64(x), p)
    clear = torch.from_numpy(margins > AMBIGUOUS).cuda()
    counts = kept.sum(dim=-1)
    want = torch_top_p_keep(torch, x, p)
    assert torch.equal(counts[clear], want[clear])
    assert bool(((counts - want).abs() <= 1).all()), "a row near its boundary is off by more than one token"


@pytest.mark.parametrize("params", SAMPLE_PARAMS + [dict(temperature=1.0, top_k=1024, top_p=0.9, step=3)], ids=str)
@pytest.mark.parametrize("shape", CUDA_SHAPES)
@pytest.mark.parametrize("dtype", CUDA_DTYPES)
def test_sample_cuda_matches_cpu(cuda, rng, dtype, shape, params):
    torch = cuda
    x = cuda_normal(torch, rng, shape, dtype, scale=3.0)
    ids = ignis.sample(x, **params)
    assert isinstance(ids, torch.Tensor) and ids.device == x.device and ids.dtype == torch.int32
    assert ids.shape == (shape[0],)
    np.testing.assert_array_equal(ids.cpu().numpy(), ignis.sample(cpu_copy(x), **params))
    if params.get("temperature") == 0.0:
        assert torch.equal(ids.long(), torch.argmax(x.float(), dim=-1))


def test_sample_cuda_distribution_matches_multinomial(cuda):
    """Frequencies of ignis's draws and of torch.multinomial's over one tempered, top-k and top-p
    masked distribution: both within 5 standard deviations of the probabilities."""
    torch = cuda
    gen = torch.Generator(device="cuda").manual_seed(0)
    logits = torch.randn(1, 64, device="cuda", generator=gen) * 2
    rows, temperature, k, p = 50000, 0.8, 20, 0.9
    ids = ignis.sample(logits.expand(rows, 64).contiguous(), temperature=temperature, top_k=k, top_p=p, seed=5)
    # The distribution the rule samples: softmax of the tempered logits after top-k, then top-p.
    y = ignis.top_p_mask(ignis.top_k_mask(logits / temperature, k), p)
    probs = torch.softmax(y.double(), dim=-1)[0]
    draws = torch.multinomial(probs.float(), rows, replacement=True, generator=gen)
    sigma = torch.sqrt(probs * (1 - probs) / rows)
    for name, got in [("ignis", ids.long()), ("torch.multinomial", draws)]:
        freq = torch.bincount(got, minlength=64).double() / rows
        assert bool(((freq - probs).abs() <= 5 * sigma + 1e-12).all()), name
        assert bool((freq[probs == 0] == 0).all()), f"{name} drew a masked token"
