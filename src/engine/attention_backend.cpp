#include "engine/attention_backend.h"

#include <string>

#include "ignis/error.h"

namespace ignis::engine {

void check_attention_batch(const AttentionBatch& a, const char* where) {
  check_dim(a.q, 4, where, "q");
  check_dim(a.k_cache, 4, where, "k_cache");
  const std::int64_t batch = a.q.size(0), n_new = a.q.size(1), heads_q = a.q.size(2), head_dim = a.q.size(3);
  const std::int64_t max_seq = a.k_cache.size(1), heads_kv = a.k_cache.size(2);
  check_shape(a.k_cache, {batch, max_seq, heads_kv, head_dim}, where, "k_cache");
  check_shape(a.v_cache, a.k_cache.shape(), where, "v_cache");
  check_shape(a.out, a.q.shape(), where, "out");
  for (const auto& [t, name] : {std::pair{&a.k_cache, "k_cache"}, {&a.v_cache, "v_cache"}, {&a.out, "out"}}) {
    check_dtype(*t, a.q.dtype(), where, name);
    check_device(*t, a.q.device(), where, name);
  }
  for (const auto& [t, name] :
       {std::pair{&a.q, "q"}, {&a.k_cache, "k_cache"}, {&a.v_cache, "v_cache"}, {&a.out, "out"}})
    check_contiguous(*t, where, name);
  check_arg(heads_kv > 0 && heads_q % heads_kv == 0, where, "heads_kv",
            detail::lazy_concat("a divisor of heads_q ", heads_q), heads_kv);
  check_arg(a.kv_lengths.size() == static_cast<std::size_t>(batch), where, "kv_lengths.size", batch,
            a.kv_lengths.size());
  for (std::int64_t len : a.kv_lengths)
    check_arg(len >= n_new && len <= max_seq, where, "kv_lengths",
              detail::lazy_concat("values in [n_new = ", n_new, ", max_seq = ", max_seq, "]"), len);
  if (a.device_kv_lengths) {
    check_shape(*a.device_kv_lengths, {batch}, where, "device_kv_lengths");
    check_dtype(*a.device_kv_lengths, DType::i32, where, "device_kv_lengths");
    check_device(*a.device_kv_lengths, a.q.device(), where, "device_kv_lengths");
  }
}

}  // namespace ignis::engine
