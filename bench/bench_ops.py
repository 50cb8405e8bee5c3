#!/usr/bin/env python3
"""Kernel benchmark: achieved memory bandwidth of each ignis op against its torch equivalent on one
GPU, next to the device's copy bandwidth measured in the same run.

Run on a GPU machine after `pip install .`:
    python3 bench/bench_ops.py --out bench-ops.md [--ops softmax,cast] [--reps 30]

The last column compares the two results on the first input set: the max abs difference, the
number of mask entries that differ (masks), or "-" where results are random draws (sample).

Every case times device work only: CUDA events around one call, a spin kernel queued first so the
host's launch overhead is hidden, warm-up calls first, the median of --reps calls, and calls that
rotate through enough input sets that L2 cannot serve a repeated input. GB/s counts the bytes an
ideal kernel moves (every input read once, every output written once), 1 GB = 1e9 bytes.
Two copy columns: the device's copy bandwidth (a 512 MiB clone) and a clone of the case's own bytes,
which is what a plain copy reaches at that size (a 4096 x 4096 bf16 row op moves 64 MB: launch, ramp
and tail are a larger share than at 1 GB).

An op is one entry of OPS: name, shapes, dtypes, make_inputs(shape, dtype) -> tuple of arguments,
ignis_fn(*args), torch_fn(*args), bytes_moved(shape, dtype), optionally a variant label and a diff.
Ops whose ignis call waits for the GPU are timed with that wait inside the events: the host's return
latency counts against them. cross_entropy is timed in its non-waiting form (targets checked into a
device flag, as embedding), as torch's does not wait either.
"""
import argparse
import datetime
import math
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

import ignis
import targets

TOKENS = 4096
HIDDEN = [(TOKENS, 4096), (TOKENS, 8192), (TOKENS, 16384)]  # 7B-class model widths
VOCAB = [(TOKENS, 32000), (TOKENS, 128256)]  # Llama-2 and Llama-3 vocabularies

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}

# Spin cycles queued before each timed call: ~0.5 ms, far above the host's cost of one call.
SPIN_CYCLES = 1_000_000

# After device memory goes back to the driver, whatever is timed next runs slow for a while: on the
# H100 (2026-11-21) the first op timed after the 4096x128256 cases (~20 GB freed) lost 10-13%, torch's
# op when torch was timed first, and one second of waiting removed it for both. Our reading (not
# confirmed by a profiler): the driver clears freed memory in the background, sharing DRAM with the
# op. The wait scales with what was freed.
SETTLE_S = 0.05
SETTLE_BYTES_PER_S = 20e9


def max_abs_diff(a, b):
    if isinstance(a, torch.Tensor):
        return f"{(a.double() - b.double()).abs().max().item():.2g}"
    return "-"


@dataclass(frozen=True)
class Op:
    name: str
    shapes: Sequence[tuple]
    dtypes: Sequence[str]
    make_inputs: Callable[[tuple, str], tuple]
    ignis_fn: Callable
    torch_fn: Callable
    bytes_moved: Callable[[tuple, str], int]
    variant: str = ""  # parameters shown next to the name, e.g. "k=50"
    diff: Callable = max_abs_diff  # (ignis result, torch result) -> text for the last column


def numel(shape):
    return math.prod(shape)


def itemsize(dtype):
    return DTYPES[dtype].itemsize


def normal(shape, dtype, scale=1.0):
    return (torch.randn(shape, device="cuda", dtype=torch.float32) * scale).to(DTYPES[dtype])


def softmax_rows(shape, dtype):
    return torch.softmax(normal(shape, "f32", 2.0), dim=-1).to(DTYPES[dtype])


def cast_dtypes(pair):
    src, dst = pair.split("->")
    return src, dst


F = torch.nn.functional
EPS = 1e-5
PAD = -100
ROPE = [(1, TOKENS, 32, 128)]  # [batch, seqlen, heads, head_dim], Llama-2 7B queries
EMBED = [(32000, TOKENS, 4096), (128256, TOKENS, 4096)]  # (vocab, ids, dim)
SAMPLING = [(rows, vocab) for rows in (1, 64) for vocab in (32000, 128256, 262144)]


