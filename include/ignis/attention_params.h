#pragma once
// The options of every ignis attention op (shapes come from the tensors).
#include <cstdint>

namespace ignis {

// Masks are aligned to the bottom-right corner: with d = seqlen_k - seqlen_q, key j is visible to
// query i when j <= i + d (causal) and i + d - window_left <= j <= i + d + window_right.
// A row with no visible key outputs o = 0 and lse = -inf.
struct AttentionParams {
  // Multiplies q.k; 0 means 1 / sqrt(head_dim).
  double scale = 0.0;
  bool causal = false;
  // Sliding window sides in keys; -1 is unlimited.
  std::int64_t window_left = -1;
  std::int64_t window_right = -1;
  // Scores become softcap * tanh(score / softcap) when softcap > 0; 0 turns it off.
  double softcap = 0.0;
};

}  // namespace ignis
