#include "model/pretokenizer.h"

#include <string>

#include "ignis/error.h"
#include "model/unicode_class.h"
#include "model/utf8.h"

namespace ignis::model {

namespace {

// The text decoded once: code point i spans bytes [offset[i], offset[i + 1]).
struct Decoded {
  std::vector<char32_t> cps;
  std::vector<CharClass> classes;
  std::vector<std::size_t> offsets;
};

Decoded decode(std::string_view text) {
  Decoded d;
  d.cps.reserve(text.size());
  d.classes.reserve(text.size());
  d.offsets.reserve(text.size() + 1);
  for (std::size_t i = 0; i < text.size();) {
    const Utf8Char c = utf8_decode(text, i);
    d.cps.push_back(c.cp);
    d.classes.push_back(classify(c.cp));
    d.offsets.push_back(i);
    i += c.len;
  }
  d.offsets.push_back(text.size());
  return d;
}

// The end of the GPT-2 pattern's match at code point i, within a stretch ending at `end`.
std::size_t gpt2_match(const Decoded& d, std::size_t i, std::size_t end) {
  const auto& cp = d.cps;
  const auto& cls = d.classes;
  if (cp[i] == U'\'' && i + 1 < end) {
    const char32_t a = cp[i + 1];
    if (a == U's' || a == U't' || a == U'm' || a == U'd') return i + 2;
    if (i + 2 < end) {
      const char32_t b = cp[i + 2];
      if ((a == U'r' && b == U'e') || (a == U'v' && b == U'e') || (a == U'l' && b == U'l')) return i + 3;
    }
  }
  // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional U+0020, then a run of one class.
  // The space is taken only when a run follows it; otherwise it is whitespace handled below.
  const std::size_t k = (cp[i] == U' ' && i + 1 < end && cls[i + 1] != CharClass::Space) ? i + 1 : i;
  if (cls[k] != CharClass::Space) {
    std::size_t j = k + 1;
    while (j < end && cls[j] == cls[k]) ++j;
    return j;
  }
  std::size_t j = i + 1;
  while (j < end && cls[j] == CharClass::Space) ++j;
  // `\s+(?!\S)`: a run that reaches the end matches whole; one followed by a non-space gives
  // back its last character, so that character can lead the next piece. A single whitespace
  // character before a non-space falls to `\s+`.
  if (j < end && j - i >= 2) return j - 1;
  return j;
}

void gpt2_split(std::string_view text, const Decoded& d, std::size_t begin, std::size_t end,
                std::vector<std::string_view>& out) {
  for (std::size_t i = begin; i < end;) {
    const std::size_t j = gpt2_match(d, i, end);
    out.push_back(text.substr(d.offsets[i], d.offsets[j] - d.offsets[i]));
    i = j;
  }
}

}  // namespace

PreTokenizer pre_tokenizer_from_name(std::string_view name) {
  if (name == "gpt2") return PreTokenizer::Gpt2;
  if (name == "smollm") return PreTokenizer::SmolLM;
  throw Error("tokenizer: pre-tokenizer '" + std::string(name) + "' not supported (supported: gpt2, smollm)");
}

void pre_tokenize(PreTokenizer kind, std::string_view text, std::vector<std::string_view>& out) {
  if (text.empty()) return;
  const Decoded d = decode(text);
  const std::size_t n = d.cps.size();
  if (kind == PreTokenizer::Gpt2) {
    gpt2_split(text, d, 0, n, out);
    return;
  }
  std::size_t stretch = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (d.classes[i] != CharClass::Number) continue;
    gpt2_split(text, d, stretch, i, out);
    out.push_back(text.substr(d.offsets[i], d.offsets[i + 1] - d.offsets[i]));
    stretch = i + 1;
  }
  gpt2_split(text, d, stretch, n, out);
}

}  // namespace ignis::model
