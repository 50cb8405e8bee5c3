#pragma once
// The byte-level alphabet of GPT-2 style BPE vocabularies: every byte value has its own
// printable code point, so token strings never hold spaces or control characters.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ignis::model {

// Printable bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) stand for themselves; the other 68 byte
// values, in increasing order, take the code points U+0100, U+0101, ...
char32_t byte_to_code_point(std::uint8_t byte);
std::optional<std::uint8_t> code_point_to_byte(char32_t cp);

// A token string (UTF-8 of byte-level code points) back to raw bytes; nullopt when it holds a
// code point outside the alphabet.
std::optional<std::string> byte_level_decode(std::string_view token);

}  // namespace ignis::model
