#pragma once
// A reader for GGUF (versions 2 and 3, little-endian) model files: the metadata key/values, the
// tensor directory, and each tensor's raw bytes read in place from a memory map.
//
// Every count, length, offset and size in the file is checked against the file size before
// use, with overflow-checked arithmetic, so a truncated or hostile file raises ignis::Error
// and never crashes or makes the reader allocate more than a small multiple of the file size.
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ignis/error.h"
#include "model/ggml_types.h"
#include "model/mapped_file.h"

namespace ignis::model {

// The metadata value type ids of GGUF.
enum class GgufType : std::uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
// "u32", "string", "array", ...; "unknown(N)" for an id outside the enum.
std::string gguf_type_name(GgufType type);

// The GGUF type that holds a C++ type (the typed getters below are instantiated for these).
template <class T> struct GgufTypeOf;
template <> struct GgufTypeOf<std::uint8_t> { static constexpr GgufType value = GgufType::U8; };
template <> struct GgufTypeOf<std::int8_t> { static constexpr GgufType value = GgufType::I8; };
template <> struct GgufTypeOf<std::uint16_t> { static constexpr GgufType value = GgufType::U16; };
template <> struct GgufTypeOf<std::int16_t> { static constexpr GgufType value = GgufType::I16; };
template <> struct GgufTypeOf<std::uint32_t> { static constexpr GgufType value = GgufType::U32; };
template <> struct GgufTypeOf<std::int32_t> { static constexpr GgufType value = GgufType::I32; };
template <> struct GgufTypeOf<float> { static constexpr GgufType value = GgufType::F32; };
template <> struct GgufTypeOf<bool> { static constexpr GgufType value = GgufType::BOOL; };
template <> struct GgufTypeOf<std::string> { static constexpr GgufType value = GgufType::STRING; };
template <> struct GgufTypeOf<std::uint64_t> { static constexpr GgufType value = GgufType::U64; };
template <> struct GgufTypeOf<std::int64_t> { static constexpr GgufType value = GgufType::I64; };
template <> struct GgufTypeOf<double> { static constexpr GgufType value = GgufType::F64; };

// One metadata value: a scalar, a string, or an array of any of these (arrays may nest).
class GgufValue {
 public:
  GgufType type() const { return type_; }
  // For arrays: the element type and count.
  GgufType element_type() const { return element_type_; }
  std::uint64_t array_size() const { return count_; }
  bool is_integer() const;

  // The value as T; throws "<what>: expected u32, got i32" when the stored type differs.
  template <class T>
  T as(std::string_view what) const {
    require(GgufTypeOf<T>::value, what);
    if constexpr (std::is_same_v<T, std::string>) {
      return string_;
    } else if constexpr (std::is_same_v<T, bool>) {
      return scalar_ != 0;
    } else {
      T v;
      std::memcpy(&v, &scalar_, sizeof(T));
      return v;
    }
  }
  // Any integer type widened to int64; throws for non-integers and u64 values above INT64_MAX.
  std::int64_t as_int(std::string_view what) const;

  // The elements of an array of T; throws when this is not an array of T.
  template <class T>
  std::vector<T> as_array(std::string_view what) const {
    require_array(GgufTypeOf<T>::value, what);
    if constexpr (std::is_same_v<T, std::string>) {
      return strings_;
    } else {
      std::vector<T> out(static_cast<std::size_t>(count_));
      for (std::size_t i = 0; i < out.size(); ++i) {
        if constexpr (std::is_same_v<T, bool>) {
          out[i] = raw_[i] != std::byte{0};
        } else {
          std::memcpy(&out[i], raw_.data() + i * sizeof(T), sizeof(T));
        }
      }
      return out;
    }
  }
  // The elements of an array of arrays.
  const std::vector<GgufValue>& nested(std::string_view what) const;

  // A short rendering for listings: scalars in full, strings quoted, arrays as "[u32 x 30]".
  std::string summary() const;

 private:
  friend class GgufParser;
  void require(GgufType want, std::string_view what) const;
  void require_array(GgufType want_element, std::string_view what) const;

