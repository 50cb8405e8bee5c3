// GGUF reader on malformed, truncated and hostile files: each must raise ignis::Error with a
// clear message, never crash, read out of bounds or allocate without bound. Run these under
// -fsanitize=address,undefined too (see the report of the modelio branch).
#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "model/error_text.h"
#include "model/gguf.h"
#include "model/gguf_describe.h"
#include "model/sample_files.h"

namespace ignis::model {
namespace {

using test::Bytes;
using test::GgufWriter;

constexpr std::uint64_t kHuge = std::numeric_limits<std::uint64_t>::max();

std::string parse_error(const Bytes& bytes) {
  return test::error_of([&] { (void)GgufFile::parse(bytes, "bad.gguf"); });
}

#define EXPECT_PARSE_ERROR(bytes, text)                                                           \
  do {                                                                                            \
    const std::string message_ = parse_error(bytes);                                              \
    EXPECT_NE(message_.find(text), std::string::npos) << "message: " << message_;                 \
    EXPECT_EQ(message_.rfind("gguf: bad.gguf: ", 0), 0u) << "message: " << message_;             \
  } while (0)

GgufWriter one_tensor(std::vector<std::uint64_t> dims, GgmlType type = GgmlType::F32, std::size_t bytes = 4) {
  GgufWriter w;
  w.add_tensor("x", type, std::move(dims), Bytes(bytes));
  return w;
}

// Overwrites the bytes at `offset` with the little-endian encoding of `v`.
template <class T>
Bytes patched(Bytes bytes, std::size_t offset, T v) {
  std::memcpy(bytes.data() + offset, &v, sizeof(T));
  return bytes;
}

constexpr std::size_t kFirstKeyLength = 24;  // after magic, version and the two counts

TEST(GgufHostile, BadMagicAndVersion) {
  GgufWriter w = one_tensor({1});
  w.magic = 0x12345678;
  EXPECT_PARSE_ERROR(w.build(), "not a GGUF file");
  w = one_tensor({1});
  w.version = 1;
  EXPECT_PARSE_ERROR(w.build(), "unsupported version 1 (supported: 2, 3)");
  w.version = 0x03000000;
  EXPECT_PARSE_ERROR(w.build(), "big-endian GGUF files are not supported");
  EXPECT_PARSE_ERROR(Bytes{}, "truncated: magic needs 4 bytes at offset 0, file size 0");
}

TEST(GgufHostile, AbsurdCounts) {
  GgufWriter w = one_tensor({1});
  w.kv_count = kHuge;
  EXPECT_PARSE_ERROR(w.build(), "metadata count 18446744073709551615 is impossible");
  w = one_tensor({1});
  w.tensor_count = 1ull << 40;
  EXPECT_PARSE_ERROR(w.build(), "tensor count 1099511627776 is impossible");
  w = GgufWriter();
  Bytes arr;
  test::put<std::uint32_t>(arr, static_cast<std::uint32_t>(GgufType::U64));
  test::put<std::uint64_t>(arr, kHuge / 4);  // count * 8 would wrap
  w.add("a", GgufType::ARRAY, arr);
  EXPECT_PARSE_ERROR(w.build(), "key 'a' array length 4611686018427387903 is impossible");
}

TEST(GgufHostile, StringLongerThanFile) {
  GgufWriter w;
  w.add_string("general.name", "x");
  EXPECT_PARSE_ERROR(patched<std::uint64_t>(w.build(), kFirstKeyLength, kHuge),
                     "metadata key: string length 18446744073709551615 at offset 24 exceeds the");
  const std::size_t value_length = kFirstKeyLength + 8 + 12 + 4;  // key length, "general.name", type
  EXPECT_PARSE_ERROR(patched<std::uint64_t>(w.build(), value_length, 1000), "key 'general.name': string length 1000");
}

TEST(GgufHostile, UnknownAndMismatchedTypes) {
  GgufWriter w;
  w.add("k", static_cast<GgufType>(13), test::gguf_scalar<std::uint32_t>(1));
  EXPECT_PARSE_ERROR(w.build(), "type of key 'k': unknown value type 13");
  w = one_tensor({1});
  w.add_scalar<std::uint64_t>("general.alignment", 64);
  EXPECT_PARSE_ERROR(w.build(), "general.alignment: expected type u32, got u64");
  for (std::uint32_t bad : {0u, 3u, 96u}) {
    w = one_tensor({1});
    w.add_scalar<std::uint32_t>("general.alignment", bad);
    EXPECT_PARSE_ERROR(w.build(), "general.alignment: expected a power of two, got " + std::to_string(bad));
  }
  w = one_tensor({1});
  w.add_string("dup", "a");
  w.add_string("dup", "b");
  EXPECT_PARSE_ERROR(w.build(), "duplicate metadata key 'dup'");
}

TEST(GgufHostile, DeeplyNestedArrays) {
  Bytes value = test::gguf_array<std::uint8_t>({1});
  for (int depth = 0; depth < 20; ++depth) value = test::gguf_array_of_arrays({value});
  GgufWriter w;
  w.add("deep", GgufType::ARRAY, value);
  EXPECT_PARSE_ERROR(w.build(), "key 'deep': arrays nested deeper than 8");
}

TEST(GgufHostile, TensorDims) {
  GgufWriter w = one_tensor({1, 1, 1, 1, 1});
  EXPECT_PARSE_ERROR(w.build(), "tensor 'x': n_dims 5 exceeds the maximum 4");
  w = one_tensor({1});
  w.add_tensor("big", GgmlType::F32, {1ull << 32, 1ull << 32}, {});
  EXPECT_PARSE_ERROR(w.build(), "tensor 'big': element count overflows at dim 1");
  w = one_tensor({1});
  w.add_tensor("neg", GgmlType::F32, {1ull << 63}, {});
  EXPECT_PARSE_ERROR(w.build(), "tensor 'neg': element count overflows at dim 0");
  w = one_tensor({16}, GgmlType::Q8_0, 34);
  EXPECT_PARSE_ERROR(w.build(), "tensor 'x': innermost dim 16 is not a multiple of the Q8_0 block size 32");
  w = one_tensor({32});
  w.add_tensor("u", GgmlType::F32, {1}, Bytes(4)).type = 4;
  EXPECT_PARSE_ERROR(w.build(), "tensor 'u': unknown ggml type 4");
  w = one_tensor({1});
  w.add_tensor("x", GgmlType::F32, {1}, Bytes(4));
  EXPECT_PARSE_ERROR(w.build(), "duplicate tensor 'x'");
}

TEST(GgufHostile, TensorDataPlacement) {
  GgufWriter w = one_tensor({8}, GgmlType::F32, 32);
  w.add_tensor("y", GgmlType::F32, {1}, Bytes(4)).offset = 16;
  EXPECT_PARSE_ERROR(w.build(), "tensor 'y': offset 16 is not a multiple of the alignment 32");

  w = one_tensor({4}, GgmlType::F32, 16);
  Bytes bytes = w.build();
  bytes.resize(bytes.size() - 1);
  const std::uint64_t start = bytes.size() + 1 - 16;
  EXPECT_PARSE_ERROR(bytes, "tensor 'x' data [" + std::to_string(start) + ", " + std::to_string(start + 16) +
                                ") exceeds file size " + std::to_string(bytes.size()));

  w = one_tensor({1});
  w.add_tensor("far", GgmlType::F32, {1}, Bytes(4)).offset = kHuge - 31;  // aligned, wraps when added
  EXPECT_PARSE_ERROR(w.build(), "tensor 'far' data [overflow, overflow) exceeds file size");

  w = one_tensor({16}, GgmlType::F32, 64);
  w.add_tensor("y", GgmlType::F32, {16}, Bytes(64)).offset = 32;
  EXPECT_PARSE_ERROR(w.build(), "tensor data ranges overlap at offset");
}

// Every strict prefix of a valid file must be rejected with ignis::Error (the last tensor's
// data ends the file, so no prefix is complete).
TEST(GgufHostile, EveryPrefixIsRejected) {
  const Bytes full = test::sample_gguf();
  ASSERT_NO_THROW((void)GgufFile::parse(full));
  test::expect_every_prefix_rejected(full, [](const Bytes& b) { (void)GgufFile::parse(b); }, "gguf: <memory>: ");
}

// Random byte changes: the reader parses or throws ignis::Error, and whatever parses can be
// described and dequantized within bounds. Anything else (a crash, a sanitizer report,
// another exception type) fails.
TEST(GgufHostile, RandomByteFlipsNeverCrash) {
  const Bytes full = test::sample_gguf();
  const std::size_t header_end = GgufFile::parse(full).data_offset();
  std::mt19937_64 rng(20240611);
  int parsed = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    Bytes bytes = full;
    test::corrupt_bytes(bytes, rng, header_end, 4, 8);  // mostly the header, where the structure lives
    try {
      const GgufFile g = GgufFile::parse(bytes);
      ++parsed;
      (void)describe_gguf(g);
      for (const GgufTensor& t : g.tensors())
        if (ggml_can_dequantize(t.type) && t.n_elements < (1u << 20)) (void)dequantize(t);
    } catch (const Error&) {
    }
  }
  EXPECT_GT(parsed, 0);  // some flips land in values and still parse
}

}  // namespace
}  // namespace ignis::model
