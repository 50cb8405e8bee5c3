#pragma once
// What the attention dispatchers share: the checks of AttentionParams and the default scale.
#include <cmath>
#include <cstdint>
#include <utility>

#include "ignis/attention_params.h"
#include "ignis/error.h"
#include "ignis/tensor.h"

namespace ignis {

inline void check_attention_params(const AttentionParams& p, const char* where) {
  check_arg(std::isfinite(p.scale), where, "params.scale", "finite", p.scale);
  check_arg(std::isfinite(p.softcap) && p.softcap >= 0.0, where, "params.softcap", "finite and >= 0", p.softcap);
  check_arg(p.window_left >= -1, where, "params.window_left", ">= -1", p.window_left);
  check_arg(p.window_right >= -1, where, "params.window_right", ">= -1", p.window_right);
}

// q: [batch, seqlen_q, heads_q, head_dim] contiguous, k: [batch, seqlen_k, heads_kv, head_dim]: their ranks, every
// size positive and heads_q a multiple of heads_kv (k's other checks are check_attention_tensor's).
inline void check_attention_shapes(const Tensor& q, const Tensor& k, const char* where) {
  check_dim(q, 4, where, "q");
  check_contiguous(q, where, "q");
  check_dim(k, 4, where, "k");
  for (auto [size, name] : {std::pair{q.size(0), "q.size(0) (batch)"}, std::pair{q.size(1), "q.size(1) (seqlen_q)"},
                            std::pair{q.size(2), "q.size(2) (heads_q)"}, std::pair{q.size(3), "q.size(3) (head_dim)"},
                            std::pair{k.size(1), "k.size(1) (seqlen_k)"}, std::pair{k.size(2), "k.size(2) (heads_kv)"}})
    check_arg(size > 0, where, name, "> 0", size);
  check_arg(q.size(2) % k.size(2) == 0, where, "q.size(2) (heads_q)",
            detail::lazy_concat("a multiple of heads_kv (", k.size(2), ")"), q.size(2));
}

// t: `shape` and `dtype`, on like's device, contiguous (q, k, v, o, lse and the lengths).
inline void check_attention_tensor(const Tensor& t, const Tensor& like, const Shape& shape, DType dtype,
                                   const char* where, const char* name) {
  check_dim(t, static_cast<int>(shape.size()), where, name);
  check_shape(t, shape, where, name);
  check_dtype(t, dtype, where, name);
  check_device(t, like.device(), where, name);
  check_contiguous(t, where, name);
}

// params with scale 0 replaced by 1 / sqrt(head_dim).
inline AttentionParams resolved_attention_params(const AttentionParams& params, std::int64_t head_dim) {
  AttentionParams r = params;
  if (r.scale == 0.0) r.scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  return r;
}

}  // namespace ignis
