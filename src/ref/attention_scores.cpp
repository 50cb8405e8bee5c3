#include "ref/attention_scores.h"

#include <limits>

namespace ignis::ref {

std::vector<double> attention_scores(std::span<const double> q, std::span<const double> k, const ScoresDims& d,
                                     double scale, bool causal) {
  const std::int64_t group = d.heads_q / d.heads_kv;
  std::vector<double> s(static_cast<std::size_t>(d.batch * d.heads_q * d.seqlen_q * d.seqlen_k));
  for (std::int64_t b = 0; b < d.batch; ++b)
    for (std::int64_t h = 0; h < d.heads_q; ++h)
      for (std::int64_t i = 0; i < d.seqlen_q; ++i)
        for (std::int64_t j = 0; j < d.seqlen_k; ++j) {
          const std::int64_t out = ((b * d.heads_q + h) * d.seqlen_q + i) * d.seqlen_k + j;
          if (causal && j > i + d.seqlen_k - d.seqlen_q) {
            s[out] = -std::numeric_limits<double>::infinity();
            continue;
          }
          const double* qi = q.data() + ((b * d.seqlen_q + i) * d.heads_q + h) * d.head_dim;
          const double* kj = k.data() + ((b * d.seqlen_k + j) * d.heads_kv + h / group) * d.head_dim;
          double dot = 0.0;
          for (std::int64_t e = 0; e < d.head_dim; ++e) dot += qi[e] * kj[e];
          s[out] = scale * dot;
        }
  return s;
}

}  // namespace ignis::ref
