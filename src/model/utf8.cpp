#include "model/utf8.h"

namespace ignis::model {

namespace {

bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// The number of bytes a sequence with this lead byte has; 0 for bytes that cannot lead.
int sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// The allowed range of the byte after the lead, which rules out overlong forms, surrogates and
// values above U+10FFFF; later continuation bytes are always 0x80..0xBF.
bool second_byte_ok(unsigned char lead, unsigned char b) {
  switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return is_continuation(b);
  }
}

}  // namespace

Utf8Char utf8_decode(std::string_view s, std::size_t pos) {
  const auto lead = static_cast<unsigned char>(s[pos]);
  const int n = sequence_length(lead);
  const Utf8Char invalid{kInvalidByteBase + lead, 1};
  if (n == 1) return {lead, 1};
  if (n == 0 || pos + n > s.size()) return invalid;
  if (!second_byte_ok(lead, static_cast<unsigned char>(s[pos + 1]))) return invalid;
  char32_t cp = lead & (0x7F >> n);
  for (int k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[pos + k]);
    if (!is_continuation(b)) return invalid;
    cp = (cp << 6) | (b & 0x3F);
  }
  return {cp, static_cast<std::uint8_t>(n)};
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::size_t utf8_complete_prefix(std::string_view s) {
  // An unfinished sequence is at most 3 bytes long: look back for its lead byte.
  for (std::size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const std::size_t start = s.size() - back;
    const auto b = static_cast<unsigned char>(s[start]);
    if (is_continuation(b)) continue;
    const int n = sequence_length(b);
    if (n <= static_cast<int>(back)) return s.size();  // ASCII, a complete sequence, or no lead
    // Held back only when every byte so far fits a sequence that could still be valid.
    if (back >= 2 && !second_byte_ok(b, static_cast<unsigned char>(s[start + 1]))) return s.size();
    return start;
  }
  return s.size();
}

}  // namespace ignis::model
