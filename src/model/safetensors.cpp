#include "model/safetensors.h"

#include <bit>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "ignis/error.h"
#include "ignis/float16.h"
#include "model/checked_math.h"

namespace ignis::model {

static_assert(std::endian::native == std::endian::little, "the safetensors reader assumes a little-endian host");

namespace {

// The reference implementation refuses headers above 100 MB; so do we, before parsing.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

struct DTypeEntry {
  SafetensorsDType dtype;
  std::string_view name;
  std::uint64_t size;
};

constexpr DTypeEntry kDTypes[] = {
    {SafetensorsDType::BOOL, "BOOL", 1}, {SafetensorsDType::U8, "U8", 1},
    {SafetensorsDType::I8, "I8", 1},     {SafetensorsDType::U16, "U16", 2},
    {SafetensorsDType::I16, "I16", 2},   {SafetensorsDType::F16, "F16", 2},
    {SafetensorsDType::BF16, "BF16", 2}, {SafetensorsDType::U32, "U32", 4},
    {SafetensorsDType::I32, "I32", 4},   {SafetensorsDType::F32, "F32", 4},
    {SafetensorsDType::U64, "U64", 8},   {SafetensorsDType::I64, "I64", 8},
    {SafetensorsDType::F64, "F64", 8},   {SafetensorsDType::F8_E4M3, "F8_E4M3", 1},
    {SafetensorsDType::F8_E5M2, "F8_E5M2", 1},
};

std::optional<SafetensorsDType> parse_dtype(std::string_view name) {
  for (const auto& e : kDTypes)
    if (e.name == name) return e.dtype;
  return std::nullopt;
}

const DTypeEntry& entry(SafetensorsDType dtype) {
  for (const auto& e : kDTypes)
    if (e.dtype == dtype) return e;
  throw Error("safetensors: invalid dtype enum value");
}

[[noreturn]] void fail_in(const std::string& source, const std::string& message) {
  throw Error("safetensors: " + source + ": " + message);
}

// src: [n] values of T as raw bytes; dst: [n].
template <class T>
void convert(const std::byte* src, float* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, src + i * sizeof(T), sizeof(T));
    dst[i] = static_cast<float>(v);
  }
}

// src: [n] 16-bit values as raw bytes; dst: [n].
template <class Decode>
void convert_u16(const std::byte* src, float* dst, std::size_t n, Decode decode) {
  for (std::size_t i = 0; i < n; ++i) {
    std::uint16_t v;
    std::memcpy(&v, src + 2 * i, 2);
    dst[i] = decode(v);
  }
}

}  // namespace

std::string_view safetensors_dtype_name(SafetensorsDType dtype) { return entry(dtype).name; }
std::uint64_t safetensors_dtype_size(SafetensorsDType dtype) { return entry(dtype).size; }

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  auto mapped = std::make_unique<MappedFile>(path);
  SafetensorsFile file = parse(mapped->bytes(), path);
  file.file_ = std::move(mapped);  // the map's address survives the move, so spans stay valid
  return file;
}

SafetensorsFile SafetensorsFile::parse(std::span<const std::byte> bytes, std::string source) {
  SafetensorsFile file;
  file.bytes_ = bytes;
  file.source_ = std::move(source);
  file.parse_header();
  return file;
}

