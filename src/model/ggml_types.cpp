#include "model/ggml_types.h"

#include <cstring>

#include "ignis/error.h"
#include "ignis/float16.h"

namespace ignis::model {

namespace {

struct TypeEntry {
  GgmlType type;
  GgmlTypeInfo info;
};

// Block geometry from each format's block layout (scales + packed quants, in bytes).
constexpr TypeEntry kTypes[] = {
    {GgmlType::F32, {"F32", 1, 4}},
    {GgmlType::F16, {"F16", 1, 2}},
    {GgmlType::Q4_0, {"Q4_0", 32, 2 + 16}},
    {GgmlType::Q4_1, {"Q4_1", 32, 2 + 2 + 16}},
    {GgmlType::Q5_0, {"Q5_0", 32, 2 + 4 + 16}},
    {GgmlType::Q5_1, {"Q5_1", 32, 2 + 2 + 4 + 16}},
    {GgmlType::Q8_0, {"Q8_0", 32, 2 + 32}},
    {GgmlType::Q8_1, {"Q8_1", 32, 2 + 2 + 32}},
    {GgmlType::Q2_K, {"Q2_K", 256, 16 + 64 + 2 + 2}},
    {GgmlType::Q3_K, {"Q3_K", 256, 32 + 64 + 12 + 2}},
    {GgmlType::Q4_K, {"Q4_K", 256, 2 + 2 + 12 + 128}},
    {GgmlType::Q5_K, {"Q5_K", 256, 2 + 2 + 12 + 32 + 128}},
    {GgmlType::Q6_K, {"Q6_K", 256, 128 + 64 + 16 + 2}},
    {GgmlType::Q8_K, {"Q8_K", 256, 4 + 256 + 32}},
    {GgmlType::IQ2_XXS, {"IQ2_XXS", 256, 2 + 64}},
    {GgmlType::IQ2_XS, {"IQ2_XS", 256, 2 + 64 + 8}},
    {GgmlType::IQ3_XXS, {"IQ3_XXS", 256, 2 + 96}},
    {GgmlType::IQ1_S, {"IQ1_S", 256, 2 + 32 + 16}},
    {GgmlType::IQ4_NL, {"IQ4_NL", 32, 2 + 16}},
    {GgmlType::IQ3_S, {"IQ3_S", 256, 2 + 64 + 8 + 32 + 4}},
    {GgmlType::IQ2_S, {"IQ2_S", 256, 2 + 64 + 8 + 8}},
    {GgmlType::IQ4_XS, {"IQ4_XS", 256, 2 + 2 + 4 + 128}},
    {GgmlType::I8, {"I8", 1, 1}},
    {GgmlType::I16, {"I16", 1, 2}},
    {GgmlType::I32, {"I32", 1, 4}},
    {GgmlType::I64, {"I64", 1, 8}},
    {GgmlType::F64, {"F64", 1, 8}},
    {GgmlType::IQ1_M, {"IQ1_M", 256, 32 + 16 + 8}},
    {GgmlType::BF16, {"BF16", 1, 2}},
    {GgmlType::TQ1_0, {"TQ1_0", 256, 48 + 4 + 2}},
    {GgmlType::TQ2_0, {"TQ2_0", 256, 64 + 2}},
    {GgmlType::MXFP4, {"MXFP4", 32, 1 + 16}},
};

std::uint16_t load_u16(const std::byte* p) {
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

float load_f16(const std::byte* p) { return f16_bits_to_float(load_u16(p)); }

// Q8_0: f16 scale d, then 32 signed bytes q; x = q * d.
// block: [34] bytes; out: [32].
void dequant_q8_0(const std::byte* block, float* out) {
  const float d = load_f16(block);
  for (int i = 0; i < 32; ++i) out[i] = static_cast<float>(static_cast<std::int8_t>(block[2 + i])) * d;
}

// Q4_0: f16 scale d, then 16 bytes; byte j holds element j in its low nibble and element
// j + 16 in its high nibble; x = (nibble - 8) * d.
// block: [18] bytes; out: [32].
void dequant_q4_0(const std::byte* block, float* out) {
  const float d = load_f16(block);
  for (int j = 0; j < 16; ++j) {
    const auto q = static_cast<std::uint8_t>(block[2 + j]);
    out[j] = static_cast<float>((q & 0x0f) - 8) * d;
    out[j + 16] = static_cast<float>((q >> 4) - 8) * d;
  }
}

// Q4_1: f16 scale d, f16 offset m, then nibbles laid out as in Q4_0; x = nibble * d + m.
// block: [20] bytes; out: [32].
void dequant_q4_1(const std::byte* block, float* out) {
  const float d = load_f16(block);
  const float m = load_f16(block + 2);
  for (int j = 0; j < 16; ++j) {
    const auto q = static_cast<std::uint8_t>(block[4 + j]);
    out[j] = static_cast<float>(q & 0x0f) * d + m;
    out[j + 16] = static_cast<float>(q >> 4) * d + m;
  }
}

}  // namespace

std::optional<GgmlTypeInfo> ggml_type_info(std::uint32_t type_id) {
  for (const auto& entry : kTypes)
    if (static_cast<std::uint32_t>(entry.type) == type_id) return entry.info;
  return std::nullopt;
}

std::string ggml_type_name(GgmlType type) {
  const auto info = ggml_type_info(static_cast<std::uint32_t>(type));
  return info ? std::string(info->name) : detail::concat("unknown(", static_cast<std::uint32_t>(type), ")");
}

bool ggml_can_dequantize(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1: return true;
    default: return false;
  }
}

void ggml_require_dequantizable(GgmlType type, const std::string& what) {
  if (!ggml_can_dequantize(type))
    throw Error(detail::concat("gguf: dequantize: ", what, " has type ", ggml_type_name(type),
                               ", which is not supported (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1)"));
}

void ggml_dequantize(GgmlType type, std::span<const std::byte> src, std::span<float> dst, const std::string& what) {
  ggml_require_dequantizable(type, what);
  const GgmlTypeInfo info = *ggml_type_info(static_cast<std::uint32_t>(type));
  check_arg(dst.size() % info.block_elems == 0, "gguf: dequantize", what + " element count",
            detail::concat("a multiple of ", info.block_elems, " (", info.name, " block)"), dst.size());
  const std::size_t blocks = dst.size() / info.block_elems;
  check_arg(src.size() / info.block_bytes == blocks && src.size() % info.block_bytes == 0, "gguf: dequantize",
            what + " bytes", blocks * info.block_bytes, src.size());
  if (blocks == 0) return;  // an empty span may hold a null pointer, which memcpy must not see
  const std::byte* in = src.data();
  float* out = dst.data();
  switch (type) {
    case GgmlType::F32: std::memcpy(out, in, blocks * 4); break;
    case GgmlType::F16:
      for (std::size_t i = 0; i < blocks; ++i) out[i] = load_f16(in + 2 * i);
      break;
    case GgmlType::BF16:
      for (std::size_t i = 0; i < blocks; ++i) out[i] = bf16_bits_to_float(load_u16(in + 2 * i));
      break;
    case GgmlType::Q8_0:
      for (std::size_t b = 0; b < blocks; ++b) dequant_q8_0(in + b * info.block_bytes, out + b * 32);
      break;
    case GgmlType::Q4_0:
      for (std::size_t b = 0; b < blocks; ++b) dequant_q4_0(in + b * info.block_bytes, out + b * 32);
      break;
    case GgmlType::Q4_1:
      for (std::size_t b = 0; b < blocks; ++b) dequant_q4_1(in + b * info.block_bytes, out + b * 32);
      break;
    default: break;  // excluded by ggml_can_dequantize above
  }
}

}  // namespace ignis::model
