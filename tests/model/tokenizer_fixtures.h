#pragma once
// A tiny byte-level BPE vocabulary whose encodings can be worked out by hand: token b (0..255)
// is the single byte b, then a few merges and added tokens.
#include <string>

#include "model/byte_level.h"
#include "model/tokenizer.h"
#include "model/utf8.h"

namespace ignis::test {

// Ids of the tiny vocabulary beyond the 256 bytes.
enum TinyId : std::int32_t {
  kLo = 256, kHe, kLl, kHel, kHello, kAa, kSpaceW, kSpace1,
  kImPrefix, kImStart, kImEnd, kEndOfText, kToolTag, kTinyVocab,
};

inline std::string byte_token(unsigned char b) {
  std::string s;
  model::utf8_append(s, model::byte_to_code_point(b));
  return s;
}

// The SmolLM2-135M-Instruct template, as stored in its GGUF.
inline const std::string kSmolLM2Template =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' "
    "+ message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";

inline model::TokenizerSpec tiny_spec() {
  using model::TokenType;
  model::TokenizerSpec s;
  s.source = "tiny";
  for (int b = 0; b < 256; ++b) s.tokens.push_back(byte_token(static_cast<unsigned char>(b)));
  s.types.assign(256, TokenType::Normal);
  // Rank order matters: "lo" first, so "hello" builds as h e l l o -> h e l lo -> he l lo -> hel lo.
  const std::pair<const char*, const char*> merges[] = {
      {"l", "o"}, {"h", "e"}, {"l", "l"}, {"he", "l"}, {"hel", "lo"}, {"a", "a"}, {"\u0120", "w"}, {"\u0120", "1"},
  };
  for (const auto& [a, b] : merges) {
    s.merges.emplace_back(a, b);
    s.tokens.push_back(std::string(a) + b);
    s.types.push_back(TokenType::Normal);
  }
  // "<|im" comes first, so matching must prefer the longest special, not the lowest id.
  const std::pair<const char*, TokenType> added[] = {
      {"<|im", TokenType::Control}, {"<|im_start|>", TokenType::Control}, {"<|im_end|>", TokenType::Control},
      {"<|endoftext|>", TokenType::Control}, {"<tool>", TokenType::UserDefined},
  };
  for (const auto& [text, type] : added) {
    s.tokens.push_back(text);
    s.types.push_back(type);
  }
  s.bos_id = kImStart;
  s.eos_id = kEndOfText;
  s.chat_template = kSmolLM2Template;
  return s;
}

}  // namespace ignis::test
