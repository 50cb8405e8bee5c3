// The tokenizer on a tiny vocabulary (tests/model/tokenizer_fixtures.h) whose encodings are
// worked out by hand: merge order, special tokens, decoding, streaming, chat formatting, errors.
#include <gtest/gtest.h>

#include "model/error_text.h"
#include "model/tokenizer.h"
#include "model/tokenizer_fixtures.h"

namespace ignis::model {
namespace {

using test::tiny_spec;
using Ids = std::vector<std::int32_t>;

Ids bytes_of(std::string_view s) {
  Ids ids;
  for (char c : s) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

Ids concat(std::initializer_list<Ids> parts) {
  Ids out;
  for (const Ids& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

const Tokenizer& tiny() {
  static const Tokenizer t = Tokenizer::from_spec(tiny_spec());
  return t;
}

TEST(Tokenizer, MergesInRankOrder) {
  // h e l l o: "l o" (rank 0) first, then "h e", "he l", "hel lo"; "l l" (rank 2) never applies.
  EXPECT_EQ(tiny().encode("hello"), (Ids{test::kHello}));
  // e l l o: "l o" beats "l l" though "l l" is further left.
  EXPECT_EQ(tiny().encode("ello"), (Ids{'e', 'l', test::kLo}));
  // h e l l: "h e" (1), then "l l" (2) beats "he l" (3).
  EXPECT_EQ(tiny().encode("hell"), (Ids{test::kHe, test::kLl}));
  // Equal ranks: the leftmost pair first.
  EXPECT_EQ(tiny().encode("aaa"), (Ids{test::kAa, 'a'}));
  EXPECT_EQ(tiny().encode("aaaaa"), (Ids{test::kAa, test::kAa, 'a'}));
  // Merges stay inside a piece: " w" is one piece, "a w" splits before the space.
  EXPECT_EQ(tiny().encode("hello world"), (Ids{test::kHello, test::kSpaceW, 'o', 'r', 'l', 'd'}));
  EXPECT_EQ(tiny().encode("aa  w"), (Ids{test::kAa, ' ', test::kSpaceW}));
  EXPECT_EQ(tiny().encode(""), Ids{});
}

TEST(Tokenizer, EveryByteHasItsToken) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  // In increasing byte order no merge pair is adjacent: one token per byte.
  EXPECT_EQ(tiny().encode(all, false), bytes_of(all));
  EXPECT_EQ(tiny().decode(tiny().encode(all)), all);
}

TEST(Tokenizer, SpecialTokensMatchedWhenAsked) {
  const std::string text = "<|im_start|>hello<|im_end|>";
  EXPECT_EQ(tiny().encode(text), (Ids{test::kImStart, test::kHello, test::kImEnd}));
  // As plain text: "<|", "im", "_", "start", "|>" pieces of single bytes, then "hello".
  EXPECT_EQ(tiny().encode(text, false),
            concat({bytes_of("<|im_start|>"), Ids{test::kHello}, bytes_of("<|im_end|>")}));
  // The longest special at a position wins; a shorter one that prefixes it still matches alone.
  EXPECT_EQ(tiny().encode("<|im<|im_end|>"), (Ids{test::kImPrefix, test::kImEnd}));
  EXPECT_EQ(tiny().encode("<|im_end"), concat({Ids{test::kImPrefix}, bytes_of("_end")}));
  // User-defined tokens are matched with or without parse_special.
  EXPECT_EQ(tiny().encode("a<tool>a", false), (Ids{'a', test::kToolTag, 'a'}));
  EXPECT_EQ(tiny().encode("<|endoftext|><|endoftext|>"), (Ids{test::kEndOfText, test::kEndOfText}));
  EXPECT_EQ(tiny().encode("x <|im_end|>\n"), (Ids{'x', ' ', test::kImEnd, '\n'}));
}

TEST(Tokenizer, DecodeGivesExactBytes) {
  const Ids ids{test::kImStart, test::kHello, test::kSpaceW, test::kToolTag, test::kImEnd};
  EXPECT_EQ(tiny().decode(ids), "<|im_start|>hello w<tool><|im_end|>");
  EXPECT_EQ(tiny().decode(ids, true), "hello w<tool>");
  EXPECT_EQ(tiny().token_bytes(' '), " ");
  EXPECT_EQ(tiny().token_bytes('\n'), "\n");
  EXPECT_EQ(tiny().token_bytes(0), std::string(1, '\0'));
  EXPECT_EQ(tiny().token_bytes(test::kSpaceW), " w");
  // A lone lead byte decodes as itself: decode never repairs UTF-8.
  EXPECT_EQ(tiny().decode(Ids{0xE4, 0xB8}), "\xE4\xB8");
}

TEST(Tokenizer, DecodeRejectsIdsOutsideTheVocabulary) {
  EXPECT_ERROR_CONTAINS(tiny().decode(Ids{1, test::kTinyVocab}), "got 269");
  EXPECT_ERROR_CONTAINS(tiny().decode(Ids{-1}), "token id: expected an id in [0, 269), got -1");
  EXPECT_ERROR_CONTAINS(tiny().token_bytes(100000), "token_bytes");
  StreamDecoder stream(tiny());
  EXPECT_ERROR_CONTAINS(stream.push(-5), "tokenizer: token_bytes: token id");
}

TEST(Tokenizer, Properties) {
  EXPECT_EQ(tiny().vocab_size(), test::kTinyVocab);
  EXPECT_EQ(tiny().bos_id(), test::kImStart);
  EXPECT_EQ(tiny().eos_id(), test::kEndOfText);
  // eos and the end-of-turn control token <|im_end|>; not <|im_start|>.
  EXPECT_EQ(tiny().stop_ids(), (Ids{test::kImEnd, test::kEndOfText}));

  auto spec = tiny_spec();
  spec.eos_id.reset();
  spec.bos_id.reset();
  spec.end_of_turn_ids = {'!'};
  const Tokenizer t = Tokenizer::from_spec(spec);
  EXPECT_FALSE(t.bos_id());
  EXPECT_FALSE(t.eos_id());
  EXPECT_EQ(t.stop_ids(), (Ids{'!', test::kImEnd, test::kEndOfText}));
}

TEST(Tokenizer, BytesWithoutATokenAreDropped) {
  auto spec = tiny_spec();
  spec.tokens[4] = "<unused4>";
  spec.types[4] = TokenType::Unused;
  const Tokenizer t = Tokenizer::from_spec(spec);
  EXPECT_EQ(t.encode("a\x04" "b"), (Ids{'a', 'b'}));
  EXPECT_EQ(t.encode("\x04"), Ids{});
}

TEST(Tokenizer, SpecRejectsInconsistentTables) {
  auto spec = tiny_spec();
  spec.types.pop_back();
  EXPECT_ERROR_CONTAINS(Tokenizer::from_spec(spec), "token types: expected 269 (one per token), got 268");

  spec = tiny_spec();
  spec.merges.emplace_back("x", "yz");
  EXPECT_ERROR_CONTAINS(Tokenizer::from_spec(spec), "merge 8 'x yz': token 'yz' is not in the vocabulary");
  spec = tiny_spec();
  spec.merges.emplace_back("x", "y");
  EXPECT_ERROR_CONTAINS(Tokenizer::from_spec(spec), "token 'xy' is not in the vocabulary");

  spec = tiny_spec();
  spec.eos_id = test::kTinyVocab;
  EXPECT_ERROR_CONTAINS(Tokenizer::from_spec(spec), "eos token id: expected an id in [0, 269), got 269");
  spec = tiny_spec();
  spec.bos_id = -1;
  EXPECT_ERROR_CONTAINS(Tokenizer::from_spec(spec), "bos token id");
  spec = tiny_spec();
  spec.end_of_turn_ids = {1 << 20};
  EXPECT_ERROR_CONTAINS(Tokenizer::from_spec(spec), "end-of-turn token id");

  TokenizerSpec empty;
  empty.source = "nothing";
  EXPECT_ERROR_CONTAINS(Tokenizer::from_spec(empty), "tokenizer: nothing: the vocabulary is empty");
}

TEST(StreamDecoder, HoldsBackPartialCodePoints) {
  StreamDecoder s(tiny());
  EXPECT_EQ(s.push('a'), "a");
  EXPECT_EQ(s.push(0xE4), "");
  EXPECT_EQ(s.push(0xB8), "");
  EXPECT_EQ(s.push(0xAD), "\u4e2d");
  EXPECT_EQ(s.push(0xF0), "");
  EXPECT_EQ(s.push(0x9F), "");
  EXPECT_EQ(s.push(0x98), "");
  EXPECT_EQ(s.push(0x80), "\U0001F600");
  EXPECT_EQ(s.push(test::kHello), "hello");
  EXPECT_EQ(s.flush(), "");
  // An unfinished sequence comes out at flush; a byte that can never start one is not held.
  EXPECT_EQ(s.push(0xC3), "");
  EXPECT_EQ(s.flush(), "\xC3");
  EXPECT_EQ(s.push(0xFF), "\xFF");
  EXPECT_EQ(s.push(0xE4), "");
  EXPECT_EQ(s.push('x'), "\xE4x");
  EXPECT_EQ(s.flush(), "");
}

TEST(ChatTemplate, SmolLM2FormatWithDefaultSystemPrompt) {
  const std::vector<ChatMessage> messages{{"user", "Hi there"}, {"assistant", "Hello!"}, {"user", "Bye"}};
  ASSERT_TRUE(tiny().has_chat_template());
  EXPECT_EQ(tiny().apply_chat_template(messages, true),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\nHi there<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n"
            "<|im_start|>user\nBye<|im_end|>\n"
            "<|im_start|>assistant\n");
  const std::vector<ChatMessage> with_system{{"system", "Be brief."}, {"user", "Hi"}};
  EXPECT_EQ(tiny().apply_chat_template(with_system, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
  EXPECT_EQ(tiny().apply_chat_template({}, true), "<|im_start|>assistant\n");
  EXPECT_EQ(tiny().apply_chat_template({}, false), "");
}

TEST(ChatTemplate, OtherChatMLTemplates) {
  // A default system prompt written with the "\n" escape (as in tokenizer_config.json files).
  const auto qwen_like = ChatFormat::recognize(
      "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + "
      "'<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{%- endif "
      "%}{%- for message in messages %}...{%- endfor %}");
  ASSERT_TRUE(qwen_like);
  EXPECT_EQ(qwen_like->default_system(), "You are a helpful assistant.");
  // Plain ChatML inserts nothing.
  const auto plain = ChatFormat::recognize(
      "{% for m in messages %}{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n'}}{% endfor %}");
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->default_system());
  const std::vector<ChatMessage> one{{"user", "x"}};
  EXPECT_EQ(plain->apply(one, false), "<|im_start|>user\nx<|im_end|>\n");
}

TEST(ChatTemplate, UnsupportedTemplatesThrow) {
  auto spec = tiny_spec();
  spec.chat_template =
      "{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + "
      "message['content'] + '<|eot_id|>' }}{% endfor %}";
  const Tokenizer llama3 = Tokenizer::from_spec(spec);
  EXPECT_TRUE(llama3.has_chat_template());
  EXPECT_ERROR_CONTAINS(llama3.apply_chat_template({}, true), "chat template not supported");
  EXPECT_ERROR_CONTAINS(llama3.apply_chat_template({}, true), "<|start_header_id|>");

  spec.chat_template.clear();
  const Tokenizer none = Tokenizer::from_spec(spec);
  EXPECT_FALSE(none.has_chat_template());
  EXPECT_ERROR_CONTAINS(none.apply_chat_template({}, true), "has no chat template");
}

}  // namespace
}  // namespace ignis::model
