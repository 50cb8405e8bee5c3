#pragma once
// Small valid model files used by the tests and saved as the fuzzers' seed corpus: a GGUF with
// every metadata type and every tensor type the reader decodes, and a safetensors file with
// every dtype it converts. The quantized blocks hold values chosen so tests can list the
// decoded results by hand.
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <unistd.h>

#include <gtest/gtest.h>

#include "ignis/error.h"
#include "model/error_text.h"
#include "model/gguf_writer.h"
#include "model/safetensors_writer.h"

namespace ignis::test {

// f16 bit patterns of the scales below.
constexpr std::uint16_t kF16Half = 0x3800;      // 0.5
constexpr std::uint16_t kF16Two = 0x4000;       // 2.0
constexpr std::uint16_t kF16MinusTwo = 0xC000;  // -2.0
constexpr std::uint16_t kF16Quarter = 0x3400;   // 0.25
constexpr std::uint16_t kF16MinusOne = 0xBC00;  // -1.0

// Q8_0 block: d = 0.5, q[i] = i - 16, so x[i] = (i - 16) / 2.
inline Bytes q8_0_block_a() {
  Bytes b;
  put(b, kF16Half);
  for (int i = 0; i < 32; ++i) put<std::int8_t>(b, static_cast<std::int8_t>(i - 16));
  return b;
}

// Q8_0 block: d = -2, q = {127, -128, 0, ..., 0, 1}.
inline Bytes q8_0_block_b() {
  Bytes b;
  put(b, kF16MinusTwo);
  for (int i = 0; i < 32; ++i)
    put<std::int8_t>(b, static_cast<std::int8_t>(i == 0 ? 127 : i == 1 ? -128 : i == 31 ? 1 : 0));
  return b;
}

// Q4_0 / Q4_1 nibbles: byte j = j (low nibble, element j) | (15 - j) << 4 (element j + 16).
inline void put_descending_nibbles(Bytes& b) {
  for (int j = 0; j < 16; ++j) put<std::uint8_t>(b, static_cast<std::uint8_t>(j | ((15 - j) << 4)));
}

// Q4_0 block: d = 2.
inline Bytes q4_0_block() {
  Bytes b;
  put(b, kF16Two);
  put_descending_nibbles(b);
  return b;
}

// Q4_1 block: d = 0.25, m = -1.
inline Bytes q4_1_block() {
  Bytes b;
  put(b, kF16Quarter);
  put(b, kF16MinusOne);
  put_descending_nibbles(b);
  return b;
}

inline GgufWriter sample_gguf_writer() {
  using model::GgmlType;
  using model::GgufType;
  GgufWriter w;
  w.alignment = 64;
  w.add_string("general.architecture", "llama");
  w.add_scalar<std::uint32_t>("general.alignment", 64);
  w.add_scalar<std::uint8_t>("t.u8", 200);
  w.add_scalar<std::int8_t>("t.i8", -100);
  w.add_scalar<std::uint16_t>("t.u16", 60000);
  w.add_scalar<std::int16_t>("t.i16", -30000);
  w.add_scalar<std::uint32_t>("llama.block_count", 4000000000u);
  w.add_scalar<std::int32_t>("t.i32", -2000000000);
  w.add_scalar<float>("t.f32", 1.5f);
  w.add_scalar<bool>("t.bool", true);
  w.add_string("t.string", "h\xc3\xa9llo");
  w.add_scalar<std::uint64_t>("t.u64", 18000000000000000000ull);
  w.add_scalar<std::int64_t>("t.i64", -9000000000000000000ll);
  w.add_scalar<double>("t.f64", -2.25);
  w.add_array<std::uint8_t>("a.u8", {1, 2, 255});
  w.add_array<std::int8_t>("a.i8", {-1, 2});
  w.add_array<std::uint16_t>("a.u16", {65535});
  w.add_array<std::int16_t>("a.i16", {-5, 5});
  w.add_array<std::uint32_t>("a.u32", {7, 8, 9});
  w.add_array<std::int32_t>("a.i32", {-7});
  w.add_array<float>("a.f32", {0.5f, -0.25f});
  w.add_array<bool>("a.bool", {true, false, true});
  w.add_array<std::string>("a.string", {"a", "", "ccc"});
  w.add_array<std::uint64_t>("a.u64", {1ull << 40});
  w.add_array<std::int64_t>("a.i64", {-(1ll << 40)});
  w.add_array<double>("a.f64", {1e300});
  w.add_array<std::uint32_t>("a.empty", {});
  w.add("a.nested", GgufType::ARRAY,
        gguf_array_of_arrays({gguf_array<std::uint32_t>({1, 2}), gguf_array<std::uint32_t>({}),
                              gguf_array<std::uint32_t>({3})}));
  w.add("a.nested_strings", GgufType::ARRAY, gguf_array_of_arrays({gguf_array<std::string>({"x", "yz"})}));

  w.add_tensor("empty", GgmlType::F32, {0, 3}, {});
  // [2, 3] f32: rows {1, 2, 3}, {4, 5, 6}; GGUF dims are innermost first.
  w.add_tensor("f32", GgmlType::F32, {3, 2}, raw_values<float>({1, 2, 3, 4, 5, 6}));
  w.add_tensor("f16", GgmlType::F16, {3}, raw_values<std::uint16_t>({kF16Half, kF16MinusTwo, 0x7c00}));
  // bf16 0x3FC0 = 1.5, 0xC0A0 = -5.0
  w.add_tensor("bf16", GgmlType::BF16, {2}, raw_values<std::uint16_t>({0x3FC0, 0xC0A0}));
  Bytes q8 = q8_0_block_a();
  put_bytes(q8, q8_0_block_b());
  w.add_tensor("q8_0", GgmlType::Q8_0, {32, 2}, q8);
  w.add_tensor("q4_0", GgmlType::Q4_0, {32}, q4_0_block());
  w.add_tensor("q4_1", GgmlType::Q4_1, {32}, q4_1_block());
  w.add_tensor("q4_k", GgmlType::Q4_K, {256}, Bytes(144, std::byte{0x11}));
  return w;
}

inline Bytes sample_gguf() { return sample_gguf_writer().build(); }

inline Bytes sample_safetensors() {
  SafetensorsWriter w;
  w.add("f32", "F32", {2, 3}, raw_values<float>({1, 2, 3, 4, 5, 6}));
  w.add("f16", "F16", {2}, raw_values<std::uint16_t>({kF16Half, kF16MinusTwo}));
  w.add("bf16", "BF16", {2}, raw_values<std::uint16_t>({0x3FC0, 0xC0A0}));
  w.add("f64", "F64", {1}, raw_values<double>({-2.25}));
  w.add("i32", "I32", {2}, raw_values<std::int32_t>({-7, 7}));
  w.add("i64", "I64", {1}, raw_values<std::int64_t>({-(1ll << 40)}));
  w.add("u8", "U8", {3}, raw_values<std::uint8_t>({0, 1, 255}));
  w.add("i8", "I8", {1}, raw_values<std::int8_t>({-128}));
  w.add("u16", "U16", {1}, raw_values<std::uint16_t>({65535}));
  w.add("i16", "I16", {1}, raw_values<std::int16_t>({-300}));
  w.add("u32", "U32", {1}, raw_values<std::uint32_t>({4000000000u}));
  w.add("u64", "U64", {1}, raw_values<std::uint64_t>({1ull << 40}));
  w.add("bool", "BOOL", {2}, raw_values<std::uint8_t>({1, 0}));
  w.add("scalar", "F32", {}, raw_values<float>({3.5f}));
  w.add("empty", "F32", {0, 4}, {});
  w.add("fp8", "F8_E4M3", {2}, raw_values<std::uint8_t>({0x38, 0x40}));
  return w.build();
}

// Changes 1 to max_changes random bytes, each either set to a random value or one bit flipped;
// positions are drawn below `region_end` except one time in `whole_file_every` (0: never).
inline void corrupt_bytes(Bytes& bytes, std::mt19937_64& rng, std::size_t region_end, int max_changes,
                          int whole_file_every = 0) {
  const int changes = 1 + static_cast<int>(rng() % static_cast<std::uint64_t>(max_changes));
  for (int c = 0; c < changes; ++c) {
    const bool anywhere = whole_file_every > 0 && rng() % static_cast<std::uint64_t>(whole_file_every) == 0;
    const std::size_t at = rng() % (anywhere ? bytes.size() : region_end);
    bytes[at] = rng() % 2 ? static_cast<std::byte>(rng()) : (bytes[at] ^ static_cast<std::byte>(1u << (rng() % 8)));
  }
}

// Expects every strict prefix of `full` to make `parse` throw ignis::Error whose message contains `names`
// (the format and the source, e.g. "gguf: <memory>: "; what follows differs by prefix).
template <class Parse>
void expect_every_prefix_rejected(const Bytes& full, Parse parse, const std::string& names) {
  for (std::size_t n = 0; n < full.size(); ++n) {
    SCOPED_TRACE("prefix length " + std::to_string(n));
    const Bytes prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_ERROR_CONTAINS(parse(prefix), names);
  }
}

// A file in a fresh temporary directory, removed with the object.
class TempFile {
 public:
  TempFile(const std::string& name, const Bytes& bytes) {
    dir_ = std::filesystem::temp_directory_path() /
           ("ignis_model_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / name).string();
    std::ofstream out(path_, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  std::filesystem::path dir_;
  std::string path_;
};

}  // namespace ignis::test
