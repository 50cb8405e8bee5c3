#pragma once
// A small safetensors writer for tests. The JSON header is written as text so tests can also
// hand-craft malformed headers (write_safetensors_raw).
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "model/gguf_writer.h"

namespace ignis::test {

// An 8-byte length, the header text padded with spaces to a multiple of 8 (as writers do),
// then the data section.
inline Bytes write_safetensors_raw(std::string header, const Bytes& data) {
  while (header.size() % 8 != 0) header.push_back(' ');
  Bytes out;
  put<std::uint64_t>(out, header.size());
  const auto* p = reinterpret_cast<const std::byte*>(header.data());
  out.insert(out.end(), p, p + header.size());
  put_bytes(out, data);
  return out;
}

class SafetensorsWriter {
 public:
  struct Tensor {
    std::string name;
    std::string dtype;
    std::vector<std::uint64_t> shape;
    Bytes data;
    std::optional<std::uint64_t> begin, end;  // override the data_offsets
  };

  Tensor& add(const std::string& name, const std::string& dtype, std::vector<std::uint64_t> shape, Bytes data) {
    tensors_.push_back({name, dtype, std::move(shape), std::move(data), {}, {}});
    return tensors_.back();
  }

  Bytes build() const {
    std::ostringstream header;
    header << "{\"__metadata__\":{\"format\":\"pt\"}";
    Bytes data;
    for (const Tensor& t : tensors_) {
      const std::uint64_t begin = data.size();
      put_bytes(data, t.data);
      header << ",\"" << t.name << "\":{\"dtype\":\"" << t.dtype << "\",\"shape\":[";
      for (std::size_t i = 0; i < t.shape.size(); ++i) header << (i ? "," : "") << t.shape[i];
      header << "],\"data_offsets\":[" << t.begin.value_or(begin) << "," << t.end.value_or(data.size()) << "]}";
    }
    header << "}";
    return write_safetensors_raw(header.str(), data);
  }

 private:
  std::vector<Tensor> tensors_;
};

}  // namespace ignis::test
