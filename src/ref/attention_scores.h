#pragma once
// Reference attention scores S = scale * Q K^T with the causal mask and the GQA head mapping.
#include <cstdint>
#include <span>
#include <vector>

namespace ignis::ref {

struct ScoresDims {
  std::int64_t batch = 1;
  std::int64_t seqlen_q = 0;
  std::int64_t seqlen_k = 0;
  std::int64_t heads_q = 1;
  std::int64_t heads_kv = 1;  // heads_q % heads_kv == 0; query head h reads kv head h / (heads_q / heads_kv)
  std::int64_t head_dim = 0;
};

// q: [batch, seqlen_q, heads_q, head_dim], k: [batch, seqlen_k, heads_kv, head_dim]
// -> S: [batch, heads_q, seqlen_q, seqlen_k]. With `causal`, key j is visible to query i only
// when j <= i + seqlen_k - seqlen_q (bottom-right aligned); hidden entries are -inf.
std::vector<double> attention_scores(std::span<const double> q, std::span<const double> k, const ScoresDims& dims,
                                     double scale, bool causal);

}  // namespace ignis::ref
