#pragma once
// The ggml tensor storage types found in GGUF files: their ids, names, block geometry, and
// dequantization to f32 for the types the engine reads (F32, F16, BF16, Q8_0, Q4_0, Q4_1).
// Every type GGUF defines has its block geometry here, so a file's tensor sizes can be
// validated even when its weights cannot be dequantized.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace ignis::model {

// The on-disk type ids (the ggml_type enum); the gaps are ids ggml retired.
enum class GgmlType : std::uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22, IQ4_XS = 23,
  I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

// A block of `block_elems` consecutive elements (along the innermost dimension) stored in
// `block_bytes` bytes. Plain types are blocks of one element.
struct GgmlTypeInfo {
  const char* name;
  std::uint32_t block_elems;
  std::uint32_t block_bytes;
};

// The geometry of a type id read from a file, or nullopt for an id this reader does not know.
std::optional<GgmlTypeInfo> ggml_type_info(std::uint32_t type_id);
// "Q4_1", or "unknown(N)" for an unknown id.
std::string ggml_type_name(GgmlType type);

bool ggml_can_dequantize(GgmlType type);
// Throws "gguf: dequantize: <what> has type Q4_K, which is not supported (...)" unless
// ggml_can_dequantize(type).
void ggml_require_dequantizable(GgmlType type, const std::string& what);

// Decodes `dst.size()` elements stored as `type` in `src`. dst.size() must be a multiple of
// the block size and src.size() exactly the bytes those blocks take. Throws ignis::Error for
// an unsupported type or inconsistent sizes, with `what` (e.g. a tensor name) in the message.
void ggml_dequantize(GgmlType type, std::span<const std::byte> src, std::span<float> dst,
                     const std::string& what = "data");

}  // namespace ignis::model