void SafetensorsFile::parse_header() {
  const std::uint64_t size = bytes_.size();
  if (size < 8)
    fail_in(source_, detail::concat("truncated: file size ", size, " is smaller than the 8-byte header length"));
  std::uint64_t header_len;
  std::memcpy(&header_len, bytes_.data(), 8);
  if (header_len > kMaxHeaderBytes)
    fail_in(source_, detail::concat("header length ", header_len, " exceeds the limit ", kMaxHeaderBytes));
  if (header_len > size - 8)
    fail_in(source_,
            detail::concat("header length ", header_len, " exceeds the ", size - 8, " bytes after the length field"));
  data_offset_ = 8 + header_len;
  const std::uint64_t data_size = size - data_offset_;

  const auto* text = reinterpret_cast<const char*>(bytes_.data() + 8);
  const nlohmann::json header = nlohmann::json::parse(text, text + header_len, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) fail_in(source_, "header is not valid JSON");
  if (!header.is_object()) fail_in(source_, detail::concat("header: expected a JSON object, got ", header.type_name()));

  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string what = "tensor '" + name + "'";
    if (!info.is_object()) fail_in(source_, what + ": expected a JSON object");
    const auto dtype_it = info.find("dtype");
    const auto shape_it = info.find("shape");
    const auto offsets_it = info.find("data_offsets");
    if (dtype_it == info.end() || !dtype_it->is_string()) fail_in(source_, what + ": missing string 'dtype'");
    if (shape_it == info.end() || !shape_it->is_array()) fail_in(source_, what + ": missing array 'shape'");
    if (offsets_it == info.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
        !(*offsets_it)[0].is_number_unsigned() || !(*offsets_it)[1].is_number_unsigned())
      fail_in(source_, what + ": 'data_offsets' must be two non-negative integers");

    SafetensorsTensor t;
    t.name = name;
    const auto dtype = parse_dtype(dtype_it->get_ref<const std::string&>());
    if (!dtype) fail_in(source_, what + ": unknown dtype '" + dtype_it->get<std::string>() + "'");
    t.dtype = *dtype;
    std::uint64_t n = 1;
    for (const auto& dim : *shape_it) {
      if (!dim.is_number_unsigned()) fail_in(source_, what + ": shape entries must be non-negative integers");
      const auto d = dim.get<std::uint64_t>();
      const auto product = checked_mul(n, d);
      if (!product || *product > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        fail_in(source_, detail::concat(what, ": element count overflows at extent ", d));
      n = *product;
      t.shape.push_back(static_cast<std::int64_t>(d));
    }
    t.n_elements = n;
    t.begin = (*offsets_it)[0].get<std::uint64_t>();
    t.end = (*offsets_it)[1].get<std::uint64_t>();
    if (t.begin > t.end)
      fail_in(source_, detail::concat(what, ": data_offsets [", t.begin, ", ", t.end, ") are reversed"));
    if (t.end > data_size)
      fail_in(source_,
              detail::concat(what, ": data [", t.begin, ", ", t.end, ") exceeds the data section size ", data_size));
    const auto n_bytes = checked_mul(n, safetensors_dtype_size(t.dtype));
    if (!n_bytes || *n_bytes != t.end - t.begin)
      fail_in(source_, detail::concat(what, ": data_offsets [", t.begin, ", ", t.end, ") hold ", t.end - t.begin,
                          " bytes, but ", safetensors_dtype_name(t.dtype), " x ", n, " elements need ",
                          n_bytes ? std::to_string(*n_bytes) : "more than 2^64"));
    t.data = bytes_.subspan(static_cast<std::size_t>(data_offset_ + t.begin), static_cast<std::size_t>(*n_bytes));
    if (t.end > t.begin) ranges.emplace_back(t.begin, t.end);
    tensors_.push_back(std::move(t));
  }
  if (const auto overlap = first_overlap(std::move(ranges)))
    fail_in(source_, detail::concat("tensor data ranges overlap at data offset ", *overlap));
  // nlohmann's object is ordered by key, so tensors_ is sorted by name.
  for (std::size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].name, i);
}

const SafetensorsTensor* SafetensorsFile::find_tensor(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const SafetensorsTensor& SafetensorsFile::tensor(std::string_view name) const {
  const SafetensorsTensor* t = find_tensor(name);
  if (t == nullptr) throw Error(detail::concat("safetensors: ", source_, ": tensor '", name, "' not found"));
  return *t;
}

namespace {

void require_convertible(const SafetensorsTensor& tensor) {
  if (tensor.dtype == SafetensorsDType::F8_E4M3 || tensor.dtype == SafetensorsDType::F8_E5M2)
    throw Error(detail::concat("safetensors: to_f32: tensor '", tensor.name, "' has dtype ",
                               safetensors_dtype_name(tensor.dtype), ", which is not supported"));
}

}  // namespace

std::vector<float> to_f32(const SafetensorsTensor& tensor) {
  require_convertible(tensor);  // before allocating the output
  std::vector<float> out(static_cast<std::size_t>(tensor.n_elements));
  to_f32(tensor, out);
  return out;
}

void to_f32(const SafetensorsTensor& tensor, std::span<float> out) {
  const std::string what = "tensor '" + tensor.name + "'";
  const SafetensorsDType dt = tensor.dtype;
  require_convertible(tensor);
  check_arg(out.size() == tensor.n_elements, "safetensors: to_f32", "output size for " + what, tensor.n_elements,
            out.size());
  check_arg(tensor.data.size() == tensor.n_elements * safetensors_dtype_size(dt), "safetensors: to_f32",
            what + " bytes", tensor.n_elements * safetensors_dtype_size(dt), tensor.data.size());
  const std::byte* src = tensor.data.data();
  float* dst = out.data();
  const std::size_t n = out.size();
  switch (dt) {
    case SafetensorsDType::BOOL:
    case SafetensorsDType::U8: convert<std::uint8_t>(src, dst, n); break;
    case SafetensorsDType::I8: convert<std::int8_t>(src, dst, n); break;
    case SafetensorsDType::U16: convert<std::uint16_t>(src, dst, n); break;
    case SafetensorsDType::I16: convert<std::int16_t>(src, dst, n); break;
    case SafetensorsDType::F16: convert_u16(src, dst, n, f16_bits_to_float); break;
    case SafetensorsDType::BF16: convert_u16(src, dst, n, bf16_bits_to_float); break;
    case SafetensorsDType::U32: convert<std::uint32_t>(src, dst, n); break;
    case SafetensorsDType::I32: convert<std::int32_t>(src, dst, n); break;
    case SafetensorsDType::F32: convert<float>(src, dst, n); break;
    case SafetensorsDType::U64: convert<std::uint64_t>(src, dst, n); break;
    case SafetensorsDType::I64: convert<std::int64_t>(src, dst, n); break;
    case SafetensorsDType::F64: convert<double>(src, dst, n); break;
    case SafetensorsDType::F8_E4M3:
    case SafetensorsDType::F8_E5M2: break;  // rejected above
  }
}

}  // namespace ignis::model
