// The tokenizer of the bundled SmolLM2-135M-Instruct GGUF: hand-checked ids, the vectors of an
// independent implementation (tests/model/data/tokenizer_vectors_smollm2.json, written by
// scripts/tokenizer_vectors.py), round trips of random UTF-8, streaming, the chat template, speed.
// Skipped when the model (or, for the vectors, the JSON) is absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "model/gguf.h"
#include "model/model_paths.h"
#include "model/sample_files.h"
#include "model/tokenizer.h"
#include "model/utf8.h"

namespace ignis::model {
namespace {

using Ids = std::vector<std::int32_t>;
using nlohmann::json;

// Loaded once: the vocabulary and merge tables take a moment to build.
const Tokenizer* smollm2() {
  static const std::optional<Tokenizer> t = []() -> std::optional<Tokenizer> {
    const std::string path = test::find_smollm2();
    if (path.empty()) return std::nullopt;
    return Tokenizer::from_gguf(GgufFile::open(path));
  }();
  return t ? &*t : nullptr;
}

#define REQUIRE_SMOLLM2()                                                                  \
  const Tokenizer* tok_ptr = smollm2();                                                    \
  if (tok_ptr == nullptr) GTEST_SKIP() << "SmolLM2 GGUF not found (scripts/setup.sh fetches it)"; \
  const Tokenizer& tok = *tok_ptr

TEST(TokenizerSmolLM2, Metadata) {
  REQUIRE_SMOLLM2();
  EXPECT_EQ(tok.vocab_size(), 49152);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.token_bytes(0), "<|endoftext|>");
  EXPECT_EQ(tok.token_bytes(1), "<|im_start|>");
  EXPECT_EQ(tok.token_bytes(2), "<|im_end|>");
  // <|endoftext|> (0) and <|im_end|> (2, also eos).
  EXPECT_EQ(tok.stop_ids(), (Ids{0, 2}));
  EXPECT_TRUE(tok.has_chat_template());
}

// Worked out from the vocabulary: the digits are tokens 32..41 in order, '.' is 30, 'Ġ' (a space)
// 216 and 'ĠĠ' 256; whole words that are tokens come out as one.
TEST(TokenizerSmolLM2, HandCheckedIds) {
  REQUIRE_SMOLLM2();
  EXPECT_EQ(tok.token_bytes(19556), "Hello");
  EXPECT_EQ(tok.token_bytes(905), " world");
  EXPECT_EQ(tok.encode("Hello world"), (Ids{19556, 905}));
  EXPECT_EQ(tok.token_bytes(32), "0");
  EXPECT_EQ(tok.token_bytes(41), "9");
  EXPECT_EQ(tok.encode("12345"), (Ids{33, 34, 35, 36, 37}));
  EXPECT_EQ(tok.encode("3.14159"), (Ids{35, 30, 33, 36, 33, 37, 41}));
  EXPECT_EQ(tok.token_bytes(216), " ");
  EXPECT_EQ(tok.token_bytes(256), "  ");
  EXPECT_EQ(tok.token_bytes(33662), " hello");
  // Runs of spaces give their last space to the next word: "  hello" is "Ġ" "Ġhello".
  EXPECT_EQ(tok.encode(" hello  hello   hello"), (Ids{33662, 216, 33662, 256, 33662}));
  EXPECT_EQ(tok.encode("<|im_start|>user\n"), (Ids{1, tok.encode("user")[0], tok.encode("\n")[0]}));
  EXPECT_EQ(tok.encode("<|im_end|>"), (Ids{2}));
  EXPECT_NE(tok.encode("<|im_end|>", false), (Ids{2}));
}

std::optional<json> load_vectors() {
  const auto path = test::source_root() / "tests/model/data/tokenizer_vectors_smollm2.json";
  std::ifstream in(path);
  if (!in) return std::nullopt;
  return json::parse(in);
}

#define REQUIRE_VECTORS(name)                                                                              \
  const std::optional<json> name = load_vectors();                                                         \
  if (!name) FAIL() << "tests/model/data/tokenizer_vectors_smollm2.json (committed) absent: run "             \
                       "scripts/tokenizer_vectors.py on the GPU machine (see its header)"

TEST(TokenizerSmolLM2, MatchesIndependentVectors) {
  REQUIRE_SMOLLM2();
  REQUIRE_VECTORS(vectors);
  // The same vocabulary with the plain GPT-2 pre-tokenizer, for the gpt2_ids.
  TokenizerSpec spec = tokenizer_spec_from_gguf(GgufFile::open(test::find_smollm2()));
  spec.pre = PreTokenizer::Gpt2;
  const Tokenizer gpt2 = Tokenizer::from_spec(std::move(spec));

  int cases = 0, transformers_cases = 0;
  for (const json& c : vectors->at("cases")) {
    const std::string text = c.at("text").get<std::string>();
    const Ids ids = c.at("ids").get<Ids>();
    EXPECT_EQ(tok.encode(text), ids) << "text: " << text;
    if (!c.value("decode_differs", false)) EXPECT_EQ(tok.decode(ids), text);
    if (c.contains("gpt2_ids")) EXPECT_EQ(gpt2.encode(text), c.at("gpt2_ids").get<Ids>()) << "gpt2 text: " << text;
    // transformers rebuilds the tokenizer from the GGUF with one of the two pre-tokenizers.
    if (c.contains("transformers_ids")) {
      const Ids t = c.at("transformers_ids").get<Ids>();
      EXPECT_TRUE(t == ids || t == gpt2.encode(text)) << "transformers ids match neither pre-tokenizer: " << text;
      ++transformers_cases;
    }
    ++cases;
  }
  EXPECT_GE(cases, 50);
  std::printf("%d cases, %d with transformers ids\n", cases, transformers_cases);
}

TEST(TokenizerSmolLM2, ChatTemplateMatchesVectors) {
  REQUIRE_SMOLLM2();
  REQUIRE_VECTORS(vectors);
  for (const char* key : {"chat", "chat_with_system"}) {
    ASSERT_TRUE(vectors->contains(key)) << "no '" << key << "' in the vectors (written without transformers)";
    const json& chat = vectors->at(key);
    std::vector<ChatMessage> messages;
    for (const json& m : chat.at("messages")) messages.push_back({m.at("role"), m.at("content")});
    const std::string text = chat.at("text").get<std::string>();
    EXPECT_EQ(tok.apply_chat_template(messages, chat.at("add_generation_prompt").get<bool>()), text);
    if (chat.contains("ids")) EXPECT_EQ(tok.encode(text), chat.at("ids").get<Ids>());
  }
}

TEST(TokenizerSmolLM2, ChatTemplateByHand) {
  REQUIRE_SMOLLM2();
  // The template adds its default system prompt when the first message is not a system one.
  const std::vector<ChatMessage> two_turns{{"user", "Hi"}, {"assistant", "Hello! How can I help?"}, {"user", "2+2?"}};
  EXPECT_EQ(tok.apply_chat_template(two_turns, true),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello! How can I help?<|im_end|>\n"
            "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n");
  const std::vector<ChatMessage> system_first{{"system", "Be brief."}, {"user", "Hi"}};
  EXPECT_EQ(tok.apply_chat_template(system_first, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
}

// Code points the vocabulary can encode: every Unicode scalar value except the control characters
// and the planes 4..11 whose UTF-8 bytes (0x04, 0x06, 0x13, 0x14, 0x16, 0x1D; lead bytes 0xF1,
// 0xF2) have no token in SmolLM2's vocabulary.
bool encodable(char32_t cp) {
  if (cp == 0x04 || cp == 0x06 || cp == 0x13 || cp == 0x14 || cp == 0x16 || cp == 0x1D) return false;
  if (cp >= 0xD800 && cp <= 0xDFFF) return false;
  return cp < 0x40000 || cp > 0xBFFFF;
}

// Random text from pools that exercise each path: words, digits, whitespace runs, punctuation,
// combining marks, CJK, emoji (4 bytes), supplementary planes, special-token text.
std::string random_text(std::mt19937& rng) {
  static const std::vector<std::pair<char32_t, char32_t>> pools = {
      {U'a', U'z'},         {U'A', U'Z'},         {U'0', U'9'},         {U' ', U' '},         {U'\t', U'\r'},
      {U'!', U'/'},         {0xC0, 0x24F},        {0x300, 0x36F},       {0x391, 0x3C9},       {0x410, 0x44F},
      {0x4E00, 0x9FFF},     {0xAC00, 0xD7A3},     {0x3000, 0x3000},     {0xA0, 0xA0},         {0x2000, 0x206F},
      {0x1F300, 0x1FAFF},   {0x20000, 0x2A6DF},   {0xE0000, 0xE007F},   {0x100000, 0x10FFFD}, {0x0, 0x7F},
      {0x80, 0xFFFF},       {0x10000, 0x10FFFF},
  };
  static const char* specials[] = {"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_start", "<|"};
  std::uniform_int_distribution<int> len(0, 48), pick(0, static_cast<int>(pools.size())), run(1, 5);
  std::string s;
  const int n = len(rng);
  for (int i = 0; i < n; ++i) {
    const int p = pick(rng);
    if (p == static_cast<int>(pools.size())) {
      s += specials[rng() % std::size(specials)];
      continue;
    }
    const int repeat = run(rng);  // runs of one class: "   ", "123", "aaaa"
    for (int r = 0; r < repeat; ++r) {
      char32_t cp;
      do {
        cp = std::uniform_int_distribution<char32_t>(pools[p].first, pools[p].second)(rng);
      } while (!encodable(cp));
      utf8_append(s, cp);
    }
  }
  return s;
}

TEST(TokenizerSmolLM2, RandomUtf8RoundTrips) {
  REQUIRE_SMOLLM2();
  std::mt19937 rng(20240611);
  for (int trial = 0; trial < 400; ++trial) {
    const std::string s = random_text(rng);
    for (bool parse_special : {true, false}) {
      const Ids ids = tok.encode(s, parse_special);
      ASSERT_EQ(tok.decode(ids), s) << "trial " << trial << " parse_special " << parse_special;
      // Streaming gives the same bytes, each piece complete UTF-8.
      StreamDecoder stream(tok);
      std::string streamed;
      for (std::int32_t id : ids) {
        const std::string piece = stream.push(id);
        ASSERT_EQ(utf8_complete_prefix(piece), piece.size());
        for (std::size_t i = 0; i < piece.size();) {
          const Utf8Char c = utf8_decode(piece, i);
          ASSERT_LT(c.cp, kInvalidByteBase) << "stream emitted a broken code point, trial " << trial;
          i += c.len;
        }
        streamed += piece;
      }
      EXPECT_EQ(stream.flush(), "");
      ASSERT_EQ(streamed, s);
    }
  }
}

TEST(TokenizerSmolLM2, BytesOutsideTheVocabularyAreDropped) {
  REQUIRE_SMOLLM2();
  // The byte still separates pieces, as in the reference: "a" "\x04" "b", not "ab". The expected ids are the
  // entries of the GGUF's own token list (tokenizer.ggml.tokens), not anything the tokenizer computes.
  const std::vector<std::string> tokens = tokenizer_spec_from_gguf(GgufFile::open(test::find_smollm2())).tokens;
  const auto vocab_id = [&](const std::string& piece) {
    const auto at = std::find(tokens.begin(), tokens.end(), piece);
    return at == tokens.end() ? -1 : static_cast<std::int32_t>(at - tokens.begin());
  };
  ASSERT_GE(vocab_id("ab"), 0);
  EXPECT_EQ(tok.encode("ab"), (Ids{vocab_id("ab")}));
  EXPECT_EQ(tok.encode("a\x04" "b"), (Ids{vocab_id("a"), vocab_id("b")}));
  // U+50000 is F1 90 80 80: the lead byte has no token, the continuation bytes do.
  EXPECT_EQ(tok.decode(tok.encode("\U00050000")), "\x90\x80\x80");
}

TEST(TokenizerSmolLM2, FromHfJsonMatchesFromGguf) {
  REQUIRE_SMOLLM2();
  REQUIRE_VECTORS(vectors);
  // A tokenizer.json as SmolLM2's repository has it, written from the GGUF's tables.
  const TokenizerSpec spec = tokenizer_spec_from_gguf(GgufFile::open(test::find_smollm2()));
  json vocab = json::object(), added = json::array(), merges = json::array();
  for (std::size_t i = 0; i < spec.tokens.size(); ++i) {
    vocab[spec.tokens[i]] = i;
    if (spec.types[i] == TokenType::Control)
      added.push_back({{"id", i}, {"content", spec.tokens[i]}, {"special", true}, {"normalized", false}});
  }
  for (const auto& [a, b] : spec.merges) merges.push_back(a + " " + b);
  const json j = {
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers", json::array({{{"type", "Digits"}, {"individual_digits", true}},
                                       {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}})}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
  };
  const std::string text = j.dump();
  test::TempFile file("tokenizer.json", test::Bytes(reinterpret_cast<const std::byte*>(text.data()),
                                                    reinterpret_cast<const std::byte*>(text.data() + text.size())));
  const Tokenizer from_json = Tokenizer::from_hf_json(file.path());
  EXPECT_EQ(from_json.vocab_size(), tok.vocab_size());
  for (const json& c : vectors->at("cases")) {
    const std::string s = c.at("text").get<std::string>();
    EXPECT_EQ(from_json.encode(s), c.at("ids").get<Ids>()) << s;
  }
}

