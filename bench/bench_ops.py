#!/usr/bin/env python3
"""Kernel benchmark: achieved memory bandwidth of each ignis op against its torch equivalent on one
GPU, next to the device's copy bandwidth measured in the same run.

Run on a GPU machine after `pip install .`:
    python3 bench/bench_ops.py --out bench-ops.md [--ops softmax,cast] [--reps 30]

Every case times device work only: CUDA events around one call, a spin kernel queued first so the
host's launch overhead is hidden, warm-up calls first, the median of --reps calls, and calls that
rotate through enough input sets that L2 cannot serve a repeated input. GB/s counts the bytes an
ideal kernel moves (every input read once, every output written once), 1 GB = 1e9 bytes.

An op is one entry of OPS: name, shapes, dtypes, make_inputs(shape, dtype) -> tuple of arguments,
ignis_fn(*args), torch_fn(*args), bytes_moved(shape, dtype).
"""
import argparse
import datetime
import math
import statistics
import sys
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

import ignis

TOKENS = 4096
HIDDEN = [(TOKENS, 4096), (TOKENS, 8192), (TOKENS, 16384)]  # 7B-class model widths
VOCAB = [(TOKENS, 32000), (TOKENS, 128256)]  # Llama-2 and Llama-3 vocabularies

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}

# Spin cycles queued before each timed call: ~0.5 ms, far above the host's cost of one call.
SPIN_CYCLES = 1_000_000


@dataclass(frozen=True)
class Op:
    name: str
    shapes: Sequence[tuple]
    dtypes: Sequence[str]
    make_inputs: Callable[[tuple, str], tuple]
    ignis_fn: Callable
    torch_fn: Callable
    bytes_moved: Callable[[tuple, str], int]


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


def max_abs_diff(a, b):
    if isinstance(a, torch.Tensor):
        return (a.double() - b.double()).abs().max().item()
    return float("nan")


def copy_bandwidth(reps):
    """torch clone of a 512 MiB tensor: bytes read + written per second."""
    sets = [(torch.empty(1 << 27, device="cuda", dtype=torch.float32),) for _ in range(4)]
    ms = device_ms(lambda x: x.clone(), sets, reps, warmup=3)
    return 2 * sets[0][0].nbytes / (ms * 1e-3) / 1e9


def run_case(op, shape, dtype, reps, copy_gbs):
    nbytes = op.bytes_moved(shape, dtype)
    sets = [op.make_inputs(shape, dtype) for _ in range(input_set_count(nbytes))]
    diff = max_abs_diff(op.ignis_fn(*sets[0]), op.torch_fn(*sets[0]))
    ignis_gbs = nbytes / (device_ms(op.ignis_fn, sets, reps, warmup=5) * 1e-3) / 1e9
    torch_gbs = nbytes / (device_ms(op.torch_fn, sets, reps, warmup=5) * 1e-3) / 1e9
    del sets
    torch.cuda.empty_cache()
    return (
        f"| {op.name} | {'x'.join(map(str, shape))} | {dtype} | {ignis_gbs:.0f} | {torch_gbs:.0f} | "
        f"{ignis_gbs / torch_gbs:.2f} | {100 * ignis_gbs / copy_gbs:.0f}% | {diff:.2g} |"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="write the markdown table to this file too")
    parser.add_argument("--ops", help="comma-separated op names (default: all): " + ", ".join(o.name for o in OPS))
    parser.add_argument("--reps", type=int, default=30, help="timed calls per case (median; at least 20)")
    args = parser.parse_args()
    if args.reps < 20:
        parser.error("--reps: at least 20")
    wanted = set(args.ops.split(",")) if args.ops else {o.name for o in OPS}
    unknown = wanted - {o.name for o in OPS}
    if unknown:
        parser.error(f"--ops: unknown {sorted(unknown)}; known: {[o.name for o in OPS]}")
    if not torch.cuda.is_available() or not ignis.cuda_available():
        sys.exit(f"bench_ops: needs a GPU for torch and ignis (ignis: {ignis.cuda_device_summary()})")

    torch.manual_seed(0)
    copy_gbs = copy_bandwidth(args.reps)
    lines = [
        f"GPU: {ignis.cuda_device_summary()}; torch {torch.__version__}; ignis {ignis.__version__}; "
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        "",
        f"Device copy bandwidth (torch clone of 512 MiB, read + write): {copy_gbs:.0f} GB/s. "
        f"Median of {args.reps} calls per cell, device time, inputs rotated past L2.",
        "",
        "| op | shape | dtype | ignis GB/s | torch GB/s | ignis/torch | ignis % of copy | max abs diff |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    print("\n".join(lines), flush=True)
    for op in OPS:
        if op.name not in wanted:
            continue
        for shape in op.shapes:
            for dtype in op.dtypes:
                lines.append(run_case(op, shape, dtype, args.reps, copy_gbs))
                print(lines[-1], flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
