#pragma once
// The character classes the pre-tokenizer patterns use: \p{L}, \p{N} and \s.
#include <cstdint>
#include <span>

namespace ignis::model {

struct CodePointRange {
  char32_t first;
  char32_t last;  // inclusive
};

// Sorted, disjoint ranges of general categories L* and N*, generated into unicode_tables.cpp by
// scripts/gen_unicode_tables.py.
std::span<const CodePointRange> letter_ranges();
std::span<const CodePointRange> number_ranges();

enum class CharClass : std::uint8_t { Letter, Number, Space, Other };

// Space is the Unicode White_Space property (what \s matches in the reference tokenizers'
// regex engine), not Python's str.isspace. Code points outside Unicode, and bytes that are not
// valid UTF-8 (the pre-tokenizer passes them as char32_t values above 0x10FFFF), are Other.
CharClass classify(char32_t cp);

}  // namespace ignis::model
