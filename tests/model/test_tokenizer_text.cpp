// The text layers under the tokenizer: character classes, strict UTF-8, the byte-level alphabet,
// and the pre-tokenizer patterns, against values worked out by hand from the Unicode tables and
// the regex semantics (leftmost alternative, greedy runs, backtracking lookahead).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ignis/error.h"
#include "model/byte_level.h"
#include "model/error_text.h"
#include "model/pretokenizer.h"
#include "model/unicode_class.h"
#include "model/utf8.h"

namespace ignis::model {
namespace {

TEST(UnicodeClass, HandPickedCodePoints) {
  EXPECT_EQ(classify(U'a'), CharClass::Letter);
  EXPECT_EQ(classify(U'Z'), CharClass::Letter);
  EXPECT_EQ(classify(U'\u00e9'), CharClass::Letter);      // é, Ll
  EXPECT_EQ(classify(U'\u00aa'), CharClass::Letter);      // ª, Lo
  EXPECT_EQ(classify(U'\u4e2d'), CharClass::Letter);      // 中, Lo
  EXPECT_EQ(classify(U'\u02b0'), CharClass::Letter);      // ʰ, Lm
  EXPECT_EQ(classify(U'\U00020000'), CharClass::Letter);  // CJK extension B, Lo
  EXPECT_EQ(classify(U'7'), CharClass::Number);
  EXPECT_EQ(classify(U'\u0663'), CharClass::Number);  // Arabic-Indic three, Nd
  EXPECT_EQ(classify(U'\u00bd'), CharClass::Number);  // ½, No
  EXPECT_EQ(classify(U'\u2167'), CharClass::Number);  // Roman numeral eight, Nl
  EXPECT_EQ(classify(U'\u00b2'), CharClass::Number);  // ², No
  EXPECT_EQ(classify(U' '), CharClass::Space);
  EXPECT_EQ(classify(U'\t'), CharClass::Space);
  EXPECT_EQ(classify(U'\v'), CharClass::Space);
  EXPECT_EQ(classify(U'\u0085'), CharClass::Space);
  EXPECT_EQ(classify(U'\u00a0'), CharClass::Space);
  EXPECT_EQ(classify(U'\u3000'), CharClass::Space);
  EXPECT_EQ(classify(U'\u2029'), CharClass::Space);
  // Python's str.isspace() says yes to U+001C..U+001F; White_Space (and \s) does not.
  EXPECT_EQ(classify(U'\u001c'), CharClass::Other);
  EXPECT_EQ(classify(U'\u200b'), CharClass::Other);  // zero-width space is Cf
  EXPECT_EQ(classify(U'\u0301'), CharClass::Other);  // combining acute, Mn
  EXPECT_EQ(classify(U'\U0001F600'), CharClass::Other);
  EXPECT_EQ(classify(U'_'), CharClass::Other);
  EXPECT_EQ(classify(U'\''), CharClass::Other);
  EXPECT_EQ(classify(kInvalidByteBase + 0xFF), CharClass::Other);
}

TEST(UnicodeClass, TablesSortedAndDisjoint) {
  for (auto ranges : {letter_ranges(), number_ranges()}) {
    ASSERT_FALSE(ranges.empty());
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      EXPECT_LE(ranges[i].first, ranges[i].last);
      if (i > 0) EXPECT_GT(ranges[i].first, ranges[i - 1].last + 1) << "ranges " << i - 1 << " and " << i << " touch";
    }
  }
}

TEST(Utf8, DecodesValidSequences) {
  const std::string s = "a\u00e9\u4e2d\U0001F600";
  std::vector<char32_t> cps;
  std::vector<int> lens;
  for (std::size_t i = 0; i < s.size();) {
    const Utf8Char c = utf8_decode(s, i);
    cps.push_back(c.cp);
    lens.push_back(c.len);
    i += c.len;
  }
  EXPECT_EQ(cps, (std::vector<char32_t>{U'a', 0xE9, 0x4E2D, 0x1F600}));
  EXPECT_EQ(lens, (std::vector<int>{1, 2, 3, 4}));
  std::string back;
  for (char32_t cp : cps) utf8_append(back, cp);
  EXPECT_EQ(back, s);
}

TEST(Utf8, RejectsInvalidSequencesByteByByte) {
  // Overlong '/', a surrogate, above U+10FFFF, a stray continuation, truncation, bad lead bytes.
  for (const std::string bad : {"\xC0\xAF", "\xE0\x80\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\x80", "\xE4\xB8",
                                "\xF0\x9F\x98", "\xFF", "\xF5\x80\x80\x80", "\xE4\x41\x80"}) {
    const Utf8Char c = utf8_decode(bad, 0);
    EXPECT_EQ(c.len, 1) << "input of " << bad.size() << " bytes";
    EXPECT_EQ(c.cp, kInvalidByteBase + static_cast<unsigned char>(bad[0]));
  }
  EXPECT_EQ(utf8_decode("\xF4\x8F\xBF\xBF", 0).cp, 0x10FFFFu);
  EXPECT_EQ(utf8_decode("\xEF\xBF\xBD", 0).cp, 0xFFFDu);
}

TEST(Utf8, CompletePrefixHoldsBackOnlyWhatCanComplete) {
  EXPECT_EQ(utf8_complete_prefix(""), 0u);
  EXPECT_EQ(utf8_complete_prefix("abc"), 3u);
  EXPECT_EQ(utf8_complete_prefix("ab\xE4"), 2u);          // lead of a 3-byte sequence
  EXPECT_EQ(utf8_complete_prefix("ab\xE4\xB8"), 2u);      // 2 of 3
  EXPECT_EQ(utf8_complete_prefix("ab\xE4\xB8\xAD"), 5u);  // complete 中
  EXPECT_EQ(utf8_complete_prefix("\xF0\x9F\x98"), 0u);    // 3 of 4
  EXPECT_EQ(utf8_complete_prefix("x\xF0\x9F\x98\x80"), 5u);
  EXPECT_EQ(utf8_complete_prefix("a\xC3"), 1u);
  // Bytes that can never complete: passed on at once.
  EXPECT_EQ(utf8_complete_prefix("a\xFF"), 2u);
  EXPECT_EQ(utf8_complete_prefix("a\x80"), 2u);
  EXPECT_EQ(utf8_complete_prefix("a\xED\xA0"), 3u);  // would be a surrogate
  EXPECT_EQ(utf8_complete_prefix("a\xE0\x80"), 3u);  // would be overlong
  EXPECT_EQ(utf8_complete_prefix("\x80\x80\x80"), 3u);
}

TEST(ByteLevel, AlphabetIsGpt2s) {
  EXPECT_EQ(byte_to_code_point('A'), U'A');
  EXPECT_EQ(byte_to_code_point('!'), U'!');
  EXPECT_EQ(byte_to_code_point(0xA1), 0xA1u);
  EXPECT_EQ(byte_to_code_point(0xFF), 0xFFu);
  EXPECT_EQ(byte_to_code_point(0x00), 0x100u);  // Ā
  EXPECT_EQ(byte_to_code_point(' '), 0x120u);   // Ġ: 0x00..0x20 are the first 33 remapped
  EXPECT_EQ(byte_to_code_point('\n'), 0x10Au);  // Ċ
  EXPECT_EQ(byte_to_code_point(0x7F), 0x121u);  // then 0x7F..0xA0
  EXPECT_EQ(byte_to_code_point(0xAD), 0x143u);  // the last one
  for (int b = 0; b < 256; ++b) EXPECT_EQ(code_point_to_byte(byte_to_code_point(static_cast<std::uint8_t>(b))), b);
  EXPECT_FALSE(code_point_to_byte(U' ').has_value());
  EXPECT_FALSE(code_point_to_byte(0x144).has_value());
  EXPECT_EQ(byte_level_decode("\u0120hello\u010a"), " hello\n");
  EXPECT_FALSE(byte_level_decode("a b").has_value());
}

std::vector<std::string> split(PreTokenizer kind, const std::string& text) {
  std::vector<std::string_view> pieces;
  pre_tokenize(kind, text, pieces);
  return {pieces.begin(), pieces.end()};
}

using Pieces = std::vector<std::string>;

TEST(PreTokenizeGpt2, WordsAndContractions) {
  const auto k = PreTokenizer::Gpt2;
  EXPECT_EQ(split(k, "Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split(k, "I'm here's"), (Pieces{"I", "'m", " here", "'s"}));
  EXPECT_EQ(split(k, "they'll we've you're he'd it't"),
            (Pieces{"they", "'ll", " we", "'ve", " you", "'re", " he", "'d", " it", "'t"}));
  // Contractions are lowercase only; an apostrophe otherwise joins the punctuation run.
  EXPECT_EQ(split(k, "DON'T 'RE"), (Pieces{"DON", "'", "T", " '", "RE"}));
  EXPECT_EQ(split(k, "''s"), (Pieces{"''", "s"}));
  EXPECT_EQ(split(k, "'steve"), (Pieces{"'s", "teve"}));
  EXPECT_EQ(split(k, " 's"), (Pieces{" '", "s"}));
  EXPECT_EQ(split(k, "abc123def"), (Pieces{"abc", "123", "def"}));
  EXPECT_EQ(split(k, " 42!? x"), (Pieces{" 42", "!?", " x"}));
  EXPECT_EQ(split(k, "caf\u00e9 \u4e2d\u6587 \u0661\u0662"), (Pieces{"caf\u00e9", " \u4e2d\u6587", " \u0661\u0662"}));
  EXPECT_EQ(split(k, "e\u0301"), (Pieces{"e", "\u0301"}));
  EXPECT_EQ(split(k, ""), Pieces{});
}

TEST(PreTokenizeGpt2, WhitespaceRunsGiveBackTheirLastCharacter) {
  const auto k = PreTokenizer::Gpt2;
  EXPECT_EQ(split(k, "a  b"), (Pieces{"a", " ", " b"}));
  EXPECT_EQ(split(k, "a   \n\n  b"), (Pieces{"a", "   \n\n ", " b"}));
  EXPECT_EQ(split(k, "x  "), (Pieces{"x", "  "}));  // at the end the run stays whole
  EXPECT_EQ(split(k, "\tfoo"), (Pieces{"\t", "foo"}));
  EXPECT_EQ(split(k, "a\n\nb"), (Pieces{"a", "\n", "\n", "b"}));
  EXPECT_EQ(split(k, "a \n"), (Pieces{"a", " \n"}));
  EXPECT_EQ(split(k, "  !"), (Pieces{" ", " !"}));
  // Only U+0020 may lead a word; other spaces stand alone.
  EXPECT_EQ(split(k, "a\u3000b"), (Pieces{"a", "\u3000", "b"}));
  EXPECT_EQ(split(k, "a\u00a0\u00a0b"), (Pieces{"a", "\u00a0", "\u00a0", "b"}));
  EXPECT_EQ(split(k, "a \u3000b"), (Pieces{"a", " ", "\u3000", "b"}));
  EXPECT_EQ(split(k, "hi\x1c"), (Pieces{"hi", "\x1c"}));
}

TEST(PreTokenizeGpt2, InvalidBytesArePunctuation) {
  EXPECT_EQ(split(PreTokenizer::Gpt2, "\xff\xfe" "ab \xc3"), (Pieces{"\xff\xfe", "ab", " \xc3"}));
}

TEST(PreTokenizeSmolLM, DigitsStandAloneAndSplitTheText) {
  const auto k = PreTokenizer::SmolLM;
  EXPECT_EQ(split(k, "3.14159"), (Pieces{"3", ".", "1", "4", "1", "5", "9"}));
  EXPECT_EQ(split(k, "abc123def"), (Pieces{"abc", "1", "2", "3", "def"}));
  // The stretch before a digit ends there, so its whitespace run is whole (GPT-2 gives "  ", " 1").
  EXPECT_EQ(split(k, "a   1"), (Pieces{"a", "   ", "1"}));
  EXPECT_EQ(split(PreTokenizer::Gpt2, "a   1"), (Pieces{"a", "  ", " 1"}));
  EXPECT_EQ(split(k, " 12 apples"), (Pieces{" ", "1", "2", " apples"}));
  EXPECT_EQ(split(k, "x\u00bd\u0662y"), (Pieces{"x", "\u00bd", "\u0662", "y"}));
  EXPECT_EQ(split(k, "Year 2024!"), (Pieces{"Year", " ", "2", "0", "2", "4", "!"}));
  EXPECT_EQ(split(k, "I'm 7's"), (Pieces{"I", "'m", " ", "7", "'s"}));
}

TEST(PreTokenize, PiecesCoverTheText) {
  const std::string text = "Mixed: caf\u00e9 12,345 \t\n  end's \U0001F600\U0001F600 \xff  ";
  for (auto kind : {PreTokenizer::Gpt2, PreTokenizer::SmolLM}) {
    std::string joined;
    for (const auto& p : split(kind, text)) {
      EXPECT_FALSE(p.empty());
      joined += p;
    }
    EXPECT_EQ(joined, text);
  }
}

TEST(PreTokenize, NamesFromGguf) {
  EXPECT_EQ(pre_tokenizer_from_name("gpt2"), PreTokenizer::Gpt2);
  EXPECT_EQ(pre_tokenizer_from_name("smollm"), PreTokenizer::SmolLM);
  EXPECT_ERROR_CONTAINS(pre_tokenizer_from_name("llama-bpe"), "pre-tokenizer 'llama-bpe' not supported");
}

}  // namespace
}  // namespace ignis::model
