#include "engine/kv_cache.h"

#include <cstdint>
#include <string>
#include <vector>

#include "ignis/error.h"

namespace ignis::engine {

KvCache::KvCache(std::int64_t n_layers, std::int64_t max_seq, std::int64_t n_kv_heads, std::int64_t head_dim,
                 Device device, DType dtype)
    : max_seq_(max_seq), n_kv_heads_(n_kv_heads), head_dim_(head_dim) {
  constexpr const char* where = "KvCache";
  check_arg(n_layers > 0, where, "n_layers", "> 0", n_layers);
  check_arg(max_seq > 0, where, "max_seq", "> 0", max_seq);
  check_arg(n_kv_heads > 0, where, "n_kv_heads", "> 0", n_kv_heads);
  check_arg(head_dim > 0, where, "head_dim", "> 0", head_dim);
  for (std::int64_t l = 0; l < n_layers; ++l) {
    k_.push_back(Tensor::empty({1, max_seq, n_kv_heads, head_dim}, dtype, device));
    v_.push_back(Tensor::empty({1, max_seq, n_kv_heads, head_dim}, dtype, device));
  }
  if (device.is_cuda()) {
    check_arg(max_seq <= INT32_MAX, where, "max_seq", "<= 2147483647 on CUDA (i32 device lengths)", max_seq);
    device_lengths_ = Tensor::empty({n_layers}, DType::i32, device);
    truncate(0);
  }
}

Tensor KvCache::device_length(std::int64_t layer) const {
  check_arg(device_lengths_.data() != nullptr, "KvCache::device_length", "device",
            "a CUDA cache", device());
  check_arg(layer >= 0 && layer < n_layers(), "KvCache::device_length", "layer",
            detail::lazy_concat("in [0, ", n_layers(), ")"), layer);
  return Tensor::view(device_lengths_.data_as<std::int32_t>() + layer, DType::i32, device(), {1});
}

float* KvCache::k_rows(std::int64_t layer, std::int64_t position) const {
  return k(layer).data_as<float>() + position * n_kv_heads_ * head_dim_;
}

float* KvCache::v_rows(std::int64_t layer, std::int64_t position) const {
  return v(layer).data_as<float>() + position * n_kv_heads_ * head_dim_;
}

void KvCache::check_room(std::int64_t new_tokens) const {
  check_arg(new_tokens >= 0, "KvCache", "new_tokens", ">= 0", new_tokens);
  if (length_ + new_tokens > max_seq_)
    throw Error("context length exceeded: " + std::to_string(length_) + " + " + std::to_string(new_tokens) + " > " +
                std::to_string(max_seq_));
}

void KvCache::advance(std::int64_t n) {
  check_room(n);
  length_ += n;
}

void KvCache::truncate(std::int64_t n) {
  check_arg(n >= 0 && n <= length_, "KvCache::truncate", "n", detail::lazy_concat("a length in [0, ", length_, "]"), n);
  length_ = n;
  if (device_lengths_.data() != nullptr) {
    const std::vector<std::int32_t> lengths(static_cast<std::size_t>(n_layers()), static_cast<std::int32_t>(n));
    copy_bytes(device_lengths_.data(), device_lengths_.device(), lengths.data(), Device::cpu(),
               device_lengths_.nbytes());
  }
}

}  // namespace ignis::engine
