#pragma once
// Pre-tokenizers: split text into the pieces that BPE encodes one at a time. Hand-written
// matchers for the two schemes the engine supports, with the exact semantics of the reference
// tokenizers' regex engine (leftmost alternative wins, greedy runs, backtracking lookahead).
#include <string_view>
#include <vector>

namespace ignis::model {

enum class PreTokenizer {
  // GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  Gpt2,
  // SmolLM (tokenizer.json: Sequence[Digits(individual_digits=true), ByteLevel(use_regex=true)]):
  // every \p{N} code point is a piece of its own, then the GPT-2 pattern splits the text
  // between them, each stretch on its own (the lookahead sees a stretch's end as the end).
  SmolLM,
};

// tokenizer.ggml.pre names; throws ignis::Error for others.
PreTokenizer pre_tokenizer_from_name(std::string_view name);

// Appends the pieces of text to out, as views into text; together they cover it exactly.
void pre_tokenize(PreTokenizer kind, std::string_view text, std::vector<std::string_view>& out);

}  // namespace ignis::model
