// Tokenizer::from_gguf and Tokenizer::from_hf_json on small files written by the tests: the
// tiny vocabulary of tokenizer_fixtures.h, and each kind of missing or unsupported metadata.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/error_text.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "model/sample_files.h"
#include "model/tokenizer.h"
#include "model/tokenizer_fixtures.h"

namespace ignis::model {
namespace {

using Ids = std::vector<std::int32_t>;
using nlohmann::json;

// The tiny vocabulary as GGUF keys; `skip` leaves one key out, `override_*` replace one.
struct GgufTokenizerKeys {
  std::string model = "gpt2";
  std::string pre = "smollm";
  std::string skip;
  std::optional<std::vector<std::int32_t>> types;
  std::optional<std::vector<std::string>> merges;
  std::optional<std::uint32_t> eos;

  test::Bytes build() const {
    const TokenizerSpec spec = test::tiny_spec();
    test::GgufWriter w;
    auto add_string = [&](const std::string& key, const std::string& v) {
      if (key != skip) w.add_string(key, v);
    };
    add_string("general.architecture", "llama");
    add_string("tokenizer.ggml.model", model);
    add_string("tokenizer.ggml.pre", pre);
    if (skip != "tokenizer.ggml.tokens") w.add_array("tokenizer.ggml.tokens", spec.tokens);
    std::vector<std::int32_t> t;
    for (TokenType type : spec.types) t.push_back(static_cast<std::int32_t>(type));
    if (skip != "tokenizer.ggml.token_type") w.add_array("tokenizer.ggml.token_type", types.value_or(t));
    std::vector<std::string> m;
    for (const auto& [a, b] : spec.merges) m.push_back(a + " " + b);
    if (skip != "tokenizer.ggml.merges") w.add_array("tokenizer.ggml.merges", merges.value_or(m));
    w.add_scalar<std::uint32_t>("tokenizer.ggml.bos_token_id", test::kImStart);
    w.add_scalar<std::uint32_t>("tokenizer.ggml.eos_token_id", eos.value_or(test::kEndOfText));
    w.add_scalar<std::int32_t>("tokenizer.ggml.eot_token_id", test::kImEnd);
    add_string("tokenizer.chat_template", test::kSmolLM2Template);
    return w.build();
  }
};

Tokenizer from_keys(const GgufTokenizerKeys& keys) {
  const test::Bytes bytes = keys.build();
  return Tokenizer::from_gguf(GgufFile::parse(bytes, "tiny.gguf"));
}

TEST(TokenizerGguf, ReadsTheTokenizerKeys) {
  const Tokenizer t = from_keys({});
  EXPECT_EQ(t.vocab_size(), test::kTinyVocab);
  EXPECT_EQ(t.bos_id(), test::kImStart);
  EXPECT_EQ(t.eos_id(), test::kEndOfText);
  EXPECT_EQ(t.stop_ids(), (Ids{test::kImEnd, test::kEndOfText}));
  EXPECT_EQ(t.encode("<|im_start|>hello world<|im_end|>"),
            (Ids{test::kImStart, test::kHello, test::kSpaceW, 'o', 'r', 'l', 'd', test::kImEnd}));
  // "smollm" splits digits from the space before them; "gpt2" keeps " 1" for the merge "Ġ 1".
  EXPECT_EQ(t.encode("a 12"), (Ids{'a', ' ', '1', '2'}));
  EXPECT_TRUE(t.has_chat_template());
  EXPECT_EQ(t.apply_chat_template(std::vector<ChatMessage>{{"system", "s"}}, false),
            "<|im_start|>system\ns<|im_end|>\n");

  GgufTokenizerKeys gpt2;
  gpt2.pre = "gpt2";
  EXPECT_EQ(from_keys(gpt2).encode("a 12"), (Ids{'a', test::kSpace1, '2'}));
  EXPECT_EQ(from_keys(gpt2).encode("aa   12"), (Ids{test::kAa, ' ', ' ', test::kSpace1, '2'}));
}

TEST(TokenizerGguf, RejectsMissingOrUnsupportedMetadata) {
  for (const char* key : {"tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.merges"}) {
    GgufTokenizerKeys k;
    k.skip = key;
    EXPECT_ERROR_CONTAINS(from_keys(k), std::string("tiny.gguf: metadata key '") + key + "' is missing");
  }
  GgufTokenizerKeys k;
  k.model = "llama";
  EXPECT_ERROR_CONTAINS(from_keys(k), "tokenizer model 'llama' not supported");
  k = {};
  k.pre = "qwen2";
  EXPECT_ERROR_CONTAINS(from_keys(k), "pre-tokenizer 'qwen2' not supported");
  k = {};
  k.types = std::vector<std::int32_t>(3, 1);
  EXPECT_ERROR_CONTAINS(from_keys(k), "tokenizer.ggml.token_type length: expected 269, got 3");
  k = {};
  k.types = std::vector<std::int32_t>(test::kTinyVocab, 1);
  k.types->at(7) = 9;
  EXPECT_ERROR_CONTAINS(from_keys(k), "tokenizer.ggml.token_type[7]: expected a type in 1..6, got 9");
  k = {};
  k.merges = std::vector<std::string>{"l o", "lo"};
  EXPECT_ERROR_CONTAINS(from_keys(k), "tokenizer.ggml.merges[1]: expected two tokens separated by one space, got 'lo'");
  k = {};
  k.merges = std::vector<std::string>{"l o x"};
  EXPECT_ERROR_CONTAINS(from_keys(k), "merges[0]");
  k = {};
  k.eos = 5000;
  EXPECT_ERROR_CONTAINS(from_keys(k), "eos token id: expected an id in [0, 269), got 5000");
}

TEST(TokenizerGguf, TokenTypesDefaultToNormal) {
  GgufTokenizerKeys k;
  k.skip = "tokenizer.ggml.token_type";
  const Tokenizer t = from_keys(k);
  // Without types nothing is special: the control strings are text.
  EXPECT_EQ(t.encode("<|im_end|>"), t.encode("<|im_end|>", false));
  EXPECT_EQ(t.stop_ids(), (Ids{test::kImEnd, test::kEndOfText}));  // still the ids the file names
}

// The tiny vocabulary as a tokenizer.json (merges in the "a b" or the ["a", "b"] form).
json tiny_json(bool pair_merges) {
  const TokenizerSpec spec = test::tiny_spec();
  json vocab = json::object();
  json added = json::array();
  for (std::size_t i = 0; i < spec.tokens.size(); ++i) {
    if (spec.types[i] == TokenType::Normal) {
      vocab[spec.tokens[i]] = i;
    } else {
      added.push_back({{"id", i}, {"content", spec.tokens[i]}, {"single_word", false}, {"lstrip", false},
                       {"rstrip", false}, {"normalized", false}, {"special", spec.types[i] == TokenType::Control}});
    }
  }
  json merges = json::array();
  for (const auto& [a, b] : spec.merges) merges.push_back(pair_merges ? json::array({a, b}) : json(a + " " + b));
  return {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers", json::array({{{"type", "Digits"}, {"individual_digits", true}},
                                       {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
                                        {"use_regex", true}}})}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"fuse_unk", false}, {"byte_fallback", false},
        {"vocab", vocab}, {"merges", merges}}},
  };
}

