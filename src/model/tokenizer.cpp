#include "model/tokenizer.h"

#include <algorithm>
#include <unordered_map>

#include "ignis/error.h"
#include "model/byte_level.h"
#include "model/utf8.h"

namespace ignis::model {

namespace {

// Control tokens that end a turn or a document in the chat formats of common models.
constexpr std::string_view kEndOfTurnTexts[] = {
    "<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|end|>", "<end_of_turn>",
};

bool is_special(TokenType t) { return t == TokenType::Control || t == TokenType::Unknown; }

std::int32_t checked_id(const std::string& source, const char* what, std::int64_t id, std::size_t vocab) {
  if (id < 0 || id >= static_cast<std::int64_t>(vocab))
    fail_expected("tokenizer: " + source, what, "an id in [0, " + std::to_string(vocab) + ")", id);
  return static_cast<std::int32_t>(id);
}

}  // namespace

Tokenizer Tokenizer::from_spec(TokenizerSpec spec) {
  const std::string where = "tokenizer: " + spec.source;
  if (spec.tokens.empty()) throw Error(where + ": the vocabulary is empty");
  check_arg(spec.types.size() == spec.tokens.size(), where, "token types",
            std::to_string(spec.tokens.size()) + " (one per token)", spec.types.size());
  if (spec.tokens.size() > static_cast<std::size_t>(INT32_MAX)) throw Error(where + ": vocabulary too large");

  Tokenizer t;
  t.source_ = spec.source;
  t.types_ = std::move(spec.types);
  t.text_ = std::move(spec.tokens);
  t.pre_ = spec.pre;

  // The first of repeated strings wins, as in the reference converters.
  std::unordered_map<std::string_view, std::int32_t> ids;
  ids.reserve(t.text_.size());
  for (std::size_t i = 0; i < t.text_.size(); ++i) ids.try_emplace(t.text_[i], static_cast<std::int32_t>(i));
  auto lookup = [&](const std::string& s) -> std::optional<std::int32_t> {
    const auto it = ids.find(s);
    if (it == ids.end()) return std::nullopt;
    return it->second;
  };

  t.bytes_.resize(t.text_.size());
  for (std::size_t i = 0; i < t.text_.size(); ++i) {
    const TokenType type = t.types_[i];
    if (type == TokenType::Control || type == TokenType::Unknown || type == TokenType::UserDefined) {
      t.bytes_[i] = t.text_[i];
    } else {
      // A string outside the byte-level alphabet cannot come from BPE; show it as written.
      t.bytes_[i] = byte_level_decode(t.text_[i]).value_or(t.text_[i]);
    }
  }

  for (int b = 0; b < 256; ++b) {
    std::string s;
    utf8_append(s, byte_to_code_point(static_cast<std::uint8_t>(b)));
    t.byte_ids_[b] = lookup(s).value_or(-1);
  }

  for (std::size_t r = 0; r < spec.merges.size(); ++r) {
    const auto& [a, b] = spec.merges[r];
    const auto ia = lookup(a), ib = lookup(b), im = lookup(a + b);
    if (!ia || !ib || !im) {
      const std::string& missing = !ia ? a : !ib ? b : a + b;
      throw Error(where + ": merge " + std::to_string(r) + " '" + a + " " + b + "': token '" + missing +
                  "' is not in the vocabulary");
    }
    t.merges_.add(*ia, *ib, *im);
  }

  for (std::size_t i = 0; i < t.text_.size(); ++i) {
    const TokenType type = t.types_[i];
    if ((type != TokenType::Control && type != TokenType::UserDefined) || t.text_[i].empty()) continue;
    t.specials_.push_back({t.text_[i], static_cast<std::int32_t>(i), type == TokenType::Control});
    t.special_first_[static_cast<unsigned char>(t.text_[i][0])] = true;
  }
  std::stable_sort(t.specials_.begin(), t.specials_.end(),
                   [](const Special& x, const Special& y) { return x.text.size() > y.text.size(); });

  const std::size_t n = t.text_.size();
  if (spec.bos_id) t.bos_ = checked_id(spec.source, "bos token id", *spec.bos_id, n);
  if (spec.eos_id) t.eos_ = checked_id(spec.source, "eos token id", *spec.eos_id, n);
  if (t.eos_) t.stop_ids_.push_back(*t.eos_);
  for (std::int64_t id : spec.end_of_turn_ids)
    t.stop_ids_.push_back(checked_id(spec.source, "end-of-turn token id", id, n));
  for (const Special& s : t.specials_) {
    if (s.control &&
        std::find(std::begin(kEndOfTurnTexts), std::end(kEndOfTurnTexts), s.text) != std::end(kEndOfTurnTexts))
      t.stop_ids_.push_back(s.id);
  }
  std::sort(t.stop_ids_.begin(), t.stop_ids_.end());
  t.stop_ids_.erase(std::unique(t.stop_ids_.begin(), t.stop_ids_.end()), t.stop_ids_.end());

  t.chat_template_ = std::move(spec.chat_template);
  if (!t.chat_template_.empty()) t.chat_format_ = ChatFormat::recognize(t.chat_template_);
  return t;
}

void Tokenizer::encode_plain(std::string_view text, std::vector<std::int32_t>& out) const {
  std::vector<std::string_view> pieces;
  pre_tokenize(pre_, text, pieces);
  for (std::string_view piece : pieces) merges_.encode(piece, byte_ids_, out);
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
  std::vector<std::int32_t> out;
  out.reserve(text.size() / 3 + 1);
  std::size_t plain_start = 0;
  for (std::size_t i = 0; i < text.size();) {
    const Special* hit = nullptr;
    if (special_first_[static_cast<unsigned char>(text[i])]) {
      for (const Special& s : specials_) {
        if ((!s.control || parse_special) && text.compare(i, s.text.size(), s.text) == 0) {
          hit = &s;
          break;
        }
      }
    }
    if (hit == nullptr) {
      ++i;
      continue;
    }
    encode_plain(text.substr(plain_start, i - plain_start), out);
    out.push_back(hit->id);
    i += hit->text.size();
    plain_start = i;
  }
  encode_plain(text.substr(plain_start), out);
  return out;
}

void Tokenizer::check_id(std::int32_t id, const char* where) const {
  if (id < 0 || id >= vocab_size())
    fail_expected(std::string("tokenizer: ") + where, "token id", "an id in [0, " + std::to_string(vocab_size()) + ")",
                  id);
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids, bool skip_special) const {
  std::string out;
  for (std::int32_t id : ids) {
    check_id(id, "decode");
    if (skip_special && is_special(types_[id])) continue;
    out += bytes_[id];
  }
  return out;
}

std::string Tokenizer::token_bytes(std::int32_t id) const {
  check_id(id, "token_bytes");
  return bytes_[id];
}

std::string Tokenizer::apply_chat_template(std::span<const ChatMessage> messages, bool add_generation_prompt) const {
  if (chat_template_.empty()) throw Error("tokenizer: " + source_ + ": the model has no chat template");
  if (!chat_format_) {
    constexpr std::size_t kShown = 120;
    throw Error("chat template not supported: only ChatML (<|im_start|>/<|im_end|>) is; the template begins \"" +
                chat_template_.substr(0, kShown) + (chat_template_.size() > kShown ? "...\"" : "\""));
  }
  return chat_format_->apply(messages, add_generation_prompt);
}

std::string StreamDecoder::push(std::int32_t id) {
  pending_ += tokenizer_->token_bytes(id);
  const std::size_t n = utf8_complete_prefix(pending_);
  std::string out = pending_.substr(0, n);
  pending_.erase(0, n);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace ignis::model
