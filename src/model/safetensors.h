#pragma once
// A reader for the safetensors format: an 8-byte little-endian header length, a JSON header
// mapping each tensor name to {"dtype", "shape", "data_offsets": [begin, end)}, then the data
// section those offsets index. Tensors are read in place from a memory map.
//
// The header is untrusted: its size is capped, every shape is overflow-checked, every
// tensor's byte range must match dtype x shape, lie inside the data section and overlap no
// other tensor. Violations raise ignis::Error; the "__metadata__" entry is ignored.
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/mapped_file.h"

namespace ignis::model {

enum class SafetensorsDType { BOOL, U8, I8, U16, I16, F16, BF16, U32, I32, F32, U64, I64, F64, F8_E4M3, F8_E5M2 };
// The header spelling: "F32", "BF16", ...
std::string_view safetensors_dtype_name(SafetensorsDType dtype);
std::uint64_t safetensors_dtype_size(SafetensorsDType dtype);

struct SafetensorsTensor {
  std::string name;
  SafetensorsDType dtype;
  std::vector<std::int64_t> shape;  // row-major, as in the header
  std::uint64_t n_elements = 0;
  std::uint64_t begin = 0;  // data_offsets, relative to the start of the data section
  std::uint64_t end = 0;
  std::span<const std::byte> data;
};

class SafetensorsFile {
 public:
  // Maps and parses a file; errors name the path.
  static SafetensorsFile open(const std::string& path);
  // Parses bytes owned by the caller, who keeps them alive as long as the SafetensorsFile.
  static SafetensorsFile parse(std::span<const std::byte> bytes, std::string source = "<memory>");

  const std::string& source() const { return source_; }
  std::uint64_t data_offset() const { return data_offset_; }  // 8 + header length
  // Sorted by name.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find_tensor(std::string_view name) const;
  // Throws "safetensors: <source>: tensor 'x' not found".
  const SafetensorsTensor& tensor(std::string_view name) const;

 private:
  SafetensorsFile() = default;
  void parse_header();

  std::unique_ptr<MappedFile> file_;  // set when this object owns the map that bytes_ views
  std::span<const std::byte> bytes_;
  std::string source_;
  std::uint64_t data_offset_ = 0;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, std::size_t, std::less<>> index_;
};

// Converts a tensor to f32 (row-major). Supported: F32, F16, BF16, F64 and the integer and
// bool types; FP8 types throw naming the tensor and dtype.
std::vector<float> to_f32(const SafetensorsTensor& tensor);
// The same into a caller's buffer of exactly tensor.n_elements floats.
void to_f32(const SafetensorsTensor& tensor, std::span<float> out);

}  // namespace ignis::model
