#!/usr/bin/env python3
"""Runs chosen bench_ops.py cases a few times each, for a profiler to watch (ncu, nsys).

    ncu --kernel-name-base demangled -k regex:ignis:: python3 bench/profile_ops.py \
        --cases layer_norm_backward:4096x4096:bf16,top_p_mask:1x262144:bf16 [--calls 2] [--torch]

A case is NAME:SHAPE:DTYPE with NAME as bench_ops.py prints it ("top_p_mask p=0.9" may be given as
top_p_mask when the op has one variant). Each case gets fresh inputs, one warm-up call, then --calls
calls of ignis (and of torch with --torch), with torch.cuda.nvtx ranges named after the case.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_ops  # noqa: E402


def find_op(name):
    matches = [op for op in bench_ops.OPS if name in (op.name, f"{op.name} {op.variant}".strip())]
    if len(matches) != 1:
        known = sorted({f"{op.name} {op.variant}".strip() for op in bench_ops.OPS})
        sys.exit(f"profile_ops: '{name}' names {len(matches)} ops; known: {known}")
    return matches[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", required=True, help="comma-separated NAME:SHAPE:DTYPE")
    parser.add_argument("--calls", type=int, default=2)
    parser.add_argument("--torch", action="store_true", help="also call torch's equivalent")
    args = parser.parse_args()
    torch.manual_seed(0)
    for case in args.cases.split(","):
        name, shape_text, dtype = case.split(":")
        op = find_op(name)
        shape = tuple(int(s) for s in shape_text.split("x"))
        inputs = op.make_inputs(shape, dtype)
        fns = [("ignis", op.ignis_fn)] + ([("torch", op.torch_fn)] if args.torch else [])
        for who, fn in fns:
            fn(*inputs)
            torch.cuda.synchronize()
            with torch.cuda.nvtx.range(f"{who} {case}"):
                for _ in range(args.calls):
                    fn(*inputs)
            torch.cuda.synchronize()
        print(f"ran {case}", flush=True)


if __name__ == "__main__":
    main()
