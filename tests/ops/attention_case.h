#pragma once
// The shape and options of one attention op test case, shared by the attention kernels' tests.
#include <cmath>
#include <cstdint>
#include <ostream>

#include "harness/op_harness.h"
#include "ignis/attention_params.h"
#include "ref/attention.h"

namespace ignis::test {

struct AttentionCase {
  std::int64_t batch = 1;
  std::int64_t heads_kv = 1;
  std::int64_t ratio = 1;  // heads_q / heads_kv
  std::int64_t seqlen_q = 1;
  std::int64_t seqlen_k = 1;
  std::int64_t head_dim = 16;
  AttentionParams params;
};

inline std::ostream& operator<<(std::ostream& out, const AttentionCase& c) {
  return out << "batch " << c.batch << " heads " << c.heads_kv * c.ratio << "/" << c.heads_kv << " seqlen "
             << c.seqlen_q << "x" << c.seqlen_k << " head_dim " << c.head_dim << " scale " << c.params.scale
             << (c.params.causal ? " causal" : "") << " window " << c.params.window_left << ","
             << c.params.window_right << " softcap " << c.params.softcap;
}

inline AttentionCase shaped(std::int64_t batch, std::int64_t heads_kv, std::int64_t ratio, std::int64_t seqlen_q,
                            std::int64_t seqlen_k, std::int64_t head_dim, const AttentionParams& params = {}) {
  return {batch, heads_kv, ratio, seqlen_q, seqlen_k, head_dim, params};
}

// The reference's parameters, with scale 0 resolved to 1 / sqrt(head_dim).
inline ref::AttentionParams to_ref(const AttentionCase& c) {
  ref::AttentionParams p;
  p.batch = c.batch;
  p.heads_q = c.heads_kv * c.ratio;
  p.heads_kv = c.heads_kv;
  p.seqlen_q = c.seqlen_q;
  p.seqlen_k = c.seqlen_k;
  p.head_dim = c.head_dim;
  p.scale = c.params.scale != 0.0 ? c.params.scale : 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  p.causal = c.params.causal;
  p.window_left = c.params.window_left;
  p.window_right = c.params.window_right;
  p.softcap = c.params.softcap;
  return p;
}

// Standard normal q, k and v of p's shapes, rounded to `dtype`, as values and as tensors on `device`.
struct AttentionInputs {
  std::vector<double> q, k, v;  // q: [batch, seqlen_q, heads_q, head_dim]; k, v: [batch, seqlen_k, heads_kv, head_dim]
  Tensor tq, tk, tv;
};

inline AttentionInputs random_attention_inputs(const ref::AttentionParams& p, DType dtype, Device device,
                                               std::mt19937_64& rng) {
  const Shape q_shape{p.batch, p.seqlen_q, p.heads_q, p.head_dim};
  const Shape kv_shape{p.batch, p.seqlen_k, p.heads_kv, p.head_dim};
  AttentionInputs in;
  in.q = quantize(random_normal(rng, static_cast<std::size_t>(p.batch * p.seqlen_q * p.heads_q * p.head_dim)), dtype);
  in.k = quantize(random_normal(rng, static_cast<std::size_t>(p.batch * p.seqlen_k * p.heads_kv * p.head_dim)), dtype);
  in.v = quantize(random_normal(rng, in.k.size()), dtype);
  in.tq = make_tensor(in.q, q_shape, dtype, device);
  in.tk = make_tensor(in.k, kv_shape, dtype, device);
  in.tv = make_tensor(in.v, kv_shape, dtype, device);
  return in;
}

}  // namespace ignis::test
