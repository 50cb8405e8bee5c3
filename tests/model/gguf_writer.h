#pragma once
// A small GGUF writer for tests: builds files byte by byte so tests can produce valid files of
// every metadata and tensor type, and malformed ones by overriding any header field.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "model/gguf.h"

namespace ignis::test {

using Bytes = std::vector<std::byte>;

template <class T>
void put(Bytes& out, const T& v) {
  static_assert(std::is_trivially_copyable_v<T>);
  const auto* p = reinterpret_cast<const std::byte*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

inline void put_string(Bytes& out, const std::string& s) {
  put<std::uint64_t>(out, s.size());
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  out.insert(out.end(), p, p + s.size());
}

inline void put_bytes(Bytes& out, const Bytes& b) { out.insert(out.end(), b.begin(), b.end()); }

// The encoded value (without its type id) of a scalar, string, or array.
template <class T>
Bytes gguf_scalar(T v) {
  Bytes out;
  if constexpr (std::is_same_v<T, bool>) {
    put<std::uint8_t>(out, v ? 1 : 0);
  } else {
    put(out, v);
  }
  return out;
}

inline Bytes gguf_string(const std::string& s) {
  Bytes out;
  put_string(out, s);
  return out;
}

template <class T>
Bytes gguf_array(const std::vector<T>& items) {
  Bytes out;
  put<std::uint32_t>(out, static_cast<std::uint32_t>(model::GgufTypeOf<T>::value));
  put<std::uint64_t>(out, items.size());
  for (const T& item : items) {
    if constexpr (std::is_same_v<T, std::string>) {
      put_string(out, item);
    } else {
      put_bytes(out, gguf_scalar<T>(item));
    }
  }
  return out;
}

// An array whose elements are arrays, each given already encoded by gguf_array.
inline Bytes gguf_array_of_arrays(const std::vector<Bytes>& inner) {
  Bytes out;
  put<std::uint32_t>(out, static_cast<std::uint32_t>(model::GgufType::ARRAY));
  put<std::uint64_t>(out, inner.size());
  for (const Bytes& b : inner) put_bytes(out, b);
  return out;
}

class GgufWriter {
 public:
  struct Tensor {
    std::string name;
    std::uint32_t type;
    std::vector<std::uint64_t> dims;  // innermost first
    Bytes data;
    std::optional<std::uint32_t> n_dims;   // overrides dims.size() in the header
    std::optional<std::uint64_t> offset;   // overrides the computed data offset
  };

  std::uint32_t version = 3;
  std::uint32_t magic = 0x46554747;
  std::uint64_t alignment = 32;  // used for layout; add a general.alignment key to change it in the file
  std::optional<std::uint64_t> tensor_count;  // override the header counts
  std::optional<std::uint64_t> kv_count;

  void add(const std::string& key, model::GgufType type, Bytes value) {
    kvs_.push_back({key, static_cast<std::uint32_t>(type), std::move(value)});
  }
  template <class T>
  void add_scalar(const std::string& key, T v) {
    add(key, model::GgufTypeOf<T>::value, gguf_scalar(v));
  }
  void add_string(const std::string& key, const std::string& s) { add(key, model::GgufType::STRING, gguf_string(s)); }
  template <class T>
  void add_array(const std::string& key, const std::vector<T>& items) {
    add(key, model::GgufType::ARRAY, gguf_array(items));
  }

  Tensor& add_tensor(const std::string& name, model::GgmlType type, std::vector<std::uint64_t> dims, Bytes data) {
    tensors_.push_back({name, static_cast<std::uint32_t>(type), std::move(dims), std::move(data), {}, {}});
    return tensors_.back();
  }

  Bytes build() const {
    Bytes out;
    put(out, magic);
    put(out, version);
    put<std::uint64_t>(out, tensor_count.value_or(tensors_.size()));
    put<std::uint64_t>(out, kv_count.value_or(kvs_.size()));
    for (const auto& kv : kvs_) {
      put_string(out, kv.key);
      put(out, kv.type);
      put_bytes(out, kv.value);
    }
    std::uint64_t offset = 0;
    std::vector<std::uint64_t> offsets;
    for (const Tensor& t : tensors_) {
      offsets.push_back(offset);
      offset = align(offset + t.data.size());
    }
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      const Tensor& t = tensors_[i];
      put_string(out, t.name);
      put<std::uint32_t>(out, t.n_dims.value_or(static_cast<std::uint32_t>(t.dims.size())));
      for (std::uint64_t d : t.dims) put(out, d);
      put(out, t.type);
      put<std::uint64_t>(out, t.offset.value_or(offsets[i]));
    }
    out.resize(align(out.size()));
    const std::size_t data_start = out.size();
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      out.resize(data_start + offsets[i]);
      put_bytes(out, tensors_[i].data);
    }
    return out;
  }

 private:
  struct Kv {
    std::string key;
    std::uint32_t type;
    Bytes value;
  };
  std::uint64_t align(std::uint64_t v) const { return (v + alignment - 1) / alignment * alignment; }

  std::vector<Kv> kvs_;
  std::vector<Tensor> tensors_;
};

// Raw little-endian storage of values, for tensor data.
template <class T>
Bytes raw_values(const std::vector<T>& values) {
  Bytes out;
  for (const T& v : values) put(out, v);
  return out;
}

}  // namespace ignis::test
