#include "cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace ignis::cpu {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Whether query i sees key j, with diag = seqlen_k - seqlen_q (masks aligned to the bottom-right corner).
bool visible(const AttentionParams& p, std::int64_t diag, std::int64_t i, std::int64_t j) {
  if (p.causal && j > i + diag) return false;
  if (p.window_left >= 0 && j < i + diag - p.window_left) return false;
  if (p.window_right >= 0 && j > i + diag + p.window_right) return false;
  return true;
}

double dot(const float* a, const float* b, std::int64_t n) {
  double sum = 0.0;
  for (std::int64_t d = 0; d < n; ++d) sum += static_cast<double>(a[d]) * b[d];
  return sum;
}

// scale * q.k, softcapped when softcap > 0.
double score(const float* q, const float* k, std::int64_t head_dim, const AttentionParams& p) {
  const double s = p.scale * dot(q, k, head_dim);
  return p.softcap > 0.0 ? p.softcap * std::tanh(s / p.softcap) : s;
}

// Element offsets of row i of head h in a [batch, seqlen, heads, head_dim] tensor.
std::int64_t row_at(std::int64_t b, std::int64_t i, std::int64_t h, std::int64_t seqlen, std::int64_t heads,
                    std::int64_t head_dim) {
  return ((b * seqlen + i) * heads + h) * head_dim;
}

}  // namespace

void attention_forward_f32(const float* q, const float* k, const float* v, float* o, float* lse,
                           const std::int32_t* seqlens_k, const AttentionShape& s, const AttentionParams& p) {
  const std::int64_t D = s.head_dim, group = s.heads_q / s.heads_kv;
  std::vector<double> scores(static_cast<std::size_t>(s.seqlen_k)), acc(static_cast<std::size_t>(D));
  for (std::int64_t b = 0; b < s.batch; ++b) {
    const std::int64_t keys =
        seqlens_k ? std::clamp<std::int64_t>(seqlens_k[b], 0, s.seqlen_k) : s.seqlen_k;
    const std::int64_t diag = keys - s.seqlen_q;
    for (std::int64_t h = 0; h < s.heads_q; ++h)
      for (std::int64_t i = 0; i < s.seqlen_q; ++i) {
        const float* qi = q + row_at(b, i, h, s.seqlen_q, s.heads_q, D);
        double max = kNegInf;
        for (std::int64_t j = 0; j < keys; ++j) {
          double& sj = scores[static_cast<std::size_t>(j)];
          sj = visible(p, diag, i, j) ? score(qi, k + row_at(b, j, h / group, s.seqlen_k, s.heads_kv, D), D, p)
                                      : kNegInf;
          max = std::max(max, sj);
        }
        std::fill(acc.begin(), acc.end(), 0.0);
        double sum = 0.0;
        if (max != kNegInf) {
          for (std::int64_t j = 0; j < keys; ++j) {
            const double w = std::exp(scores[static_cast<std::size_t>(j)] - max);  // 0 for a masked key
            if (w == 0.0) continue;
            sum += w;
            const float* vj = v + row_at(b, j, h / group, s.seqlen_k, s.heads_kv, D);
            for (std::int64_t d = 0; d < D; ++d) acc[static_cast<std::size_t>(d)] += w * vj[d];
          }
        }
        float* oi = o + row_at(b, i, h, s.seqlen_q, s.heads_q, D);
        for (std::int64_t d = 0; d < D; ++d)
          oi[d] = sum > 0.0 ? static_cast<float>(acc[static_cast<std::size_t>(d)] / sum) : 0.0f;
        if (lse)
          lse[(b * s.heads_q + h) * s.seqlen_q + i] =
              sum > 0.0 ? static_cast<float>(max + std::log(sum)) : -std::numeric_limits<float>::infinity();
      }
  }
}

void attention_backward_f32(const float* dout, const float* q, const float* k, const float* v, const float* o,
                            const float* lse, float* dq, float* dk, float* dv, const AttentionShape& s,
                            const AttentionParams& p) {
  const std::int64_t D = s.head_dim, group = s.heads_q / s.heads_kv, diag = s.seqlen_k - s.seqlen_q;
  const auto kv_count = static_cast<std::size_t>(s.batch * s.seqlen_k * s.heads_kv * D);
  // dk and dv sum over every query of the group, so they accumulate in double and are rounded once.
  std::vector<double> dk_acc(kv_count, 0.0), dv_acc(kv_count, 0.0), dq_row(static_cast<std::size_t>(D));
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::int64_t h = 0; h < s.heads_q; ++h)
      for (std::int64_t i = 0; i < s.seqlen_q; ++i) {
        const std::int64_t qi_at = row_at(b, i, h, s.seqlen_q, s.heads_q, D);
        const float* qi = q + qi_at;
        const float* doi = dout + qi_at;
        std::fill(dq_row.begin(), dq_row.end(), 0.0);
        const double row_lse = lse[(b * s.heads_q + h) * s.seqlen_q + i];
        if (row_lse != kNegInf) {  // a query with no visible key passes no gradient
          const double delta = dot(doi, o + qi_at, D);  // sum_j P_ij dP_ij = dout_i . o_i
          for (std::int64_t j = 0; j < s.seqlen_k; ++j) {
            if (!visible(p, diag, i, j)) continue;
            const std::int64_t kv_at = row_at(b, j, h / group, s.seqlen_k, s.heads_kv, D);
            const double sc = score(qi, k + kv_at, D, p);
            const double prob = std::exp(sc - row_lse);
            double ds = prob * (dot(doi, v + kv_at, D) - delta);
            if (p.softcap > 0.0) ds *= 1.0 - (sc / p.softcap) * (sc / p.softcap);  // d/du c tanh(u / c)
            ds *= p.scale;
            for (std::int64_t d = 0; d < D; ++d) {
              const auto e = static_cast<std::size_t>(kv_at + d);
              dv_acc[e] += prob * doi[d];
              dk_acc[e] += ds * qi[d];
              dq_row[static_cast<std::size_t>(d)] += ds * k[kv_at + d];
            }
          }
        }
        for (std::int64_t d = 0; d < D; ++d) dq[qi_at + d] = static_cast<float>(dq_row[static_cast<std::size_t>(d)]);
      }
  for (std::size_t e = 0; e < kv_count; ++e) {
    dk[e] = static_cast<float>(dk_acc[e]);
    dv[e] = static_cast<float>(dv_acc[e]);
  }
}

}  // namespace ignis::cpu
