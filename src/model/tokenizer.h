#pragma once
// The tokenizer of the inference engine: byte-level BPE (the GPT-2 family, tokenizer.ggml.model
// "gpt2"), with special tokens matched in the text, decoding to exact bytes, streaming decode
// that holds back partial UTF-8, and ChatML chat formatting.
//
// Every byte of the input maps to a token of the byte-level alphabet, so decode(encode(s)) == s,
// except for bytes the vocabulary lacks: SmolLM2's has no token for 0x04, 0x06, 0x13, 0x14, 0x16,
// 0x1D, 0xC0, 0xC1, 0xF1, 0xF2, 0xF5..0xFF, i.e. for those control characters and for code points
// U+40000..U+BFFFF. Such bytes are dropped, as the reference tokenizers do for a vocabulary
// without an unknown token.
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/bpe.h"
#include "model/chat_template.h"
#include "model/pretokenizer.h"

namespace ignis::model {

class GgufFile;

// The values of tokenizer.ggml.token_type.
enum class TokenType : std::int32_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

// What a tokenizer is built from, whichever file it came from.
struct TokenizerSpec {
  std::string source;                   // names the file in error messages
  std::vector<std::string> tokens;      // byte-level strings for normal tokens, plain text for added ones
  std::vector<TokenType> types;         // one per token
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  PreTokenizer pre = PreTokenizer::Gpt2;
  std::optional<std::int64_t> bos_id, eos_id;
  std::vector<std::int64_t> end_of_turn_ids;  // eot/eom ids the file names
  std::string chat_template;            // Jinja source; empty when none
};

// The tokenizer.ggml.* keys of a GGUF file as a spec (from_gguf builds from this; tests change
// a field and build a variant). Throws for missing keys and unsupported models.
TokenizerSpec tokenizer_spec_from_gguf(const GgufFile& file);

class Tokenizer {
 public:
  // From the tokenizer.ggml.* keys (and tokenizer.chat_template) of a GGUF file.
  static Tokenizer from_gguf(const GgufFile& file);
  // From a Hugging Face tokenizer.json of a byte-level BPE model. bos/eos and the chat template
  // come from a tokenizer_config.json in the same folder, when there is one.
  static Tokenizer from_hf_json(const std::string& path);
  // Validates a spec and builds its tables; throws ignis::Error naming the problem.
  static Tokenizer from_spec(TokenizerSpec spec);

  // Special tokens (control type) in the text become their ids when parse_special, else they
  // are encoded as plain text; user-defined added tokens are always matched. No BOS is added.
  std::vector<std::int32_t> encode(std::string_view text, bool parse_special = true) const;
  // The exact bytes of the tokens, which may end inside a UTF-8 sequence. skip_special drops
  // control and unknown tokens. Throws for ids outside the vocabulary.
  std::string decode(std::span<const std::int32_t> ids, bool skip_special = false) const;
  // The raw bytes of one token (a control token's text as written).
  std::string token_bytes(std::int32_t id) const;

  std::int32_t vocab_size() const { return static_cast<std::int32_t>(text_.size()); }
  std::optional<std::int32_t> bos_id() const { return bos_; }
  std::optional<std::int32_t> eos_id() const { return eos_; }
  // eos, the eot/eom ids the file names, and control tokens that end a turn or a document
  // (<|im_end|>, <|endoftext|>, <|eot_id|>, ...); sorted, no repeats.
  std::vector<std::int32_t> stop_ids() const { return stop_ids_; }

  // Whether the file holds a chat template (apply_chat_template throws for unsupported ones).
  bool has_chat_template() const { return !chat_template_.empty(); }
  std::string apply_chat_template(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

 private:
  Tokenizer() = default;
  void check_id(std::int32_t id, const char* where) const;
  void encode_plain(std::string_view text, std::vector<std::int32_t>& out) const;

  struct Special {
    std::string text;
    std::int32_t id;
    bool control;  // matched only when parse_special
  };

  std::string source_;
  std::vector<std::string> text_;   // token strings as stored
  std::vector<std::string> bytes_;  // what each token decodes to
  std::vector<TokenType> types_;
  BpeMerges merges_;
  std::array<std::int32_t, 256> byte_ids_{};
  PreTokenizer pre_ = PreTokenizer::Gpt2;
  std::vector<Special> specials_;         // longest first
  std::array<bool, 256> special_first_{};  // first bytes of specials_, to skip most positions fast
  std::optional<std::int32_t> bos_, eos_;
  std::vector<std::int32_t> stop_ids_;
  std::string chat_template_;
  std::optional<ChatFormat> chat_format_;
};

// Streams decoded text: feed ids one at a time and get back only complete UTF-8; a code point
// split across tokens is held back until its last byte arrives. flush() returns what is held.
// Bytes that can never complete a code point are passed on, so nothing is held forever.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}
  std::string push(std::int32_t id);
  std::string flush();

 private:
  const Tokenizer* tokenizer_;
  std::string pending_;
};

}  // namespace ignis::model
