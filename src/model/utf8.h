#pragma once
// Strict UTF-8 decoding for the tokenizer. Text given to encode may hold invalid bytes; they are
// passed through one byte at a time, so byte-level tokenization still covers every input.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ignis::model {

// Code points above this mark stand for single bytes that are not valid UTF-8: 0x110000 + byte.
constexpr char32_t kInvalidByteBase = 0x110000;

struct Utf8Char {
  char32_t cp;       // the code point, or kInvalidByteBase + byte for an invalid byte
  std::uint8_t len;  // bytes consumed, 1 to 4
};

// Decodes the character starting at s[pos] (pos < s.size()). Overlong forms, surrogates, values
// above U+10FFFF and truncated sequences are invalid: their first byte comes back alone.
Utf8Char utf8_decode(std::string_view s, std::size_t pos);

// Appends the UTF-8 encoding of a code point (at most U+10FFFF, not a surrogate).
void utf8_append(std::string& out, char32_t cp);

// The length of the longest prefix of s that does not end inside a UTF-8 sequence that more
// bytes could still complete. Bytes that can never become valid are not held back.
std::size_t utf8_complete_prefix(std::string_view s);

}  // namespace ignis::model