test::Bytes text_bytes(const std::string& s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

TEST(TokenizerJson, MatchesTheGgufTokenizer) {
  const Tokenizer from_gguf = from_keys({});
  for (bool pair_merges : {false, true}) {
    test::TempFile file("tokenizer.json", text_bytes(tiny_json(pair_merges).dump()));
    const Tokenizer t = Tokenizer::from_hf_json(file.path());
    EXPECT_EQ(t.vocab_size(), test::kTinyVocab);
    for (const std::string text : {"<|im_start|>hello world<|im_end|>", "aaa 12 <tool> x", "hello<|im"}) {
      EXPECT_EQ(t.encode(text), from_gguf.encode(text)) << text;
      EXPECT_EQ(t.encode(text, false), from_gguf.encode(text, false)) << text;
    }
    EXPECT_EQ(t.decode(Ids{test::kImEnd, test::kHello}, true), "hello");
    // No tokenizer_config.json: no bos/eos, no template; <|im_end|> and <|endoftext|> still stop.
    EXPECT_FALSE(t.eos_id());
    EXPECT_FALSE(t.has_chat_template());
    EXPECT_EQ(t.stop_ids(), (Ids{test::kImEnd, test::kEndOfText}));
  }
}

TEST(TokenizerJson, ReadsTokenizerConfigBesideIt) {
  test::TempFile file("tokenizer.json", text_bytes(tiny_json(false).dump()));
  const json config = {{"bos_token", "<|im_start|>"},
                       {"eos_token", {{"content", "<|im_end|>"}, {"special", true}}},
                       {"chat_template", test::kSmolLM2Template}};
  std::ofstream(std::filesystem::path(file.path()).parent_path() / "tokenizer_config.json") << config.dump();
  const Tokenizer t = Tokenizer::from_hf_json(file.path());
  EXPECT_EQ(t.bos_id(), test::kImStart);
  EXPECT_EQ(t.eos_id(), test::kImEnd);
  EXPECT_TRUE(t.has_chat_template());
  EXPECT_EQ(t.apply_chat_template(std::vector<ChatMessage>{{"system", "s"}}, true),
            "<|im_start|>system\ns<|im_end|>\n<|im_start|>assistant\n");
}

TEST(TokenizerJson, RejectsWhatItCannotReproduce) {
  auto expect_error = [](const json& j, const std::string& text) {
    test::TempFile file("tokenizer.json", text_bytes(j.dump()));
    EXPECT_ERROR_CONTAINS(Tokenizer::from_hf_json(file.path()), text);
  };
  json j = tiny_json(false);
  j["model"]["type"] = "WordPiece";
  expect_error(j, "tokenizer model 'WordPiece' not supported");
  j = tiny_json(false);
  j["normalizer"] = {{"type", "NFC"}};
  expect_error(j, "normalizer not supported");
  j = tiny_json(false);
  j["pre_tokenizer"] = {{"type", "Metaspace"}};
  expect_error(j, "pre_tokenizer not supported");
  j = tiny_json(false);
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}};
  expect_error(j, "pre_tokenizer not supported");
  j = tiny_json(false);
  j["model"]["ignore_merges"] = true;
  expect_error(j, "ignore_merges not supported");
  j = tiny_json(false);
  j["added_tokens"][0]["lstrip"] = true;
  expect_error(j, "added token '<|im': lstrip not supported");
  j = tiny_json(false);
  j["model"]["vocab"].erase("a");
  expect_error(j, "token id 97 has no token");
  j = tiny_json(false);
  j["model"]["merges"].push_back("abc");
  expect_error(j, "merge \"abc\": expected two tokens separated by one space");
  j = tiny_json(false);
  j["model"].erase("vocab");
  expect_error(j, "no \"vocab\" object");
  j = tiny_json(false);
  j["model"]["vocab"]["zz"] = "seven";
  expect_error(j, "unexpected structure");

  test::TempFile bad("tokenizer.json", text_bytes("{\"model\": "));
  EXPECT_ERROR_CONTAINS(Tokenizer::from_hf_json(bad.path()), "not valid JSON");
  EXPECT_ERROR_CONTAINS(Tokenizer::from_hf_json("/nonexistent/tokenizer.json"), "cannot open");
}

}  // namespace
}  // namespace ignis::model