def norm_inputs(shape, dtype, n_params, grad=False):
    """x: [rows, dim] and n_params [dim] parameters, leaves of torch's graph when `grad`."""
    tensors = [normal(shape, dtype, 2.0)] + [normal(shape[-1:], dtype) for _ in range(n_params)]
    return [t.requires_grad_() for t in tensors] if grad else tensors


def torch_rms_norm(x, w):
    f = getattr(F, "rms_norm", None)
    if f is not None:
        return f(x, x.shape[-1:], w, EPS)
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)).to(x.dtype) * w


def with_graph(forward, n_params):
    """make_inputs for a backward op: (x, params..., y, dy), y = forward(x, params) on torch's graph
    (kept for torch.autograd.grad with retain_graph: only torch's backward pass is timed)."""

    def make(shape, dtype):
        leaves = norm_inputs(shape, dtype, n_params, grad=True)
        return (*leaves, forward(*leaves), normal(shape, dtype))

    return make


def norm_bytes(reads, writes, params):
    """reads + writes [rows, dim] tensors and `params` [dim] vectors, each moved once."""
    return lambda shape, dtype: ((reads + writes) * numel(shape) + params * shape[-1]) * itemsize(dtype)


def ce_inputs(shape, dtype):
    targets = torch.randint(0, shape[1], (shape[0],), device="cuda")
    targets[torch.rand(shape[0], device="cuda") < 0.1] = PAD
    flag = torch.empty(3, dtype=torch.int64, device="cuda")
    ignis.cross_entropy_clear_flag(flag)
    return normal(shape, dtype, 3.0).requires_grad_(), targets, flag


def torch_cross_entropy(logits, targets, flag):
    loss = F.cross_entropy(logits, targets, ignore_index=PAD)
    return loss, torch.autograd.grad(loss, logits)[0]


def ce_diff(a, b):
    return f"loss {abs(a[0].item() - b[0].item()):.2g}, grad {max_abs_diff(a[1], b[1])}"


