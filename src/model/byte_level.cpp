#include "model/byte_level.h"

#include <array>

#include "model/utf8.h"

namespace ignis::model {

namespace {

constexpr bool stands_for_itself(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

constexpr std::array<char32_t, 256> make_byte_table() {
  std::array<char32_t, 256> t{};
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) t[b] = stands_for_itself(b) ? static_cast<char32_t>(b) : next++;
  return t;
}
constexpr auto kByteToCp = make_byte_table();

// The alphabet spans U+0021..U+0143; index by code point.
constexpr char32_t kAlphabetEnd = 0x144;
constexpr std::array<std::int16_t, kAlphabetEnd> make_cp_table() {
  std::array<std::int16_t, kAlphabetEnd> t{};
  for (auto& v : t) v = -1;
  for (int b = 0; b < 256; ++b) t[kByteToCp[b]] = static_cast<std::int16_t>(b);
  return t;
}
constexpr auto kCpToByte = make_cp_table();

}  // namespace

char32_t byte_to_code_point(std::uint8_t byte) { return kByteToCp[byte]; }

std::optional<std::uint8_t> code_point_to_byte(char32_t cp) {
  if (cp >= kAlphabetEnd || kCpToByte[cp] < 0) return std::nullopt;
  return static_cast<std::uint8_t>(kCpToByte[cp]);
}

std::optional<std::string> byte_level_decode(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  for (std::size_t i = 0; i < token.size();) {
    const Utf8Char c = utf8_decode(token, i);
    const auto byte = code_point_to_byte(c.cp);
    if (!byte) return std::nullopt;
    out += static_cast<char>(*byte);
    i += c.len;
  }
  return out;
}

}  // namespace ignis::model
