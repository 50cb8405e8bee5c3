#!/usr/bin/env python3
"""Attention forward benchmark: ignis.attention (the fused tensor-core kernel on bf16/f16) against
torch's scaled_dot_product_attention backends (flash, cuDNN, memory-efficient), in TFLOP/s.

Run on a GPU machine after `pip install .`:
    python3 bench/bench_attention.py [--out bench-attention.md] [--reps 20] [--dtype bf16]
    python3 bench/bench_attention.py --shapes 1x1024x9x64,1x512x32x128 --splits 0,1,2,4 --causal-only

Shapes follow the FlashAttention papers' sweep: batch * seqlen = 16384 tokens and heads * head_dim =
2048, seqlen 512..16384, head_dim 64 and 128, causal and full, then SMALL_GRIDS (one prompt, few heads:
grids too small to fill the GPU, where the kernel splits each tile's keys). --shapes names others, as
batch x seqlen x heads x head_dim. --splits times ignis once per num_splits value (0: the kernel's own
choice), a column each, the first one's in the ratio. FLOPs = 4 * batch * heads * seqlen^2 * head_dim
(two matmuls), halved when causal. Times are device times (bench_ops.device_ms: CUDA events, a spin
kernel queued first, median of --reps). torch gets [batch, heads, seqlen, head_dim] contiguous inputs
(its native layout), ignis the flash_attn layout [batch, seqlen, heads, head_dim]. The last column is
max |ignis - torch flash| over the output, a sanity check (both round to bf16).
"""
import argparse
import datetime
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import ignis
from bench_ops import device_ms, free_cached_memory

TOKENS = 16384
WIDTH = 2048  # heads * head_dim
SEQLENS = [512, 1024, 2048, 4096, 8192, 16384]
HEAD_DIMS = [64, 128]
# Grids too small to fill a GPU (one prompt, few heads), where the kernel splits each tile's keys:
# SmolLM2-135M's prefill shape and three longer ones; timed after the sweep unless --seqlens or --shapes narrow it.
SMALL_GRIDS = [(1, 1024, 9, 64), (1, 2048, 8, 128), (1, 4096, 4, 128), (1, 8192, 2, 64)]
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}
BACKENDS = {
    "torch flash": SDPBackend.FLASH_ATTENTION,
    "torch cudnn": SDPBackend.CUDNN_ATTENTION,
    "torch efficient": SDPBackend.EFFICIENT_ATTENTION,
}


def flops(batch, heads, seqlen, head_dim, causal):
    f = 4 * batch * heads * seqlen * seqlen * head_dim
    return f / 2 if causal else f


def tflops(f, ms):
    return f / (ms * 1e-3) / 1e12


def torch_call(backend, causal):
    def call(q, k, v):
        with sdpa_kernel(backend):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return call


def split_label(splits):
    return "ignis" if splits == 0 else f"ignis splits={splits}"


def bench_shape(batch, seqlen, heads, head_dim, causal, dtype, reps, split_values):
    sets = 2
    ours = [tuple(torch.randn(batch, seqlen, heads, head_dim, device="cuda", dtype=dtype) for _ in range(3))
            for _ in range(sets)]
    theirs = [tuple(x.transpose(1, 2).contiguous() for x in s) for s in ours]
    f = flops(batch, heads, seqlen, head_dim, causal)
    row = {"shape": f"B{batch} S{seqlen} H{heads} D{head_dim} {'causal' if causal else 'full'}"}
    for splits in split_values:
        ms = device_ms(lambda q, k, v: ignis.attention(q, k, v, causal=causal, num_splits=splits), ours, reps,
                       warmup=3)
        row[split_label(splits)] = tflops(f, ms)
    for name, backend in BACKENDS.items():
        try:
            ms = device_ms(torch_call(backend, causal), theirs, reps, warmup=3)
            row[name] = tflops(f, ms)
        except RuntimeError as e:  # a backend that does not take this shape or dtype
            row[name] = None
            print(f"  {name} skipped on {row['shape']}: {str(e).splitlines()[0]}", file=sys.stderr)
    try:
        ref = torch_call(SDPBackend.FLASH_ATTENTION, causal)(*theirs[0]).transpose(1, 2)
        row["diff"] = (ignis.attention(*ours[0], causal=causal).float() - ref.float()).abs().max().item()
    except RuntimeError:
        row["diff"] = None
    return row


def fmt(x, digits=1):
    return "-" if x is None else f"{x:.{digits}f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--dtype", choices=list(DTYPES), default="bf16")
    parser.add_argument("--seqlens", default=",".join(map(str, SEQLENS)))
    parser.add_argument("--shapes", help="batch x seqlen x heads x head_dim, comma-separated, instead of the sweep")
    parser.add_argument("--splits", default="0", help="num_splits values to time ignis with (0: automatic)")
    parser.add_argument("--causal-only", action="store_true")
    parser.add_argument("--out", help="also write the table to this markdown file")
    args = parser.parse_args()
    dtype = DTYPES[args.dtype]
    split_values = [int(x) for x in args.splits.split(",")]
    ours = [split_label(x) for x in split_values]
    if args.shapes:
        shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    else:
        shapes = [(TOKENS // seqlen, seqlen, WIDTH // head_dim, head_dim)
                  for head_dim in HEAD_DIMS for seqlen in map(int, args.seqlens.split(","))]
        if args.seqlens == parser.get_default("seqlens"):
            shapes += SMALL_GRIDS
    name = torch.cuda.get_device_name(0)
    lines = [f"#### Attention forward, {args.dtype}, {name}, {datetime.date.today()}", "",
             f"TFLOP/s (4 B H S^2 D, halved when causal); ratio = {ours[0]} / best torch backend.", "",
             "| shape | " + " | ".join(ours + list(BACKENDS)) + " | ratio | max diff |",
             "|---|" + "---:|" * (len(ours) + len(BACKENDS)) + "---:|"]
    print("\n".join(lines), flush=True)
    for causal in (True,) if args.causal_only else (False, True):
        for batch, seqlen, heads, head_dim in shapes:
            row = bench_shape(batch, seqlen, heads, head_dim, causal, dtype, args.reps, split_values)
            peers = [row[n] for n in BACKENDS if row[n] is not None]
            ratio = row[ours[0]] / max(peers) if peers else None
            line = (f"| {row['shape']} | " + " | ".join(fmt(row[n]) for n in ours + list(BACKENDS)) +
                    f" | {fmt(ratio, 2)} | {fmt(row['diff'], 4)} |")
            lines.append(line)
            print(line, flush=True)
            free_cached_memory()
    if args.out:
        with open(args.out, "w") as out:
            out.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
