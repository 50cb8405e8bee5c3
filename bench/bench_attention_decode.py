#!/usr/bin/env python3
"""Decode attention benchmark: ignis.attention_decode (split-K over a KV cache read in place) against
torch's scaled_dot_product_attention with the flash and cuDNN backends, one query per sequence over
its first L keys. GB/s counts the K and V bytes an ideal kernel reads (2 * batch * L * heads_kv *
head_dim * itemsize); torch reads a contiguous [batch, heads_kv, L, head_dim] copy (GQA through
enable_gqa) that is made outside the timing.

Run on a GPU machine after `pip install .`:
    python3 bench/bench_attention_decode.py --out bench-decode.md [--reps 30]

Timing as bench_ops.py: CUDA events around one call, a spin kernel queued first, the median of
--reps calls, inputs rotated past L2. The diff column is the max abs difference from flash (or from
cuDNN where flash refuses the case).
"""
import argparse
import datetime
import sys

import torch

import ignis
from bench_ops import device_ms, free_cached_memory, input_set_count, same_size_copy_bandwidth

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}

# (batch, heads_q, heads_kv, head_dim, L, dtype): the peer shapes, then the engine's decode step.
CASES = [(b, 32, 8, 128, L, "bf16") for b in (1, 16, 64) for L in (1024, 4096, 16384)] + [
    (1, 9, 3, 64, 1088, "bf16"),
    (1, 9, 3, 64, 1088, "f32"),
]


def make_inputs(case):
    batch, hq, hkv, d, L, dtype = case
    t = DTYPES[dtype]
    q = torch.randn((batch, 1, hq, d), device="cuda", dtype=t)
    k = torch.randn((batch, L, hkv, d), device="cuda", dtype=t)
    v = torch.randn((batch, L, hkv, d), device="cuda", dtype=t)
    seqlens = torch.full((batch,), L, device="cuda", dtype=torch.int32)
    # torch's layout: [batch, heads, seqlen, head_dim], contiguous.
    tq = q.transpose(1, 2).contiguous()
    tk = k.transpose(1, 2).contiguous()
    tv = v.transpose(1, 2).contiguous()
    return (q, k, v, seqlens, tq, tk, tv)


def ignis_fn(q, k, v, seqlens, *_):
    return ignis.attention_decode(q, k, v, seqlens)


def torch_fn(backend):
    from torch.nn.attention import sdpa_kernel

    def run(q, k, v, seqlens, tq, tk, tv):
        with sdpa_kernel(backend):
            o = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, enable_gqa=tq.shape[1] != tk.shape[1])
        return o.transpose(1, 2)

    return run


def run_case(case, reps):
    from torch.nn.attention import SDPBackend

    batch, hq, hkv, d, L, dtype = case
    nbytes = 2 * batch * L * hkv * d * DTYPES[dtype].itemsize
    sets = [make_inputs(case) for _ in range(input_set_count(2 * nbytes))]  # cache + torch's copy
    ours = ignis_fn(*sets[0])
    ignis_gbs = nbytes / (device_ms(ignis_fn, sets, reps, warmup=5) * 1e-3) / 1e9
    cells, diff = [], "-"
    for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION):
        fn = torch_fn(backend)
        try:
            theirs = fn(*sets[0])
        except RuntimeError as e:  # the backend refuses this dtype or shape
            cells.append("n/a")
            print(f"  {backend.name}: {str(e).splitlines()[0]}", file=sys.stderr)
            continue
        if diff == "-":
            diff = f"{(ours.double() - theirs.double()).abs().max().item():.2g}"
        cells.append(f"{nbytes / (device_ms(fn, sets, reps, warmup=5) * 1e-3) / 1e9:.0f}")
    del sets
    free_cached_memory()
    return f"| {batch} | {hq}/{hkv} | {d} | {L} | {dtype} | {ignis_gbs:.0f} | {cells[0]} | {cells[1]} | {diff} |"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="write the markdown table to this file too")
    parser.add_argument("--reps", type=int, default=30, help="timed calls per case (median; at least 20)")
    args = parser.parse_args()
    if args.reps < 20:
        parser.error("--reps: at least 20")
    if not torch.cuda.is_available() or not ignis.cuda_available():
        sys.exit(f"bench_attention_decode: needs a GPU for torch and ignis (ignis: {ignis.cuda_device_summary()})")
    torch.manual_seed(0)
    copy_gbs = same_size_copy_bandwidth(2 << 29, args.reps)  # a 512 MiB tensor cloned, as bench_ops.py
    lines = [
        f"GPU: {ignis.cuda_device_summary()}; torch {torch.__version__}; ignis {ignis.__version__}; "
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        "",
        f"Device copy bandwidth: {copy_gbs:.0f} GB/s. GB/s of K+V read; median of {args.reps} calls, device time.",
        "",
        "| batch | heads q/kv | head_dim | L | dtype | ignis GB/s | torch flash GB/s | torch cudnn GB/s | diff |",
        "| ---: | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    print("\n".join(lines), flush=True)
    for case in CASES:
        lines.append(run_case(case, args.reps))
        print(lines[-1], flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
