#!/usr/bin/env python3
"""Sampling ops at batch sizes past bench_ops.py's 1 and 64 rows: ignis against torch, device time.

bench_ops.py's sampling cells cover one decode step of 1 or 64 sequences. A server batching hundreds
of sequences, or a speculative verifier scoring thousands of tokens, calls the same ops on 256-4096
rows, where the per-row lists of the multi-pass kernels shrink (src/cuda/ops/sampling.cu). This times
each op at 1-4096 rows of 32000 and 128256 logits (normal, stddev 3, as bench_ops.py's), the same way
bench_ops.py does (spin kernel first, median of --reps calls, inputs rotated past L2), and prints the
microseconds of each and torch's time over ignis's (above 1: ignis is faster).

Run on a GPU machine after `pip install .`:
    python3 bench/bench_sampling_rows.py [--rows 1,64,256,1024,4096] [--vocabs 32000,128256] [--reps 20]
"""
import argparse
import datetime

import torch

import ignis
from bench_ops import (DTYPES, device_ms, free_cached_memory, input_set_count, normal, torch_sample,
                       torch_sample_plain, torch_top_k_mask, torch_top_p_mask)


def torch_sample_top_p(x, p):
    """Sort, cumulative softmax mass, zero past the shortest prefix reaching p, torch.multinomial."""
    values, order = torch.sort(x.float(), dim=-1, descending=True)
    probs = torch.softmax(values, dim=-1)
    probs = probs.masked_fill((torch.cumsum(probs, dim=-1) - probs) >= p, 0.0)
    return order.gather(-1, torch.multinomial(probs, 1))


# (label, ignis call, torch call) on one [rows, vocab] logits tensor.
CASES = [
    ("top_p_mask p=0.9", lambda x: ignis.top_p_mask(x, 0.9), lambda x: torch_top_p_mask(x, 0.9)),
    ("top_k_mask k=1024", lambda x: ignis.top_k_mask(x, 1024), lambda x: torch_top_k_mask(x, 1024)),
    ("sample T=1", lambda x: ignis.sample(x, seed=1), torch_sample_plain),
    ("sample T=1 p=0.9", lambda x: ignis.sample(x, top_p=0.9, seed=1), lambda x: torch_sample_top_p(x, 0.9)),
    ("sample T=1 k=1024 p=0.9", lambda x: ignis.sample(x, top_k=1024, top_p=0.9, seed=1),
     lambda x: torch_sample(x, 1.0, 1024, 0.9)),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="1,64,256,1024,4096")
    parser.add_argument("--vocabs", default="32000,128256")
    parser.add_argument("--dtypes", default="f32,bf16")
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    torch.manual_seed(0)
    props = torch.cuda.get_device_properties(0)
    print(f"GPU: {props.name}; torch {torch.__version__}; "
          f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; median of {args.reps} calls\n")
    print("| op | shape | dtype | ignis us | torch us | torch / ignis |\n| --- | --- | --- | ---: | ---: | ---: |")
    faster = total = 0
    for label, ignis_fn, torch_fn in CASES:
        for vocab in (int(v) for v in args.vocabs.split(",")):
            for rows in (int(r) for r in args.rows.split(",")):
                for dtype in args.dtypes.split(","):
                    shape = (rows, vocab)
                    nbytes = rows * vocab * DTYPES[dtype].itemsize
                    sets = [(normal(shape, dtype, 3.0),) for _ in range(input_set_count(nbytes))]
                    ignis_us = device_ms(ignis_fn, sets, args.reps, warmup=3) * 1e3
                    torch_us = device_ms(torch_fn, sets, args.reps, warmup=3) * 1e3
                    del sets
                    free_cached_memory()
                    total += 1
                    faster += torch_us >= ignis_us
                    print(f"| {label} | {rows}x{vocab} | {dtype} | {ignis_us:.1f} | {torch_us:.1f} | "
                          f"{torch_us / ignis_us:.2f} |", flush=True)
    print(f"\nignis at least as fast as torch in {faster} of {total} cells.")


if __name__ == "__main__":
    main()
