#!/usr/bin/env python3
"""Attention backward benchmark: ignis.attention_backward (the fused tensor-core backward on bf16/f16) against
the backward of torch's scaled_dot_product_attention backends (flash, cuDNN, memory-efficient), in TFLOP/s.

Run on a GPU machine after `pip install .`:
    python3 bench/bench_attention_backward.py [--out bench-attention-backward.md] [--reps 20] [--dtype bf16]

Shapes are bench_attention.py's sweep (batch * seqlen = 16384 tokens, heads * head_dim = 2048). FLOPs =
2.5 x the forward's (five matmuls against two): 10 * batch * heads * seqlen^2 * head_dim, halved when causal.
ignis is timed from its forward's o and lse (ignis.attention_backward alone: its prepare, main and finish
kernels); torch through torch.autograd.grad of its forward's output with the graph kept, which runs its
backward kernels only. Times are device times (bench_ops.device_ms). The last column is max |dq - torch flash's
dq|, a sanity check.
"""
import argparse
import datetime
import sys

import torch

import ignis
from bench_attention import BACKENDS, DTYPES, HEAD_DIMS, SEQLENS, TOKENS, WIDTH, fmt, tflops, torch_call
from bench_ops import device_ms, free_cached_memory


def backward_flops(batch, heads, seqlen, head_dim, causal):
    f = 10 * batch * heads * seqlen * seqlen * head_dim
    return f / 2 if causal else f


def bench_shape(batch, seqlen, heads, head_dim, causal, dtype, reps):
    sets = 2
    shape = (batch, seqlen, heads, head_dim)
    ours = []
    for _ in range(sets):
        q, k, v, dout = (torch.randn(shape, device="cuda", dtype=dtype) for _ in range(4))
        o, lse = ignis.attention(q, k, v, causal=causal, return_lse=True)
        ours.append((dout, q, k, v, o, lse))
    f = backward_flops(batch, heads, seqlen, head_dim, causal)
    row = {"shape": f"B{batch} S{seqlen} H{heads} D{head_dim} {'causal' if causal else 'full'}"}
    ms = device_ms(lambda *args: ignis.attention_backward(*args, causal=causal), ours, reps, warmup=3)
    row["ignis"] = tflops(f, ms)
    flash_dq = None
    for name, backend in BACKENDS.items():
        try:
            theirs = []
            for dout, q, k, v, _, _ in ours:
                leaves = [x.transpose(1, 2).contiguous().requires_grad_() for x in (q, k, v)]
                out = torch_call(backend, causal)(*leaves)
                theirs.append((out, leaves, dout.transpose(1, 2).contiguous()))
            grad = lambda out, leaves, dout: torch.autograd.grad(out, leaves, dout, retain_graph=True)  # noqa: E731
            ms = device_ms(grad, theirs, reps, warmup=3)
            row[name] = tflops(f, ms)
            if name == "torch flash":
                flash_dq = grad(*theirs[0])[0].transpose(1, 2)
        except RuntimeError as e:  # a backend that does not take this shape or dtype
            row[name] = None
            print(f"  {name} skipped on {row['shape']}: {str(e).splitlines()[0]}", file=sys.stderr)
        free_cached_memory()
    row["diff"] = None
    if flash_dq is not None:
        dq = ignis.attention_backward(*ours[0], causal=causal)[0]
        row["diff"] = (dq.float() - flash_dq.float()).abs().max().item()
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--dtype", choices=list(DTYPES), default="bf16")
    parser.add_argument("--seqlens", default=",".join(map(str, SEQLENS)))
    parser.add_argument("--shapes", help="batch x seqlen x heads x head_dim, comma-separated, instead of the sweep")
    parser.add_argument("--causal-only", action="store_true")
    parser.add_argument("--out", help="also write the table to this markdown file")
    args = parser.parse_args()
    dtype = DTYPES[args.dtype]
    if args.shapes:
        shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    else:
        shapes = [(TOKENS // seqlen, seqlen, WIDTH // head_dim, head_dim)
                  for head_dim in HEAD_DIMS for seqlen in map(int, args.seqlens.split(","))]
    name = torch.cuda.get_device_name(0)
    lines = [f"#### Attention backward, {args.dtype}, {name}, {datetime.date.today()}", "",
             "TFLOP/s (10 B H S^2 D, halved when causal); ratio = ignis / best torch backend.", "",
             "| shape | ignis | " + " | ".join(BACKENDS) + " | ratio | max dq diff |",
             "|---|" + "---:|" * (1 + len(BACKENDS)) + "---:|---:|"]
    print("\n".join(lines), flush=True)
    for causal in (True,) if args.causal_only else (False, True):
        for batch, seqlen, heads, head_dim in shapes:
            row = bench_shape(batch, seqlen, heads, head_dim, causal, dtype, args.reps)
            peers = [row[n] for n in BACKENDS if row[n] is not None]
            ratio = row["ignis"] / max(peers) if peers else None
            line = (f"| {row['shape']} | {fmt(row['ignis'])} | " + " | ".join(fmt(row[n]) for n in BACKENDS) +
                    f" | {fmt(ratio, 2)} | {fmt(row['diff'], 4)} |")
            lines.append(line)
            print(line, flush=True)
            free_cached_memory()
    if args.out:
        with open(args.out, "w") as out:
            out.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
