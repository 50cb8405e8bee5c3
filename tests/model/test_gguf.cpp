// GGUF reader: every metadata type and tensor type round-trips through the test writer, and
// the quantized blocks decode to values worked out by hand from the block definitions.
#include <gtest/gtest.h>

#include <cmath>

#include "model/error_text.h"
#include "model/gguf.h"
#include "model/gguf_describe.h"
#include "model/sample_files.h"

namespace ignis::model {
namespace {

using test::Bytes;

class GgufSample : public ::testing::Test {
 protected:
  Bytes bytes_ = test::sample_gguf();
  GgufFile file_ = GgufFile::parse(bytes_, "sample.gguf");
};

TEST_F(GgufSample, Header) {
  EXPECT_EQ(file_.version(), 3u);
  EXPECT_EQ(file_.alignment(), 64u);
  EXPECT_EQ(file_.data_offset() % 64, 0u);
  EXPECT_EQ(file_.metadata().size(), 29u);
  EXPECT_EQ(file_.metadata()[0].first, "general.architecture");  // file order is kept
  EXPECT_EQ(file_.tensors().size(), 8u);
}

TEST_F(GgufSample, ScalarMetadata) {
  EXPECT_EQ(file_.get_string("general.architecture"), "llama");
  EXPECT_EQ(file_.get<std::uint8_t>("t.u8"), 200);
  EXPECT_EQ(file_.get<std::int8_t>("t.i8"), -100);
  EXPECT_EQ(file_.get<std::uint16_t>("t.u16"), 60000);
  EXPECT_EQ(file_.get<std::int16_t>("t.i16"), -30000);
  EXPECT_EQ(file_.get_u32("llama.block_count"), 4000000000u);
  EXPECT_EQ(file_.get_i32("t.i32"), -2000000000);
  EXPECT_EQ(file_.get_f32("t.f32"), 1.5f);
  EXPECT_TRUE(file_.get_bool("t.bool"));
  EXPECT_EQ(file_.get_string("t.string"), "h\xc3\xa9llo");
  EXPECT_EQ(file_.get_u64("t.u64"), 18000000000000000000ull);
  EXPECT_EQ(file_.get_i64("t.i64"), -9000000000000000000ll);
  EXPECT_EQ(file_.get_f64("t.f64"), -2.25);
}

TEST_F(GgufSample, ArrayMetadata) {
  EXPECT_EQ(file_.get_array<std::uint8_t>("a.u8"), (std::vector<std::uint8_t>{1, 2, 255}));
  EXPECT_EQ(file_.get_array<std::int8_t>("a.i8"), (std::vector<std::int8_t>{-1, 2}));
  EXPECT_EQ(file_.get_array<std::uint16_t>("a.u16"), (std::vector<std::uint16_t>{65535}));
  EXPECT_EQ(file_.get_array<std::int16_t>("a.i16"), (std::vector<std::int16_t>{-5, 5}));
  EXPECT_EQ(file_.get_array<std::uint32_t>("a.u32"), (std::vector<std::uint32_t>{7, 8, 9}));
  EXPECT_EQ(file_.get_array<std::int32_t>("a.i32"), (std::vector<std::int32_t>{-7}));
  EXPECT_EQ(file_.get_array<float>("a.f32"), (std::vector<float>{0.5f, -0.25f}));
  EXPECT_EQ(file_.get_array<bool>("a.bool"), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(file_.get_array<std::string>("a.string"), (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(file_.get_array<std::uint64_t>("a.u64"), (std::vector<std::uint64_t>{1ull << 40}));
  EXPECT_EQ(file_.get_array<std::int64_t>("a.i64"), (std::vector<std::int64_t>{-(1ll << 40)}));
  EXPECT_EQ(file_.get_array<double>("a.f64"), (std::vector<double>{1e300}));
  EXPECT_TRUE(file_.get_array<std::uint32_t>("a.empty").empty());
  EXPECT_EQ(file_.get_array_size("a.string"), 3u);

  const auto& nested = file_.value("a.nested").nested("a.nested");
  ASSERT_EQ(nested.size(), 3u);
  EXPECT_EQ(nested[0].as_array<std::uint32_t>("inner"), (std::vector<std::uint32_t>{1, 2}));
  EXPECT_TRUE(nested[1].as_array<std::uint32_t>("inner").empty());
  EXPECT_EQ(nested[2].as_array<std::uint32_t>("inner"), (std::vector<std::uint32_t>{3}));
  const auto& strings = file_.value("a.nested_strings").nested("a.nested_strings");
  ASSERT_EQ(strings.size(), 1u);
  EXPECT_EQ(strings[0].as_array<std::string>("inner"), (std::vector<std::string>{"x", "yz"}));
}

TEST_F(GgufSample, LookupErrors) {
  EXPECT_ERROR_CONTAINS(file_.get_u32("llama.missing"), "gguf: sample.gguf: key 'llama.missing' not found");
  EXPECT_ERROR_CONTAINS(file_.get_i32("llama.block_count"),
                        "gguf: key 'llama.block_count': type: expected i32, got u32");
  EXPECT_ERROR_CONTAINS(file_.get_string("a.string"), "type: expected string, got array of string");
  EXPECT_ERROR_CONTAINS(file_.get_array<std::uint32_t>("a.string"),
                        "type: expected array of u32, got array of string");
  EXPECT_ERROR_CONTAINS(file_.get_array<std::uint32_t>("t.u8"), "type: expected array of u32, got u8");
  EXPECT_ERROR_CONTAINS(file_.get_array_size("t.u8"), "type: expected array, got u8");
  EXPECT_ERROR_CONTAINS(file_.tensor("nope"), "gguf: sample.gguf: tensor 'nope' not found");
  EXPECT_EQ(file_.find("nope"), nullptr);
  EXPECT_EQ(file_.find_tensor("nope"), nullptr);
  EXPECT_FALSE(file_.has("nope"));
}

TEST_F(GgufSample, OptionalAndAnyInteger) {
  EXPECT_EQ(file_.get_optional<std::uint32_t>("llama.block_count"), 4000000000u);
  EXPECT_EQ(file_.get_optional<std::uint32_t>("llama.missing"), std::nullopt);
  EXPECT_ERROR_CONTAINS((void)file_.get_optional<float>("llama.block_count"), "gguf: key 'llama.block_count': type");
  EXPECT_EQ(file_.get_int("t.u8"), 200);
  EXPECT_EQ(file_.get_int("t.i16"), -30000);
  EXPECT_EQ(file_.get_int("llama.block_count"), 4000000000);
  EXPECT_EQ(file_.get_int("t.i64"), -9000000000000000000ll);
  EXPECT_ERROR_CONTAINS(file_.get_int("t.u64"), "value: expected at most INT64_MAX");
  EXPECT_ERROR_CONTAINS(file_.get_int("t.f32"), "type: expected an integer, got f32");
}

TEST_F(GgufSample, TensorInfos) {
  const GgufTensor& t = file_.tensor("f32");
  EXPECT_EQ(t.type, GgmlType::F32);
  EXPECT_EQ(t.dims, (std::vector<std::uint64_t>{3, 2}));
  EXPECT_EQ(t.shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(t.n_elements, 6u);
  EXPECT_EQ(t.data.size(), 24u);
  const GgufTensor& q = file_.tensor("q8_0");
  EXPECT_EQ(q.shape, (std::vector<std::int64_t>{2, 32}));
  EXPECT_EQ(q.data.size(), 68u);
  EXPECT_EQ(file_.tensor("q4_1").data.size(), 20u);
  for (const GgufTensor& each : file_.tensors()) {
    EXPECT_EQ(each.offset % 64, 0u) << each.name;
    EXPECT_EQ(each.data.data(), bytes_.data() + file_.data_offset() + each.offset) << each.name;
  }
}

TEST_F(GgufSample, DequantizePlainTypes) {
  EXPECT_EQ(dequantize(file_.tensor("f32")), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  const auto h = dequantize(file_.tensor("f16"));
  EXPECT_EQ(h[0], 0.5f);
  EXPECT_EQ(h[1], -2.0f);
  EXPECT_TRUE(std::isinf(h[2]) && h[2] > 0);
  EXPECT_EQ(dequantize(file_.tensor("bf16")), (std::vector<float>{1.5f, -5.0f}));
  EXPECT_EQ(file_.tensor("empty").shape, (std::vector<std::int64_t>{3, 0}));
  EXPECT_TRUE(dequantize(file_.tensor("empty")).empty());
}

TEST_F(GgufSample, DequantizeQ8_0ByHand) {
  // Block 0: d = 0.5, q[i] = i - 16. Block 1: d = -2, q = {127, -128, 0 x 29, 1}.
  std::vector<float> want = {-8,   -7.5, -7,   -6.5, -6,  -5.5, -5,  -4.5, -4,  -3.5, -3,
                             -2.5, -2,   -1.5, -1,   -0.5, 0,    0.5, 1,    1.5, 2,    2.5,
                             3,    3.5,  4,    4.5,  5,    5.5,  6,   6.5,  7,   7.5};
  want.push_back(-254);
  want.push_back(256);
  want.insert(want.end(), 29, 0.0f);
  want.push_back(-2);
  EXPECT_EQ(dequantize(file_.tensor("q8_0")), want);
}

TEST_F(GgufSample, DequantizeQ4_0ByHand) {
  // d = 2; byte j = j | (15 - j) << 4: element j = (j - 8) * 2, element j + 16 = (7 - j) * 2.
  const std::vector<float> want = {-16, -14, -12, -10, -8, -6, -4, -2, 0,  2,   4,   6,   8,   10,  12,  14,
                                   14,  12,  10,  8,   6,  4,  2,  0,  -2, -4,  -6,  -8,  -10, -12, -14, -16};
  EXPECT_EQ(dequantize(file_.tensor("q4_0")), want);
}

TEST_F(GgufSample, DequantizeQ4_1ByHand) {
  // d = 0.25, m = -1; same nibbles: element j = j / 4 - 1, element j + 16 = (15 - j) / 4 - 1.
  const std::vector<float> want = {-1,   -0.75, -0.5, -0.25, 0,    0.25, 0.5,  0.75, 1,    1.25,  1.5,
                                   1.75, 2,     2.25, 2.5,   2.75, 2.75, 2.5,  2.25, 2,    1.75,  1.5,
                                   1.25, 1,     0.75, 0.5,   0.25, 0,    -0.25, -0.5, -0.75, -1};
  EXPECT_EQ(dequantize(file_.tensor("q4_1")), want);
}

TEST_F(GgufSample, DequantizeIntoBuffer) {
  std::vector<float> out(6, -1.0f);
  dequantize(file_.tensor("f32"), out);
  EXPECT_EQ(out, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  std::vector<float> wrong(5);
  EXPECT_ERROR_CONTAINS(dequantize(file_.tensor("f32"), wrong),
                        "output size for tensor 'f32': expected 6, got 5");
}

TEST_F(GgufSample, UnsupportedTypeNamesTypeAndTensor) {
  EXPECT_ERROR_CONTAINS(dequantize(file_.tensor("q4_k")), "tensor 'q4_k' has type Q4_K, which is not supported");
}

TEST_F(GgufSample, Describe) {
  const std::string text = describe_gguf(file_);
  EXPECT_NE(text.find("gguf v3"), std::string::npos) << text;
  EXPECT_NE(text.find("architecture: llama"), std::string::npos) << text;
  EXPECT_NE(text.find("block_count: 4000000000"), std::string::npos) << text;
  EXPECT_NE(text.find("tensors: 8"), std::string::npos) << text;
  EXPECT_NE(text.find("Q4_1: 1 tensors"), std::string::npos) << text;
}

TEST(Gguf, OpensFromDiskAndAcceptsVersion2) {
  test::GgufWriter w = test::sample_gguf_writer();
  w.version = 2;
  test::TempFile file("v2.gguf", w.build());
  const GgufFile g = GgufFile::open(file.path());
  EXPECT_EQ(g.version(), 2u);
  EXPECT_EQ(g.source(), file.path());
  EXPECT_EQ(dequantize(g.tensor("q4_0"))[31], -16.0f);
}

TEST(Gguf, DefaultAlignmentIs32) {
  test::GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_tensor("a", GgmlType::F32, {1}, test::raw_values<float>({1}));
  w.add_tensor("b", GgmlType::F32, {2}, test::raw_values<float>({2, 3}));
  const Bytes bytes = w.build();
  const GgufFile g = GgufFile::parse(bytes);
  EXPECT_EQ(g.alignment(), 32u);
  EXPECT_EQ(g.data_offset() % 32, 0u);
  EXPECT_EQ(g.tensor("b").offset, 32u);
  EXPECT_EQ(dequantize(g.tensor("b")), (std::vector<float>{2, 3}));
}

TEST(Gguf, TensorWithoutDimsIsAScalar) {
  test::GgufWriter w;
  w.add_tensor("s", GgmlType::F32, {}, test::raw_values<float>({4.5f}));
  const Bytes bytes = w.build();
  const GgufFile g = GgufFile::parse(bytes);
  EXPECT_TRUE(g.tensor("s").shape.empty());
  EXPECT_EQ(dequantize(g.tensor("s")), std::vector<float>{4.5f});
}

TEST(GgmlTypes, BlockGeometry) {
  EXPECT_EQ(ggml_type_info(8)->block_bytes, 34u);  // Q8_0
  EXPECT_EQ(ggml_type_info(3)->block_elems, 32u);  // Q4_1
  EXPECT_EQ(ggml_type_info(14)->block_bytes, 210u);  // Q6_K
  EXPECT_FALSE(ggml_type_info(4).has_value());  // retired id
  EXPECT_FALSE(ggml_type_info(1000).has_value());
  EXPECT_EQ(ggml_type_name(static_cast<GgmlType>(1000)), "unknown(1000)");
}

}  // namespace
}  // namespace ignis::model