def rope_inputs(shape, dtype):
    """x, ignis's inv_freq, and cos/sin [1, seqlen, 1, head_dim] precomputed for torch in x's dtype."""
    x = normal(shape, dtype)
    inv_freq = torch.from_numpy(ignis.rope_inv_freq(shape[-1], 10000.0)).cuda()
    angles = torch.outer(torch.arange(shape[1], device="cuda", dtype=torch.float32), inv_freq)
    emb = torch.cat([angles, angles], dim=-1)[None, :, None, :]
    return x, inv_freq, emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def torch_rope(x, cos, sin):
    """Rotate-half RoPE as HF Llama writes it."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin


def embed_inputs(shape, dtype):
    vocab, n, dim = shape
    flag = torch.empty(3, dtype=torch.int64, device="cuda")
    ignis.embedding_clear_flag(flag)
    return normal((vocab, dim), dtype), torch.randint(0, vocab, (n,), device="cuda"), flag


def torch_top_k_mask(x, k):
    kth = torch.topk(x, k, dim=-1).values[:, -1:]
    return x.masked_fill(x < kth, -float("inf"))


def torch_top_p_mask(x, p):
    """Sort, cumulative softmax mass, mask past the shortest prefix reaching p, scatter back."""
    values, order = torch.sort(x, dim=-1, descending=True)
    probs = torch.softmax(values.float(), dim=-1)
    drop = (torch.cumsum(probs, dim=-1) - probs) >= p
    return torch.empty_like(x).scatter_(-1, order, values.masked_fill(drop, -float("inf")))


def torch_sample(x, temperature, k, p):
    """top-k by torch.topk, top-p on the k sorted survivors, torch.multinomial."""
    values, index = torch.topk(x.float() / temperature, k, dim=-1)
    probs = torch.softmax(values, dim=-1)
    probs = probs.masked_fill((torch.cumsum(probs, dim=-1) - probs) >= p, 0.0)
    return index.gather(-1, torch.multinomial(probs, 1))


def torch_sample_plain(x):
    return torch.multinomial(torch.softmax(x.float(), dim=-1), 1)


def mask_diff(a, b):
    """Entries kept by one mask and not the other (ties at the k-th value may go either way in torch)."""
    return f"{int((torch.isfinite(a) != torch.isfinite(b)).sum())} entries"


def no_diff(a, b):
    return "-"


def logits_op(name, variant, ignis_fn, torch_fn, mask):
    """An op over [rows, vocab] logits: a mask (logits read, masked logits written) or a sampler
    (logits read, int32 ids written)."""
    return Op(
        name=name,
        variant=variant,
        shapes=SAMPLING,
        dtypes=["f32", "bf16"],
        make_inputs=lambda shape, dtype: (normal(shape, dtype, 3.0),),
        ignis_fn=ignis_fn,
        torch_fn=torch_fn,
        bytes_moved=(lambda shape, dtype: 2 * numel(shape) * itemsize(dtype)) if mask
        else (lambda shape, dtype: numel(shape) * itemsize(dtype) + 4 * shape[0]),
        diff=mask_diff if mask else no_diff,
    )


def elementwise_op(name, n_in, ignis_fn, torch_fn):
    return Op(
        name=name,
        shapes=HIDDEN,
        dtypes=["bf16", "f32"],
        make_inputs=lambda shape, dtype: tuple(normal(shape, dtype, 2.0) for _ in range(n_in)),
        ignis_fn=ignis_fn,
        torch_fn=torch_fn,
        bytes_moved=lambda shape, dtype: (n_in + 1) * numel(shape) * itemsize(dtype),
    )


OPS = [
    Op(
        name="softmax",
        shapes=HIDDEN + VOCAB,
        dtypes=["bf16", "f32"],
        make_inputs=lambda shape, dtype: (normal(shape, dtype, 3.0),),
        ignis_fn=lambda x: ignis.softmax(x),
        torch_fn=lambda x: torch.softmax(x, dim=-1),
        bytes_moved=lambda shape, dtype: 2 * numel(shape) * itemsize(dtype),
    ),
    Op(
        name="softmax_backward",
        shapes=HIDDEN + VOCAB,
        dtypes=["bf16", "f32"],
        make_inputs=lambda shape, dtype: (softmax_rows(shape, dtype), normal(shape, dtype)),
        ignis_fn=lambda y, dy: ignis.softmax_backward(y, dy),
        torch_fn=lambda y, dy: torch._softmax_backward_data(dy, y, -1, y.dtype),
        bytes_moved=lambda shape, dtype: 3 * numel(shape) * itemsize(dtype),
    ),
    Op(
        name="cast",
        shapes=[(TOKENS, 16384)],
        dtypes=["f32->bf16", "bf16->f32"],
        make_inputs=lambda shape, pair: (normal(shape, cast_dtypes(pair)[0]), cast_dtypes(pair)[1]),
        ignis_fn=lambda x, dst: ignis.cast(x, dst),
        torch_fn=lambda x, dst: x.to(DTYPES[dst]),
        bytes_moved=lambda shape, pair: numel(shape) * sum(itemsize(d) for d in cast_dtypes(pair)),
    ),
    Op(
        name="layer_norm",
        shapes=HIDDEN,
        dtypes=["bf16", "f32"],
        make_inputs=lambda shape, dtype: tuple(norm_inputs(shape, dtype, 2)),
        ignis_fn=lambda x, w, b: ignis.layer_norm(x, w, b, EPS),
        torch_fn=lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b, EPS),
        bytes_moved=norm_bytes(1, 1, 2),
    ),
    Op(
        name="layer_norm_backward",
        shapes=HIDDEN,
        dtypes=["bf16", "f32"],
        make_inputs=with_graph(lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b, EPS), 2),
        ignis_fn=lambda x, w, b, y, dy: ignis.layer_norm_backward(x, w, dy, EPS)[0],
        torch_fn=lambda x, w, b, y, dy: torch.autograd.grad(y, (x, w, b), dy, retain_graph=True)[0],
        bytes_moved=norm_bytes(2, 1, 3),  # x, dy -> dx; weight -> dweight, dbias
    ),
    Op(
        name="rms_norm",
        shapes=HIDDEN,
        dtypes=["bf16", "f32"],
        make_inputs=lambda shape, dtype: tuple(norm_inputs(shape, dtype, 1)),
        ignis_fn=lambda x, w: ignis.rms_norm(x, w, EPS),
        torch_fn=torch_rms_norm,
        bytes_moved=norm_bytes(1, 1, 1),
    ),
    Op(
        name="rms_norm_backward",
        shapes=HIDDEN,
        dtypes=["bf16", "f32"],
        make_inputs=with_graph(torch_rms_norm, 1),
        ignis_fn=lambda x, w, y, dy: ignis.rms_norm_backward(x, w, dy, EPS)[0],
        torch_fn=lambda x, w, y, dy: torch.autograd.grad(y, (x, w), dy, retain_graph=True)[0],
        bytes_moved=norm_bytes(2, 1, 2),  # x, dy -> dx; weight -> dweight
    ),
    Op(
        name="cross_entropy",
        variant="fwd+bwd",
        shapes=VOCAB,
        dtypes=["bf16", "f32"],
        make_inputs=ce_inputs,
        ignis_fn=lambda logits, targets, flag: ignis.cross_entropy(logits, targets, PAD, flag=flag),
        torch_fn=torch_cross_entropy,
        bytes_moved=lambda shape, dtype: 2 * numel(shape) * itemsize(dtype),  # logits read, dlogits written
        diff=ce_diff,
    ),
    Op(
        name="rope",
        shapes=ROPE,
        dtypes=["bf16", "f32"],
        make_inputs=rope_inputs,
        ignis_fn=lambda x, inv_freq, cos, sin: ignis.rope(x, inv_freq),
        torch_fn=lambda x, inv_freq, cos, sin: torch_rope(x, cos, sin),
        bytes_moved=lambda shape, dtype: 2 * numel(shape) * itemsize(dtype),  # x read, y written
    ),
    Op(
        name="embedding",
        shapes=EMBED,
        dtypes=["bf16", "f32"],
        make_inputs=embed_inputs,
        ignis_fn=lambda table, ids, flag: ignis.embedding(table, ids, flag=flag),
        torch_fn=lambda table, ids, flag: F.embedding(ids, table),
        # rows gathered + output written + the int64 ids
        bytes_moved=lambda shape, dtype: 2 * shape[1] * shape[2] * itemsize(dtype) + 8 * shape[1],
    ),
    logits_op("top_k_mask", "k=50", lambda x: ignis.top_k_mask(x, 50), lambda x: torch_top_k_mask(x, 50), True),
    logits_op("top_k_mask", "k=1024", lambda x: ignis.top_k_mask(x, 1024), lambda x: torch_top_k_mask(x, 1024), True),
    logits_op("top_p_mask", "p=0.9", lambda x: ignis.top_p_mask(x, 0.9), lambda x: torch_top_p_mask(x, 0.9), True),
    logits_op("sample", "T=1", lambda x: ignis.sample(x, seed=1), torch_sample_plain, False),
    logits_op("sample", "T=0.8 k=50 p=0.9", lambda x: ignis.sample(x, temperature=0.8, top_k=50, top_p=0.9, seed=1),
              lambda x: torch_sample(x, 0.8, 50, 0.9), False),
    elementwise_op("gelu_tanh", 1, ignis.gelu_tanh, lambda x: F.gelu(x, approximate="tanh")),
    elementwise_op("silu", 1, ignis.silu, F.silu),
    elementwise_op("swiglu", 2, ignis.swiglu, lambda gate, up: F.silu(gate) * up),
]


def device_ms(fn, input_sets, reps, warmup):
    """Median device time of fn(*inputs) in ms, rotating through input_sets."""
    for i in range(warmup):
        fn(*input_sets[i % len(input_sets)])
    spin = getattr(torch.cuda, "_sleep", None)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    torch.cuda.synchronize()
    for i in range(reps):
        if spin is not None:
            spin(SPIN_CYCLES)
        starts[i].record()
        fn(*input_sets[(warmup + i) % len(input_sets)])
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def input_set_count(bytes_per_call):
    """At least 4 sets, and enough that the calls between two uses of one set move 3x L2."""
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 64 << 20)
    return max(4, math.ceil(3 * l2 / bytes_per_call) + 1)


def same_size_copy_bandwidth(nbytes, reps):
    """torch clone moving the bytes of a case (half read, half written), rotated past L2 as the
    cases are: what a plain copy reaches at that size, launch and ramp included."""
    elems = max(1, nbytes // 8)
    sets = [(torch.empty(elems, device="cuda", dtype=torch.float32),) for _ in range(input_set_count(nbytes))]
    ms = device_ms(lambda x: x.clone(), sets, reps, warmup=3)
    return 8 * elems / (ms * 1e-3) / 1e9


def free_cached_memory():
    """Returns torch's cached blocks to the driver, then waits out the slow period that follows (SETTLE_S)."""
    before = torch.cuda.memory_reserved()
    torch.cuda.empty_cache()
    freed = before - torch.cuda.memory_reserved()
    torch.cuda.synchronize()
    time.sleep(SETTLE_S + freed / SETTLE_BYTES_PER_S)


