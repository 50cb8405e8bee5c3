#include "ref/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "ignis/error.h"

namespace ignis::ref {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Flat offsets into the [batch, seq, heads, head_dim] and [batch, heads_q, seqlen_q] layouts.
struct Index {
  const AttentionParams& p;
  std::int64_t q(std::int64_t b, std::int64_t i, std::int64_t h) const {
    return ((b * p.seqlen_q + i) * p.heads_q + h) * p.head_dim;
  }
  std::int64_t kv(std::int64_t b, std::int64_t j, std::int64_t h) const {
    return ((b * p.seqlen_k + j) * p.heads_kv + h / (p.heads_q / p.heads_kv)) * p.head_dim;
  }
  std::int64_t lse(std::int64_t b, std::int64_t h, std::int64_t i) const {
    return (b * p.heads_q + h) * p.seqlen_q + i;
  }
};

// x: [expected], any shape flattened.
void check_size(std::span<const double> x, std::int64_t expected, const char* where, const char* name) {
  check_arg(static_cast<std::int64_t>(x.size()) == expected, where, detail::lazy_concat(name, ".size()"), expected,
            x.size());
}

// q: [batch, seqlen_q, heads_q, head_dim]; k, v: [batch, seqlen_k, heads_kv, head_dim].
void check_inputs(std::span<const double> q, std::span<const double> k, std::span<const double> v,
                  const AttentionParams& p, const char* where) {
  validate_attention(p, where);
  check_size(q, p.batch * p.seqlen_q * p.heads_q * p.head_dim, where, "q");
  check_size(k, p.batch * p.seqlen_k * p.heads_kv * p.head_dim, where, "k");
  check_size(v, p.batch * p.seqlen_k * p.heads_kv * p.head_dim, where, "v");
}

// a, b: [n].
double dot(const double* a, const double* b, std::int64_t n) {
  double s = 0.0;
  for (std::int64_t d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

// The (soft-capped) score of a query row against a key row.
// q, k: [head_dim], one query row and one key row.
double score(const double* q, const double* k, const AttentionParams& p) {
  const double s = p.scale * dot(q, k, p.head_dim);
  return p.softcap > 0.0 ? p.softcap * std::tanh(s / p.softcap) : s;
}

}  // namespace

void validate_attention(const AttentionParams& p, const char* where) {
  check_arg(p.batch > 0, where, "batch", "> 0", p.batch);
  check_arg(p.heads_q > 0, where, "heads_q", "> 0", p.heads_q);
  check_arg(p.heads_kv > 0, where, "heads_kv", "> 0", p.heads_kv);
  check_arg(p.seqlen_q > 0, where, "seqlen_q", "> 0", p.seqlen_q);
  check_arg(p.seqlen_k > 0, where, "seqlen_k", "> 0", p.seqlen_k);
  check_arg(p.head_dim > 0, where, "head_dim", "> 0", p.head_dim);
  check_arg(p.heads_q % p.heads_kv == 0, where, "heads_q",
            detail::lazy_concat("a multiple of heads_kv (", p.heads_kv, ")"), p.heads_q);
  check_arg(p.window_left >= -1, where, "window_left", ">= -1", p.window_left);
  check_arg(p.window_right >= -1, where, "window_right", ">= -1", p.window_right);
  check_arg(p.softcap >= 0.0 && std::isfinite(p.softcap), where, "softcap", "finite and >= 0", p.softcap);
  check_arg(std::isfinite(p.scale), where, "scale", "finite", p.scale);
}

bool attention_visible(const AttentionParams& p, std::int64_t i, std::int64_t j) {
  const std::int64_t diag = i + p.seqlen_k - p.seqlen_q;  // the key on this row's bottom-right diagonal
  if (p.causal && j > diag) return false;
  if (p.window_left >= 0 && j < diag - p.window_left) return false;
  if (p.window_right >= 0 && j > diag + p.window_right) return false;
  return true;
}

AttentionForward attention_forward(std::span<const double> q, std::span<const double> k, std::span<const double> v,
                                   const AttentionParams& p) {
  check_inputs(q, k, v, p, "ref::attention_forward");
  const Index at{p};
  AttentionForward out{std::vector<double>(q.size(), 0.0),
                       std::vector<double>(p.batch * p.heads_q * p.seqlen_q, kNegInf)};
  std::vector<double> s(p.seqlen_k);
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t h = 0; h < p.heads_q; ++h)
      for (std::int64_t i = 0; i < p.seqlen_q; ++i) {
        const double* qi = q.data() + at.q(b, i, h);
        double max = kNegInf;
        for (std::int64_t j = 0; j < p.seqlen_k; ++j) {
          s[j] = attention_visible(p, i, j) ? score(qi, k.data() + at.kv(b, j, h), p) : kNegInf;
          max = std::max(max, s[j]);
        }
        if (max == kNegInf) continue;  // no visible key: o stays 0, lse stays -inf
        double sum = 0.0;
        for (std::int64_t j = 0; j < p.seqlen_k; ++j) sum += std::exp(s[j] - max);
        double* oi = out.o.data() + at.q(b, i, h);
        for (std::int64_t j = 0; j < p.seqlen_k; ++j) {
          if (s[j] == kNegInf) continue;
          const double weight = std::exp(s[j] - max) / sum;
          const double* vj = v.data() + at.kv(b, j, h);
          for (std::int64_t d = 0; d < p.head_dim; ++d) oi[d] += weight * vj[d];
        }
        out.lse[at.lse(b, h, i)] = max + std::log(sum);
      }
  return out;
}

AttentionGrads attention_backward(std::span<const double> q, std::span<const double> k, std::span<const double> v,
                                  std::span<const double> o, std::span<const double> dout,
                                  std::span<const double> lse, const AttentionParams& p) {
  constexpr const char* where = "ref::attention_backward";
  check_inputs(q, k, v, p, where);
  check_size(o, static_cast<std::int64_t>(q.size()), where, "o");
  check_size(dout, static_cast<std::int64_t>(q.size()), where, "dout");
  check_size(lse, p.batch * p.heads_q * p.seqlen_q, where, "lse");
  const Index at{p};
  AttentionGrads g{std::vector<double>(q.size(), 0.0), std::vector<double>(k.size(), 0.0),
                   std::vector<double>(v.size(), 0.0)};
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t h = 0; h < p.heads_q; ++h)
      for (std::int64_t i = 0; i < p.seqlen_q; ++i) {
        const double row_lse = lse[at.lse(b, h, i)];
        if (row_lse == kNegInf) continue;  // no visible key, so no gradient flows through this row
        const double* qi = q.data() + at.q(b, i, h);
        const double* doi = dout.data() + at.q(b, i, h);
        double* dqi = g.dq.data() + at.q(b, i, h);
        // sum_j P_ij dP_ij equals dout_i . o_i, since o_i = sum_j P_ij v_j.
        const double row_dot = dot(doi, o.data() + at.q(b, i, h), p.head_dim);
        for (std::int64_t j = 0; j < p.seqlen_k; ++j) {
          if (!attention_visible(p, i, j)) continue;
          const std::int64_t kv = at.kv(b, j, h);
          const double s = score(qi, k.data() + kv, p);
          const double prob = std::exp(s - row_lse);
          const double dprob = dot(doi, v.data() + kv, p.head_dim);
          double ds = prob * (dprob - row_dot);
          // d/du [c tanh(u / c)] = 1 - tanh^2(u / c) = 1 - (s / c)^2.
          if (p.softcap > 0.0) ds *= 1.0 - (s / p.softcap) * (s / p.softcap);
          for (std::int64_t d = 0; d < p.head_dim; ++d) {
            g.dv[kv + d] += prob * doi[d];
            dqi[d] += p.scale * ds * k[kv + d];
            g.dk[kv + d] += p.scale * ds * qi[d];
          }
        }
      }
  return g;
}

}  // namespace ignis::ref