  GgufType type_ = GgufType::U8;
  std::uint64_t scalar_ = 0;  // the little-endian bits of a scalar, zero-extended
  std::string string_;
  GgufType element_type_ = GgufType::U8;
  std::uint64_t count_ = 0;
  std::vector<std::byte> raw_;         // scalar array elements, packed as in the file
  std::vector<std::string> strings_;   // string array elements
  std::vector<GgufValue> arrays_;      // nested array elements
};

struct GgufTensor {
  std::string name;
  GgmlType type;
  // GGUF order, innermost (fastest-varying) first: [ne0, ne1, ...]. 0 to 4 entries.
  std::vector<std::uint64_t> dims;
  // The same extents in row-major order: [..., ne1, ne0]. A matmul weight [out, in] has
  // dims {in, out}: each row of `in` elements is contiguous.
  std::vector<std::int64_t> shape;
  std::uint64_t n_elements = 0;
  std::uint64_t offset = 0;  // from the start of the data section; a multiple of the alignment
  std::span<const std::byte> data;  // the raw stored bytes (blocks for quantized types)
};

class GgufFile {
 public:
  // Maps and parses a file; errors name the path.
  static GgufFile open(const std::string& path);
  // Parses bytes owned by the caller, who keeps them alive as long as the GgufFile.
  static GgufFile parse(std::span<const std::byte> bytes, std::string source = "<memory>");

  const std::string& source() const { return source_; }
  std::uint32_t version() const { return version_; }
  std::uint64_t alignment() const { return alignment_; }
  std::uint64_t data_offset() const { return data_offset_; }  // start of the data section
  std::uint64_t file_size() const { return bytes_.size(); }

  // Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  bool has(std::string_view key) const { return find(key) != nullptr; }
  const GgufValue* find(std::string_view key) const;
  // Throws "gguf: <source>: key 'k' not found".
  const GgufValue& value(std::string_view key) const;

  // Typed lookup; throws for a missing key or "gguf: key 'k': expected u32, got i32".
  template <class T>
  T get(std::string_view key) const {
    return value(key).as<T>(key_what(key));
  }
  // Like get, but nullopt when the key is missing (a wrong type still throws).
  template <class T>
  std::optional<T> get_optional(std::string_view key) const {
    const GgufValue* v = find(key);
    if (v == nullptr) return std::nullopt;
    return v->as<T>(key_what(key));
  }
  template <class T>
  std::vector<T> get_array(std::string_view key) const {
    return value(key).as_array<T>(key_what(key));
  }
  std::uint32_t get_u32(std::string_view key) const { return get<std::uint32_t>(key); }
  std::int32_t get_i32(std::string_view key) const { return get<std::int32_t>(key); }
  std::uint64_t get_u64(std::string_view key) const { return get<std::uint64_t>(key); }
  std::int64_t get_i64(std::string_view key) const { return get<std::int64_t>(key); }
  float get_f32(std::string_view key) const { return get<float>(key); }
  double get_f64(std::string_view key) const { return get<double>(key); }
  bool get_bool(std::string_view key) const { return get<bool>(key); }
  std::string get_string(std::string_view key) const { return get<std::string>(key); }
  // Any integer type, for hyperparameters that writers store as u32, i32 or u64.
  std::int64_t get_int(std::string_view key) const { return value(key).as_int(key_what(key)); }
  std::uint64_t get_array_size(std::string_view key) const;

  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find_tensor(std::string_view name) const;
  // Throws "gguf: <source>: tensor 'x' not found".
  const GgufTensor& tensor(std::string_view name) const;

 private:
  friend class GgufParser;
  GgufFile() = default;
  static std::string key_what(std::string_view key) { return "gguf: key '" + std::string(key) + "'"; }

  std::unique_ptr<MappedFile> file_;  // set when this object owns the map that bytes_ views
  std::span<const std::byte> bytes_;
  std::string source_;
  std::uint32_t version_ = 0;
  std::uint64_t alignment_ = 32;
  std::uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::map<std::string, std::size_t, std::less<>> key_index_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, std::size_t, std::less<>> tensor_index_;
};

// Decodes a tensor to f32 in its stored (row-major) element order. Throws, naming the tensor
// and its type, for types other than F32, F16, BF16, Q8_0, Q4_0, Q4_1.
std::vector<float> dequantize(const GgufTensor& tensor);
// The same into a caller's buffer of exactly tensor.n_elements floats.
void dequantize(const GgufTensor& tensor, std::span<float> out);

}  // namespace ignis::model
