#!/usr/bin/env python3
"""What one call of each bench_ops.py op costs the host, against torch's equivalent, on small CUDA tensors.

bench_ops.py times the GPU; a small call (a decode step, a short prompt) waits on the host instead: argument
checks, the DLPack import, the output's allocation, the launches. Each case gets one warm-up call, then --calls
calls back to back; the enqueue time per call is the host clock before a synchronize (the GPU keeps up at these
sizes, so it is the host's cost), next to the same for torch's function.

    python3 bench/call_cost.py [--rows 4] [--dtype f32] [--calls 2000] [--ops softmax,rms_norm]

Shapes: --rows x 256 for row ops; 1 x 32000 for the sampling ops (a decode step's logits); rope [1, rows, 8, 64];
embedding rows ids into a 32000 x 256 table.
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_ops  # noqa: E402


def enqueue_us(fn, inputs, calls):
    fn(*inputs)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn(*inputs)
    enqueued = time.perf_counter()
    torch.cuda.synchronize()
    return (enqueued - start) / calls * 1e6


LOGITS_OPS = {"top_k_mask", "top_p_mask", "sample"}


# The small shape of `op` as its bench_ops.py shapes are laid out (rank 4: rope, rank 3: embedding).
def small_shape(op, rows):
    rank = len(op.shapes[0])
    if rank == 4:
        return (1, rows, 8, 64)
    if rank == 3:
        return (32000, rows, 256)
    return (1, 32000) if op.name in LOGITS_OPS else (rows, 256)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=4)
    parser.add_argument("--dtype", default="f32")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--ops", default="", help="comma-separated names as bench_ops.py prints them")
    args = parser.parse_args()
    wanted = set(filter(None, args.ops.split(",")))
    torch.manual_seed(0)
    print(f"Host time per call, {args.calls} calls back to back, {args.rows} rows, {args.dtype} (cast: f32->bf16); "
          f"{torch.cuda.get_device_name()}, torch {torch.__version__}\n")
    print("| op | shape | ignis us | torch us | ignis / torch |\n| --- | --- | ---: | ---: | ---: |")
    for op in bench_ops.OPS:
        label = f"{op.name} {op.variant}".strip()
        if wanted and op.name not in wanted and label not in wanted:
            continue
        dtype = "f32->bf16" if op.name == "cast" else args.dtype
        shape = small_shape(op, args.rows)
        inputs = op.make_inputs(shape, dtype)
        ours = enqueue_us(op.ignis_fn, inputs, args.calls)
        theirs = enqueue_us(op.torch_fn, inputs, args.calls)
        shape_text = "x".join(map(str, shape))
        print(f"| {label} | {shape_text} | {ours:.1f} | {theirs:.1f} | {ours / theirs:.2f} |", flush=True)


if __name__ == "__main__":
    main()