def gbs_text(gbs):
    """Whole GB/s for streaming cells; three significant digits below 100 GB/s, where a one-row sampling
    call lands (2 against 3 GB/s would hide a third of a difference)."""
    return f"{gbs:.0f}" if gbs >= 100 else f"{gbs:.3g}"


def run_case(op, shape, dtype, reps, copy_gbs):
    nbytes = op.bytes_moved(shape, dtype)
    sets = [op.make_inputs(shape, dtype) for _ in range(input_set_count(nbytes))]
    diff = op.diff(op.ignis_fn(*sets[0]), op.torch_fn(*sets[0]))
    ignis_gbs = nbytes / (device_ms(op.ignis_fn, sets, reps, warmup=5) * 1e-3) / 1e9
    torch_gbs = nbytes / (device_ms(op.torch_fn, sets, reps, warmup=5) * 1e-3) / 1e9
    del sets
    free_cached_memory()
    same_gbs = same_size_copy_bandwidth(nbytes, reps)
    free_cached_memory()
    name = f"{op.name} {op.variant}" if op.variant else op.name
    return (
        f"| {name} | {'x'.join(map(str, shape))} | {dtype} | {gbs_text(ignis_gbs)} | {gbs_text(torch_gbs)} | "
        f"{ignis_gbs / torch_gbs:.3f} | {100 * ignis_gbs / copy_gbs:.1f}% | {same_gbs:.0f} | "
        f"{100 * ignis_gbs / same_gbs:.0f}% | {diff} |"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="write the markdown table to this file too")
    names = list(dict.fromkeys(o.name for o in OPS))
    parser.add_argument("--ops", help="comma-separated op names (default: all): " + ", ".join(names))
    parser.add_argument("--reps", type=int, default=30, help="timed calls per case (median; at least 20)")
    parser.add_argument("--shapes", help="comma-separated shapes to keep, as the table writes them (4096x4096)")
    parser.add_argument("--dtypes", help="comma-separated dtypes to keep (bf16, f32)")
    args = parser.parse_args()
    if args.reps < 20:
        parser.error("--reps: at least 20")
    wanted = set(args.ops.split(",")) if args.ops else set(names)
    unknown = wanted - set(names)
    if unknown:
        parser.error(f"--ops: unknown {sorted(unknown)}; known: {names}")
    if not torch.cuda.is_available() or not ignis.cuda_available():
        sys.exit(f"bench_ops: needs a GPU for torch and ignis (ignis: {ignis.cuda_device_summary()})")

    torch.manual_seed(0)
    copy_gbs = same_size_copy_bandwidth(2 << 29, args.reps)  # a 512 MiB tensor cloned
    lines = [
        f"GPU: {ignis.cuda_device_summary()}; torch {torch.__version__}; ignis {ignis.__version__}; "
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        "",
        f"Device copy bandwidth (torch clone of 512 MiB, read + write): {copy_gbs:.0f} GB/s. "
        f"Median of {args.reps} calls per cell, device time, inputs rotated past L2. Same-size copy: a torch "
        "clone moving the case's bytes, timed the same way.",
        "",
        "| op | shape | dtype | ignis GB/s | torch GB/s | ignis/torch | ignis % of copy | same-size copy GB/s "
        "| ignis % of same-size copy | diff |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    print("\n".join(lines), flush=True)
    for op in OPS:
        if op.name not in wanted:
            continue
        for shape in op.shapes:
            if args.shapes and "x".join(map(str, shape)) not in args.shapes.split(","):
                continue
            for dtype in op.dtypes:
                if args.dtypes and dtype not in args.dtypes.split(","):
                    continue
                lines.append(run_case(op, shape, dtype, args.reps, copy_gbs))
                print(lines[-1], flush=True)
    verdict = ["", *targets.summary(lines)]
    print("\n".join(verdict))
    lines += verdict
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
