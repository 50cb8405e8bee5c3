#pragma once
// The engine's key/value cache: one K and one V buffer per layer, [batch, max_seq, heads_kv,
// head_dim] (batch = 1 today), filled from position 0 up to length(). The layout is the one of
// the kv_cache_append op and of the attention backends, which read it in place.
//
// A forward pass writes each layer's new rows at [length(), length() + n) and calls advance(n)
// once at the end, so every layer of one pass sees the same length.
//
// A CUDA cache also keeps each layer's length on the device (device_length), which the GPU
// kernels read and kv_cache_append advances, so a decode step needs no host-to-device copy and
// can be replayed from a CUDA graph. The CUDA forward advances them layer by layer; advance()
// moves only the host length; truncate() writes both.
#include <cstdint>
#include <vector>

#include "ignis/tensor.h"

namespace ignis::engine {

class KvCache {
 public:
  KvCache(std::int64_t n_layers, std::int64_t max_seq, std::int64_t n_kv_heads, std::int64_t head_dim,
          Device device = Device::cpu(), DType dtype = DType::f32);

  std::int64_t n_layers() const { return static_cast<std::int64_t>(k_.size()); }
  std::int64_t max_seq() const { return max_seq_; }
  std::int64_t length() const { return length_; }
  std::int64_t n_kv_heads() const { return n_kv_heads_; }
  std::int64_t head_dim() const { return head_dim_; }
  Device device() const { return k_.front().device(); }

  // k(layer), v(layer): [1, max_seq, heads_kv, head_dim].
  const Tensor& k(std::int64_t layer) const { return k_.at(static_cast<std::size_t>(layer)); }
  const Tensor& v(std::int64_t layer) const { return v_.at(static_cast<std::size_t>(layer)); }
  // The f32 rows at `position` of a CPU cache: [max_seq - position, heads_kv * head_dim].
  float* k_rows(std::int64_t layer, std::int64_t position) const;
  float* v_rows(std::int64_t layer, std::int64_t position) const;
  // [1] i32 on the device: the layer's length as the GPU sees it. Only for a CUDA cache.
  Tensor device_length(std::int64_t layer) const;

  // Throws "context length exceeded: <length> + <new_tokens> > <max_seq>" when the tokens do not fit.
  void check_room(std::int64_t new_tokens) const;
  // Makes rows [length, length + n) part of the cache; they must have been written in every layer.
  void advance(std::int64_t n);
  // Forgets every position from n on (0 <= n <= length), e.g. to reuse a common prompt prefix.
  void truncate(std::int64_t n);
  void clear() { truncate(0); }

 private:
  std::int64_t max_seq_, n_kv_heads_, head_dim_;
  std::int64_t length_ = 0;
  std::vector<Tensor> k_, v_;
  Tensor device_lengths_;  // [n_layers] i32, CUDA caches only
};

}  // namespace ignis::engine
