#include "model/unicode_class.h"

#include <algorithm>
#include <array>

namespace ignis::model {

namespace {

bool in_ranges(std::span<const CodePointRange> ranges, char32_t cp) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                             [](char32_t c, const CodePointRange& r) { return c < r.first; });
  return it != ranges.begin() && cp <= std::prev(it)->last;
}

// The White_Space property of Unicode's PropList.txt, unchanged since Unicode 6.3.
constexpr CodePointRange kWhiteSpace[] = {
    {0x09, 0x0D}, {0x20, 0x20},     {0x85, 0x85},     {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
    {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000},
};

// Most text is ASCII: classify it by table lookup.
constexpr std::array<CharClass, 128> ascii_classes() {
  std::array<CharClass, 128> t{};
  for (int c = 0; c < 128; ++c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) t[c] = CharClass::Letter;
    else if (c >= '0' && c <= '9') t[c] = CharClass::Number;
    else if (c == ' ' || (c >= 0x09 && c <= 0x0D)) t[c] = CharClass::Space;
    else t[c] = CharClass::Other;
  }
  return t;
}
constexpr auto kAscii = ascii_classes();

}  // namespace

CharClass classify(char32_t cp) {
  if (cp < 128) return kAscii[cp];
  if (cp > 0x10FFFF) return CharClass::Other;
  if (in_ranges(kWhiteSpace, cp)) return CharClass::Space;
  if (in_ranges(letter_ranges(), cp)) return CharClass::Letter;
  if (in_ranges(number_ranges(), cp)) return CharClass::Number;
  return CharClass::Other;
}

}  // namespace ignis::model
