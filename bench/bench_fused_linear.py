#!/usr/bin/env python3
"""Decode matrix-vector benchmark: ignis.rmsnorm_matvec and ignis.matvec_add against torch
(F.rms_norm + F.linear, and y += F.linear) at SmolLM2-135M's decode shapes, one token (n = 1) by
default.

Run on a GPU machine after `pip install .`:
    python3 bench/bench_fused_linear.py [--rows 1] [--reps 20] [--out fused-linear.md]

Each timed batch queues a spin kernel (so the host's launch cost is hidden), then --calls calls
back to back, each on a different copy of the weights (together larger than L2, as the 30 layers
of a real decode step are), between two CUDA events; the reported time is the median batch over
--reps divided by --calls: device time per call, launch gaps between kernels included. GB/s counts
the weight bytes only (1 GB = 1e9 bytes). torch runs its ops in the weight dtype, as a bf16 model
would (x normalised in f32, cast to the weight dtype, F.linear, result cast back to f32).
"""
import argparse
import statistics

import torch
import torch.nn.functional as F

import ignis

SHAPES = [  # name, in, out
    ("qkv", 576, 960),
    ("o", 576, 576),
    ("gate|up", 576, 3072),
    ("down", 1536, 576),
    ("lm_head", 576, 49152),
]
DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32}
EPS = 1e-5
L2_BYTES = 200 << 20  # rotate through more weight bytes than any current L2 holds
SPIN_CYCLES = 2_000_000


def timed(fn, sets, calls, reps):
    """Median device microseconds per call of fn(set) over `calls` calls per batch."""
    spin = getattr(torch.cuda, "_sleep", None)
    for s in sets[:3]:
        fn(s)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if spin is not None:
            spin(SPIN_CYCLES)
        start.record()
        for i in range(calls):
            fn(sets[i % len(sets)])
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / calls)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1, help="tokens per call (n)")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--calls", type=int, default=20, help="calls per timed batch")
    parser.add_argument("--out", help="also write the table to this markdown file")
    args = parser.parse_args()
    dev = torch.device("cuda")
    n = args.rows
    lines = [
        f"#### fused linear, n = {n}, {ignis.cuda_device_summary()}",
        "",
        "| op | shape (out x in) | w dtype | ignis us | ignis GB/s | torch us | torch GB/s | max abs diff |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, k, m in SHAPES:
        for dname, dtype in DTYPES.items():
            w_bytes = m * k * torch.finfo(dtype).bits // 8
            copies = max(2, min(64, L2_BYTES // w_bytes + 1))
            gen = torch.Generator(device=dev).manual_seed(0)
            ws = [(torch.randn(m, k, device=dev, generator=gen) / k**0.5).to(dtype) for _ in range(copies)]
            x = torch.randn(n, k, device=dev)
            nw = torch.rand(k, device=dev) + 0.5
            y = torch.zeros(n, m, device=dev)

            def ig_norm(w):
                return ignis.rmsnorm_matvec(x, nw, w, EPS)

            def torch_norm(w):
                return F.linear(F.rms_norm(x, (k,), nw, EPS).to(dtype), w).float()

            def ig_add(w):
                ignis.matvec_add(x, w, y)

            def torch_add(w):
                y.add_(F.linear(x.to(dtype), w).float())

            diff = (ig_norm(ws[0]).double() - torch_norm(ws[0]).double()).abs().max().item()
            for op, ig, tr in (("rmsnorm_matvec", ig_norm, torch_norm), ("matvec_add", ig_add, torch_add)):
                t_ig = timed(ig, ws, args.calls, args.reps)
                t_tr = timed(tr, ws, args.calls, args.reps)
                lines.append(
                    f"| {op} | {m} x {k} | {dname} | {t_ig:.2f} | {w_bytes / t_ig / 1e3:.0f} | {t_tr:.2f} | "
                    f"{w_bytes / t_tr / 1e3:.0f} | {diff if op == 'rmsnorm_matvec' else float('nan'):.2g} |"
                )
            del ws
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
