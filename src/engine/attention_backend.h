#pragma once
// The engine's one interface for causal attention over the KV cache. The model calls it once
// per layer after writing that layer's new K/V rows into the cache; a backend reads the cache
// in place (never a copy of it), so fused prefill and flash-decoding kernels can replace the CPU
// loops without any change to the model code.
#include <cstdint>
#include <optional>
#include <span>

#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis::engine {

// Sequence b holds kv_lengths[b] keys (its new rows included); its n_new queries are its last
// n_new positions: query i sits at kv_lengths[b] - n_new + i and sees the keys j <= that
// (bottom-right aligned causal mask). Query head h reads KV head h / (heads_q / heads_kv).
struct AttentionBatch {
  Tensor q;        // [batch, n_new, heads_q, head_dim]
  Tensor k_cache;  // [batch, max_seq, heads_kv, head_dim]
  Tensor v_cache;  // [batch, max_seq, heads_kv, head_dim]
  Tensor out;      // [batch, n_new, heads_q, head_dim], must not overlap q
  std::span<const std::int64_t> kv_lengths;  // [batch], host; each in [n_new, max_seq]
  // [batch] i32 on the cache's device, equal to kv_lengths: GPU kernels read this copy so a
  // decode step needs no host-to-device transfer. CPU backends ignore it.
  std::optional<Tensor> device_kv_lengths;
  float scale = 1.0f;  // multiplies q . k, usually 1 / sqrt(head_dim)
};

class AttentionBackend {
 public:
  virtual ~AttentionBackend() = default;
  virtual const char* name() const = 0;
  // Many queries per sequence (the prompt).
  virtual void prefill(const AttentionBatch& batch, Stream stream = {}) = 0;
  // One query per sequence (n_new == 1): the decode step, where the work is reading the cache.
  virtual void decode(const AttentionBatch& batch, Stream stream = {}) = 0;
};

// Checks the shapes, dtypes, devices and lengths shared by every backend; throws ignis::Error
// ("<where>: <argument>: expected X, got Y").
void check_attention_batch(const AttentionBatch& batch, const char* where);

}  // namespace ignis::engine
