#!/usr/bin/env python3
"""Golden outputs of SmolLM2-135M-Instruct from an independent implementation: Hugging Face
transformers loading the bundled GGUF (transformers dequantizes Q4_1/Q8_0 to float32 through the
`gguf` package and un-permutes q/k for rotate-half RoPE on its own).

Run on the GPU machine (transformers and torch are there; carry the `gguf` wheel):
    python3 scripts/hf_golden.py --model-dir DIR --model-file NAME --out-dir $OUT

Writes:
  smollm2_golden.json      prompt text, prompt ids (HF tokenizer + chat template), 64 greedy tokens
                           from float32 and from float64, versions
  smollm2_hf_logits.f32    float32 little-endian logits of the last prompt position (float64 model)
The C++ tests (tests/engine/test_hf_golden.cpp) compare ignis's CPU engine with both.
Greedy decoding here ignores stop tokens, so exactly 64 tokens are produced.
"""
import argparse
import json
import os

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

PROMPT = "Write a short story about a robot who learns to paint."
STEPS = 64


def greedy(model, prompt_ids, steps):
    ids = torch.tensor([prompt_ids])
    out = model(ids, use_cache=True)
    past, logits = out.past_key_values, out.logits[0, -1]
    first_logits = logits.clone()
    tokens = []
    for _ in range(steps):
        token = int(torch.argmax(logits))
        tokens.append(token)
        out = model(torch.tensor([[token]]), past_key_values=past, use_cache=True)
        past, logits = out.past_key_values, out.logits[0, -1]
    return tokens, first_logits


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--model-file", required=True)
    parser.add_argument("--out-dir", required=True)
    args = parser.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)

    tokenizer = AutoTokenizer.from_pretrained(args.model_dir, gguf_file=args.model_file)
    prompt_ids = tokenizer.apply_chat_template([{"role": "user", "content": PROMPT}], add_generation_prompt=True)
    if hasattr(prompt_ids, "input_ids"):
        prompt_ids = prompt_ids["input_ids"]
    prompt_ids = [int(t) for t in prompt_ids]

    results = {}
    for name, dtype in (("float32", torch.float32), ("float64", torch.float64)):
        model = AutoModelForCausalLM.from_pretrained(args.model_dir, gguf_file=args.model_file,
                                                     torch_dtype=torch.float32)
        model = model.to(dtype).eval()  # on the CPU: no TF32, no reduced-precision kernels
        with torch.no_grad():
            tokens, logits = greedy(model, prompt_ids, STEPS)
        results[name] = (tokens, logits)
        print(f"{name}: {tokens[:16]} ...")

    logits64 = results["float64"][1].to(torch.float32).numpy().astype("<f4")
    logits64.tofile(os.path.join(args.out_dir, "smollm2_hf_logits.f32"))
    golden = {
        "producer": "scripts/hf_golden.py",
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "model_file": args.model_file,
        "prompt": PROMPT,
        "prompt_ids": prompt_ids,
        "greedy_float32": results["float32"][0],
        "greedy_float64": results["float64"][0],
        "logits_file": "smollm2_hf_logits.f32 (last prompt position, float64 model, stored as float32)",
    }
    with open(os.path.join(args.out_dir, "smollm2_golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
    agree = sum(a == b for a, b in zip(results["float32"][0], results["float64"][0]))
    print(f"float32 and float64 greedy agree on {agree}/{STEPS} tokens; prompt has {len(prompt_ids)} ids")


if __name__ == "__main__":
    main()
