#!/usr/bin/env python3
"""Time of chosen bench_ops.py cases against the row count: separates a per-call fixed cost
(launch, pipeline fill, tail, a second kernel) from the steady-state bandwidth.

    python3 bench/scaling_ops.py --cases layer_norm_backward:4096:bf16,rms_norm_backward:4096:bf16 \
        [--rows 1024,2048,4096,8192,16384] [--torch]

A case is NAME:COLUMNS:DTYPE. For each row count it prints the device time (bench_ops.device_ms:
median, spin kernel first, inputs rotated past L2) and the achieved GB/s; then the least-squares
line time = fixed + bytes / marginal over the row counts: `marginal` is the bandwidth the op
streams at once running, `fixed` what every call pays whatever its size.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def fit_line(xs, ys):
    """Least-squares intercept and slope of ys against xs (at least two distinct xs)."""
    if len(set(xs)) < 2:
        raise ValueError("fit_line: needs at least two distinct x values")
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


def time_rows(fn, op, shape, dtype, reps):
    import bench_ops

    nbytes = op.bytes_moved(shape, dtype)
    sets = [op.make_inputs(shape, dtype) for _ in range(bench_ops.input_set_count(nbytes))]
    ms = bench_ops.device_ms(fn(op), sets, reps, warmup=5)
    del sets
    bench_ops.free_cached_memory()
    return nbytes, ms


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", required=True, help="comma-separated NAME:COLUMNS:DTYPE")
    parser.add_argument("--rows", default="1024,2048,4096,8192,16384")
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--torch", action="store_true", help="also time torch's equivalent")
    args = parser.parse_args()
    rows = [int(r) for r in args.rows.split(",")]
    if len(set(rows)) < 2:
        parser.error("--rows: at least two different row counts")
    import torch  # here, not at the top: fit_line is tested where torch is not installed
    from profile_ops import find_op

    torch.manual_seed(0)
    who = [("ignis", lambda op: op.ignis_fn)] + ([("torch", lambda op: op.torch_fn)] if args.torch else [])
    print("| case | impl | rows | us | GB/s |\n| --- | --- | ---: | ---: | ---: |")
    fits = []
    for case in args.cases.split(","):
        name, columns, dtype = case.split(":")
        op = find_op(name)
        for label, fn in who:
            points = []
            for r in rows:
                nbytes, ms = time_rows(fn, op, (r, int(columns)), dtype, args.reps)
                points.append((nbytes, ms * 1e3))
                print(f"| {case} | {label} | {r} | {ms * 1e3:.1f} | {nbytes / (ms * 1e-3) / 1e9:.0f} |", flush=True)
            fixed_us, us_per_byte = fit_line([p[0] for p in points], [p[1] for p in points])
            fits.append(f"| {case} | {label} | {fixed_us:.1f} | {1e-3 / us_per_byte:.0f} |")
    print("\n| case | impl | fixed us | marginal GB/s |\n| --- | --- | ---: | ---: |")
    print("\n".join(fits))


if __name__ == "__main__":
    main()