// About 1024 tokens of English prose.
std::string english_text() {
  const std::string paragraph =
      "The history of computing is a story of steadily rising abstraction. Early machines were programmed by "
      "rewiring panels, and later by punching cards; assembly languages gave names to instructions, and compilers "
      "let people describe what they wanted instead of how the hardware should do it. Each step made programs "
      "easier to write, and each step was greeted with the worry that the new tools would be too slow. ";
  std::string text;
  while (text.size() < 4600) text += paragraph;
  return text;
}

TEST(TokenizerSmolLM2, EncodeSpeed) {
  REQUIRE_SMOLLM2();
  const std::string text = english_text();
  const Ids ids = tok.encode(text);
  EXPECT_GT(ids.size(), 900u);
  EXPECT_LT(ids.size(), 1200u);
  double best_ms = 1e9;
  for (int rep = 0; rep < 7; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    const Ids again = tok.encode(text);
    const auto t1 = std::chrono::steady_clock::now();
    ASSERT_EQ(again, ids);
    best_ms = std::min(best_ms, std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::printf("encode: %zu tokens in %.3f ms (best of 7)\n", ids.size(), best_ms);
#if defined(NDEBUG) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  EXPECT_LT(best_ms, 5.0);
#endif
}

}  // namespace
}  // namespace ignis::model
