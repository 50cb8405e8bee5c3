// Tokenizer::from_gguf: the tokenizer.ggml.* keys (and tokenizer.chat_template) of a GGUF file.
#include "ignis/error.h"
#include "model/gguf.h"
#include "model/tokenizer.h"

namespace ignis::model {

namespace {

std::optional<std::int64_t> optional_int(const GgufFile& file, std::string_view key) {
  const GgufValue* v = file.find(key);
  if (v == nullptr) return std::nullopt;
  return v->as_int("gguf: key '" + std::string(key) + "'");
}

}  // namespace

TokenizerSpec tokenizer_spec_from_gguf(const GgufFile& file) {
  const std::string where = "tokenizer: " + file.source();
  for (const char* key : {"tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.merges"})
    if (!file.has(key)) throw Error(where + ": metadata key '" + key + "' is missing");
  const std::string model = file.get_string("tokenizer.ggml.model");
  if (model != "gpt2")
    throw Error(where + ": tokenizer model '" + model + "' not supported (only 'gpt2', byte-level BPE)");

  TokenizerSpec spec;
  spec.source = file.source();
  spec.tokens = file.get_array<std::string>("tokenizer.ggml.tokens");
  if (file.has("tokenizer.ggml.token_type")) {
    const auto raw = file.get_array<std::int32_t>("tokenizer.ggml.token_type");
    check_arg(raw.size() == spec.tokens.size(), where, "tokenizer.ggml.token_type length", spec.tokens.size(),
              raw.size());
    spec.types.reserve(raw.size());
    for (std::size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] < 1 || raw[i] > 6)
        fail_expected(where, "tokenizer.ggml.token_type[" + std::to_string(i) + "]", "a type in 1..6", raw[i]);
      spec.types.push_back(static_cast<TokenType>(raw[i]));
    }
  } else {
    spec.types.assign(spec.tokens.size(), TokenType::Normal);
  }

  const auto merges = file.get_array<std::string>("tokenizer.ggml.merges");
  spec.merges.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    // Byte-level token strings hold no spaces, so the one space separates the pair.
    const std::size_t space = merges[i].find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == merges[i].size() ||
        merges[i].find(' ', space + 1) != std::string::npos)
      fail_expected(where, "tokenizer.ggml.merges[" + std::to_string(i) + "]", "two tokens separated by one space",
                    "'" + merges[i] + "'");
    spec.merges.emplace_back(merges[i].substr(0, space), merges[i].substr(space + 1));
  }

  // Files written before the key existed used the GPT-2 pattern.
  spec.pre = pre_tokenizer_from_name(file.get_optional<std::string>("tokenizer.ggml.pre").value_or("gpt2"));
  spec.bos_id = optional_int(file, "tokenizer.ggml.bos_token_id");
  spec.eos_id = optional_int(file, "tokenizer.ggml.eos_token_id");
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
    if (const auto id = optional_int(file, key)) spec.end_of_turn_ids.push_back(*id);
  spec.chat_template = file.get_optional<std::string>("tokenizer.chat_template").value_or("");
  return spec;
}

Tokenizer Tokenizer::from_gguf(const GgufFile& file) { return from_spec(tokenizer_spec_from_gguf(file)); }

}  // namespace ignis::model
