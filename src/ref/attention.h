#pragma once
// Reference scaled dot-product attention, forward and backward: plain loops in double precision.
// Layout (as flash_attn_func): q, o, dq: [batch, seqlen_q, heads_q, head_dim];
// k, v, dk, dv: [batch, seqlen_k, heads_kv, head_dim]; lse: [batch, heads_q, seqlen_q].
// Grouped-query attention: query head h reads kv head h / (heads_q / heads_kv).
#include <cstdint>
#include <span>
#include <vector>

namespace ignis::ref {

// Masks are aligned to the bottom-right corner: with d = seqlen_k - seqlen_q, key j is visible to
// query i when j <= i + d (causal) and i + d - window_left <= j <= i + d + window_right (a window
// side of -1 is unlimited). Scores are s = scale * q.k, then s = softcap * tanh(s / softcap) when
// softcap > 0.
struct AttentionParams {
  std::int64_t batch = 1;
  std::int64_t heads_q = 1;
  std::int64_t heads_kv = 1;
  std::int64_t seqlen_q = 1;
  std::int64_t seqlen_k = 1;
  std::int64_t head_dim = 1;
  double scale = 1.0;
  bool causal = false;
  std::int64_t window_left = -1;
  std::int64_t window_right = -1;
  double softcap = 0.0;
};

// Throws ignis::Error unless sizes are positive, heads_q % heads_kv == 0, windows are >= -1 and
// softcap >= 0.
void validate_attention(const AttentionParams& p, const char* where);

// Whether key j is visible to query row i under p's causal flag and window.
bool attention_visible(const AttentionParams& p, std::int64_t i, std::int64_t j);

struct AttentionForward {
  std::vector<double> o;    // [batch, seqlen_q, heads_q, head_dim]
  std::vector<double> lse;  // [batch, heads_q, seqlen_q], natural log; -inf for a row with no visible key
};

// A row with no visible key gets o = 0 and lse = -inf.
AttentionForward attention_forward(std::span<const double> q, std::span<const double> k, std::span<const double> v,
                                   const AttentionParams& p);

struct AttentionGrads {
  std::vector<double> dq;  // like q
  std::vector<double> dk;  // like k, summed over the query heads of each group
  std::vector<double> dv;  // like v, summed over the query heads of each group
};

// Gradients of sum(dout * o) given the forward's o and lse. dout: like q.
AttentionGrads attention_backward(std::span<const double> q, std::span<const double> k, std::span<const double> v,
                                  std::span<const double> o, std::span<const double> dout,
                                  std::span<const double> lse, const AttentionParams& p);

}  // namespace ignis::ref
