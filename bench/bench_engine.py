#!/usr/bin/env python3
"""End-to-end generation speed: ignis against Hugging Face transformers, in the same run, on the
same GPU, same model file, batch 1, greedy.

    python3 bench/bench_engine.py --ignis build/src/cli/ignis --model SmolLM2-135M-Instruct.Q4_1.gguf \
        [--prompt 1024] [--new 128] [--out engine.md]

transformers loads the GGUF itself (dequantized to float, through the `gguf` package) and is timed
the way shared/tools/peers.py times it: a warm-up forward, then the prompt's forward plus the
argmax of its last logits (TTFT), then one forward per new token with a host sync each (TBT,
median). ignis is timed by `ignis bench` (one warm-up generation, then the measured one; TTFT
from the call to the first sampled id on the host, TBT the median gap between ids).
"""
import argparse
import os
import re
import subprocess
import sys
import time

import torch

dev = "cuda"


@torch.no_grad()
def time_hf(model, prompt_len, new, seed=0):
    from transformers import DynamicCache

    vocab = model.config.vocab_size
    gen = torch.Generator(device="cpu").manual_seed(seed)
    ids = torch.randint(0, vocab, (1, prompt_len), generator=gen).to(dev)
    model(ids[:, :64], use_cache=True)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = model(ids, past_key_values=DynamicCache(), use_cache=True)
    nxt = out.logits[:, -1].argmax(-1, keepdim=True)
    torch.cuda.synchronize()
    ttft = (time.perf_counter() - t0) * 1e3
    cache = out.past_key_values
    steps = []
    for _ in range(new):
        t1 = time.perf_counter()
        out = model(nxt, past_key_values=cache, use_cache=True)
        cache = out.past_key_values
        nxt = out.logits[:, -1].argmax(-1, keepdim=True)
        torch.cuda.synchronize()
        steps.append((time.perf_counter() - t1) * 1e3)
    steps.sort()
    return ttft, steps[len(steps) // 2]


def run_ignis(binary, model, weights, prompt_len, new):
    cmd = [binary, "bench", "--model", model, "--device", "cuda", "--weights", weights, "--prompt-tokens",
           str(prompt_len), "-n", str(new), "--warmup", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    text = proc.stdout + proc.stderr
    print(text.strip())
    m = re.search(r"TTFT ([0-9.]+) ms, TBT median ([0-9.]+) ms", text)
    if proc.returncode != 0 or m is None:
        raise RuntimeError(f"ignis bench failed (rc {proc.returncode}): {text[-400:]}")
    attention = re.search(r"on cuda, (.*) attention, [0-9]+ graph", text)
    return float(m.group(1)), float(m.group(2)), attention.group(1) if attention else "?"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ignis", required=True, help="the ignis CLI binary")
    parser.add_argument("--model", required=True, help="the SmolLM2 GGUF file")
    parser.add_argument("--prompt", type=int, default=1024)
    parser.add_argument("--new", type=int, default=128)
    parser.add_argument("--out", default=None, help="markdown table to write")
    args = parser.parse_args()

    import transformers
    from transformers import AutoModelForCausalLM

    rows = []
    name = torch.cuda.get_device_name()
    model_dir, model_file = os.path.split(os.path.abspath(args.model))
    hf_best_ttft = hf_best_tbt = float("inf")
    for dtype in (torch.float32, torch.bfloat16):
        model = AutoModelForCausalLM.from_pretrained(model_dir, gguf_file=model_file, dtype=torch.float32)
        model = model.to(dev, dtype).eval()
        impl = getattr(model.config, "_attn_implementation", "?")
        ttft, tbt = time_hf(model, args.prompt, args.new)
        del model
        torch.cuda.empty_cache()
        label = f"HF transformers {transformers.__version__} ({impl} attention)"
        rows.append((label, str(dtype)[6:], ttft, tbt))
        print(f"[hf] {rows[-1]}", flush=True)
        hf_best_ttft, hf_best_tbt = min(hf_best_ttft, ttft), min(hf_best_tbt, tbt)

    for weights in ("bf16", "f32"):
        ttft, tbt, attention = run_ignis(args.ignis, args.model, weights, args.prompt, args.new)
        rows.append((f"ignis ({attention} attention, CUDA graph decode)", weights, ttft, tbt))
        print(f"[ignis] {rows[-1]}", flush=True)

    lines = [
        f"{name}, SmolLM2-135M-Instruct ({model_file}), batch 1, greedy, prompt {args.prompt} tokens, "
        f"{args.new} new tokens, torch {torch.__version__}. Ratios against the faster HF run "
        f"(TTFT {hf_best_ttft:.2f} ms, TBT {hf_best_tbt:.3f} ms).",
        "",
        "| engine | weights | TTFT ms | TBT median ms | HF TTFT / TTFT | HF TBT / TBT |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for label, dtype, ttft, tbt in rows:
        ratios = f"{hf_best_ttft / ttft:.2f} | {hf_best_tbt / tbt:.2f}"
        lines.append(f"| {label} | {dtype} | {ttft:.2f} | {tbt:.3f} | {ratios} |")
    table = "\n".join(lines)
    print("\n" + table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
