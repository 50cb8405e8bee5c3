#!/usr/bin/env python3
"""Where a benchmarked call's time goes on the GPU: the launch gap, the kernels, the gaps between them.

bench_ops.py times a call with CUDA events after a spin kernel, so its time is the span from the spin
kernel's end to the call's last GPU work. This script repeats that pattern under torch.profiler (CUPTI
kernel records) and splits the span per call into:
  gap     from the spin kernel's end to the call's first kernel (launch, stream-ordered allocations)
  kernels the time at least one of the call's kernels runs (overlapping kernels count once)
  between the idle time between the call's kernels
and prints, per case, the median of each next to the CUDA-event time of the same calls. A same-size
torch clone of each case's bytes is traced the same way, as the reference a copy sets.

Run on a GPU machine after `pip install .`:
    python3 bench/call_timeline.py [--ops layer_norm_backward,rms_norm_backward] [--shape 4096x4096]
        [--dtype bf16] [--calls 30]
An op is named as bench_ops.py prints it; one with a single variant also by its name alone (cross_entropy).
"""
import argparse
import json
import os
import statistics
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile

import bench_ops
from kernel_names import short_name
from profile_ops import find_op


def traced_calls(fn, input_sets, calls):
    """bench_ops.device_ms (warm-up calls, then spin + fn(*inputs) `calls` times) under the profiler.
    Returns its median CUDA-event time (ms) and the trace's kernel and device-copy records (a torch clone is a
    cudaMemcpyAsync, not a kernel) [(name, start_us, end_us)];
    the warm-up kernels come before the first spin kernel, so split_calls leaves them out."""
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        event_ms = bench_ops.device_ms(fn, input_sets, calls, warmup=5)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    kernels = [(e["name"], float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0)))
               for e in trace.get("traceEvents", []) if e.get("cat") in ("kernel", "gpu_memcpy")]
    kernels.sort(key=lambda k: k[1])
    return event_ms, kernels


def split_calls(kernels):
    """The kernels after each spin kernel, up to the next: [(spin_end_us, [(name, start, end), ...])]."""
    calls = []
    for name, start, end in kernels:
        if "spin" in name.lower():
            calls.append((end, []))
        elif calls:
            calls[-1][1].append((name, start, end))
    return [c for c in calls if c[1]]


def busy_time(kernels):
    """The time at least one of the kernels runs: overlapping kernels (a programmatic dependent launch
    starts before the kernel it follows ends) count once."""
    total, covered_to = 0.0, float("-inf")
    for _, start, end in sorted(kernels, key=lambda k: k[1]):
        if end > covered_to:
            total += end - max(start, covered_to)
            covered_to = end
    return total


def summary(label, event_ms, kernels):
    calls = split_calls(kernels)
    if not calls:
        return f"| {label} | no kernels traced | | | | | |"
    gaps, busy, between, span = [], [], [], []
    for spin_end, ks in calls:
        gaps.append(ks[0][1] - spin_end)
        busy.append(busy_time(ks))
        last = max(end for _, _, end in ks)
        span.append(last - spin_end)
        between.append(last - ks[0][1] - busy[-1])
    names = ", ".join(sorted({short_name(k[0]) for k in calls[-1][1]}))
    med = statistics.median
    return (f"| {label} | {event_ms * 1e3:.1f} | {med(span):.1f} | {med(gaps):.1f} | {med(busy):.1f} | "
            f"{med(between):.1f} | {len(calls[-1][1])}: {names} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", default="layer_norm_backward,rms_norm_backward")
    parser.add_argument("--shape", default="4096x4096")
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    shape = tuple(int(n) for n in args.shape.split("x"))
    print(f"GPU: {torch.cuda.get_device_name()}; torch {torch.__version__}; {args.calls} calls a case, medians, us")
    print("")
    print("| case | event time | span | gap | kernels | between | kernels of the last call |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for name in args.ops.split(","):
        op = find_op(name)  # an op with variants by its full name: "top_k_mask k=50"
        nbytes = op.bytes_moved(shape, args.dtype)
        sets = [op.make_inputs(shape, args.dtype) for _ in range(bench_ops.input_set_count(nbytes))]
        label = f"{name} {args.shape} {args.dtype}"
        print(summary(f"ignis {label}", *traced_calls(op.ignis_fn, sets, args.calls)), flush=True)
        del sets
        bench_ops.free_cached_memory()
        elems = max(1, nbytes // 8)
        copies = [(torch.empty(elems, device="cuda", dtype=torch.float32),)
                  for _ in range(bench_ops.input_set_count(nbytes))]
        print(summary(f"torch clone of the same {nbytes / 1e6:.1f} MB", *traced_calls(lambda t: t.clone(), copies,
                                                                                       args.calls)), flush=True)
        del copies
        bench_ops.free_cached_memory()


if __name__ == "__main__":
    main()
