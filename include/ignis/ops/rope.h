#pragma once
// Rotary position embedding (RoPE): the inverse frequencies of every scaling scheme the engine's
// models use, computed on the host, and the rotation applied to q/k (forward) or to their
// gradients (backward).
#include <cstdint>
#include <optional>
#include <vector>

#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis {

// ---- Inverse frequencies -------------------------------------------------------------------
// With d = rotary_dim and i in [0, d/2), the unscaled frequencies are
//   inv_freq[i] = theta^(-2i/d)
// and pair i of a token at position p is rotated by the angle p * inv_freq[i].
// Wavelength of pair i: 2*pi / inv_freq[i] (positions per full turn).
enum class RopeScalingKind {
  none,
  // Positions divided by `factor`: inv_freq[i] = theta^(-2i/d) / factor.
  linear,
  // NTK-aware: the base is stretched so the lowest frequency is divided by `factor` while the
  // highest stays: inv_freq[i] = (theta * factor^(d/(d-2)))^(-2i/d). Needs d > 2.
  ntk,
  // Llama 3.1: with lo = original_max_position_embeddings / low_freq_factor and
  // hi = original_max_position_embeddings / high_freq_factor (wavelengths, lo > hi):
  //   wavelength < hi  -> inv_freq unchanged (high frequencies carry local order)
  //   wavelength > lo  -> inv_freq / factor
  //   otherwise        -> (1 - s) * inv_freq / factor + s * inv_freq,
  //                       s = (original_max_position_embeddings / wavelength - low_freq_factor)
  //                           / (high_freq_factor - low_freq_factor)
  llama3,
  // YaRN: pair i is interpolated (inv_freq / factor) or left as is by how many turns it makes
  // over the original context. The pair index that turns r times over L = original_max_position_embeddings
  // is c(r) = d * ln(L / (2*pi*r)) / (2 * ln theta); with low = max(floor(c(beta_fast)), 0) and
  // high = min(ceil(c(beta_slow)), d - 1) (high += 0.001 when equal, to avoid 0/0):
  //   ramp(i) = clamp((i - low) / (high - low), 0, 1)
  //   inv_freq[i] = theta^(-2i/d) * (1 - ramp(i)) + theta^(-2i/d) / factor * ramp(i)
  // and cos/sin are multiplied by the attention factor 0.1 * ln(factor) + 1 (1 when factor <= 1),
  // see rope_attention_factor.
  yarn,
};

struct RopeScaling {
  RopeScalingKind kind = RopeScalingKind::none;
  double factor = 1.0;                                   // linear, ntk, llama3, yarn
  double low_freq_factor = 1.0;                          // llama3
  double high_freq_factor = 4.0;                         // llama3; must exceed low_freq_factor
  std::int64_t original_max_position_embeddings = 8192;  // llama3, yarn
  double beta_fast = 32.0;                               // yarn
  double beta_slow = 1.0;                                // yarn
};

// inv_freq: [rotary_dim / 2], fp32 (the kernels take it as a tensor, so any scaling works
// unchanged). Computed in double and rounded once. Throws ignis::Error on an odd or
// non-positive rotary_dim, theta <= 0 (<= 1 for yarn), factor <= 0 or inconsistent llama3/yarn
// parameters.
std::vector<float> rope_inv_freq(std::int64_t rotary_dim, double theta, const RopeScaling& scaling = {});
// The factor cos and sin are multiplied by: 0.1 * ln(factor) + 1 for yarn with factor > 1, else 1.
float rope_attention_factor(const RopeScaling& scaling);

// ---- Applying the rotation -----------------------------------------------------------------
enum class RopeStyle {
  // HF/Llama/Qwen: pair i is (x[i], x[i + rotary_dim/2]).
  rotate_half,
  // GPT-J and GGUF Llama weights: pair i is (x[2i], x[2i+1]).
  interleaved,
};

struct RopeArgs {
  std::int64_t rotary_dim = 0;  // even, in (0, head_dim]; dims past it pass through unchanged
  RopeStyle style = RopeStyle::rotate_half;
  // Token s of sequence b is at position position_offset + batch_offsets[b] + s.
  std::int64_t position_offset = 0;  // >= 0
  // Optional [batch] i32 on x's device: the start of each sequence when a batch decodes
  // sequences of different lengths.
  std::optional<Tensor> batch_offsets;
  float attention_factor = 1.0f;  // multiplies cos and sin (rope_attention_factor for yarn)
};

// f32 on the CPU; f32, f16, bf16 on CUDA. Math in fp32 with the angle range-reduced in double,
// so positions up to ~1e6 keep fp32 accuracy.
bool rope_supported(Device device, DType dtype);
// Pair (a, b) at angle t becomes f * (a cos t - b sin t, b cos t + a sin t), f = attention_factor.
// x, y: [batch, seqlen, heads, head_dim] contiguous, same dtype and device; y may be x itself.
// inv_freq: [rotary_dim / 2] f32, contiguous, on x's device.
void rope_forward(const Tensor& x, const Tensor& inv_freq, const Tensor& y, const RopeArgs& args,
                  Stream stream = {});
// The transpose of rope_forward (the same rotation by -t, same factor f): dx = f * R(-t) dy.
// dy, dx: [batch, seqlen, heads, head_dim]; inv_freq: [rotary_dim / 2].
void rope_backward(const Tensor& dy, const Tensor& inv_freq, const Tensor& dx, const RopeArgs& args,
                   Stream stream = {});

}  // namespace ignis
