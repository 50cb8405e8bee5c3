#include "ref/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace ignis::ref {

namespace {

// theta^(-2i/d) for every pair i.
std::vector<double> unscaled(std::int64_t d, double theta) {
  std::vector<double> f(d / 2);
  for (std::int64_t i = 0; i < d / 2; ++i) f[i] = 1.0 / std::pow(theta, 2.0 * i / d);
  return f;
}

std::vector<double> llama3(std::vector<double> f, const RopeScaling& s) {
  const double old_len = static_cast<double>(s.original_max_position_embeddings);
  const double low_freq_wavelen = old_len / s.low_freq_factor;
  const double high_freq_wavelen = old_len / s.high_freq_factor;
  for (double& freq : f) {
    const double wavelen = 2.0 * std::numbers::pi / freq;
    if (wavelen < high_freq_wavelen) continue;
    if (wavelen > low_freq_wavelen) {
      freq = freq / s.factor;
      continue;
    }
    const double smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
    freq = (1.0 - smooth) * freq / s.factor + smooth * freq;
  }
  return f;
}

std::vector<double> yarn(std::vector<double> f, std::int64_t d, double theta, const RopeScaling& s) {
  const double len = static_cast<double>(s.original_max_position_embeddings);
  auto correction_dim = [&](double turns) {
    return d * std::log(len / (turns * 2.0 * std::numbers::pi)) / (2.0 * std::log(theta));
  };
  const double low = std::max(std::floor(correction_dim(s.beta_fast)), 0.0);
  double high = std::min(std::ceil(correction_dim(s.beta_slow)), static_cast<double>(d - 1));
  if (high == low) high += 0.001;
  for (std::size_t i = 0; i < f.size(); ++i) {
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    f[i] = f[i] * (1.0 - ramp) + f[i] / s.factor * ramp;
  }
  return f;
}

}  // namespace

std::vector<double> rope_inv_freq(std::int64_t rotary_dim, double theta, const RopeScaling& scaling) {
  switch (scaling.kind) {
    case RopeScalingKind::none: return unscaled(rotary_dim, theta);
    case RopeScalingKind::linear: {
      auto f = unscaled(rotary_dim, theta);
      for (double& v : f) v /= scaling.factor;
      return f;
    }
    case RopeScalingKind::ntk: {
      const double d = static_cast<double>(rotary_dim);
      return unscaled(rotary_dim, theta * std::pow(scaling.factor, d / (d - 2.0)));
    }
    case RopeScalingKind::llama3: return llama3(unscaled(rotary_dim, theta), scaling);
    case RopeScalingKind::yarn: return yarn(unscaled(rotary_dim, theta), rotary_dim, theta, scaling);
  }
  return {};
}

double rope_attention_factor(const RopeScaling& scaling) {
  if (scaling.kind != RopeScalingKind::yarn || scaling.factor <= 1.0) return 1.0;
  return 0.1 * std::log(scaling.factor) + 1.0;
}

std::vector<double> rope_apply(std::span<const double> x, std::span<const double> inv_freq, const RopeDims& dims,
                               std::span<const std::int64_t> start, double attention_factor, int sign) {
  std::vector<double> y(x.begin(), x.end());
  const std::int64_t pairs = dims.rotary_dim / 2;
  for (std::int64_t b = 0; b < dims.batch; ++b)
    for (std::int64_t s = 0; s < dims.seqlen; ++s)
      for (std::int64_t h = 0; h < dims.heads; ++h) {
        const std::int64_t row = ((b * dims.seqlen + s) * dims.heads + h) * dims.head_dim;
        for (std::int64_t i = 0; i < pairs; ++i) {
          const double t = static_cast<double>(start[b] + s) * inv_freq[i];
          const double c = attention_factor * std::cos(t);
          const double sn = attention_factor * std::sin(t) * sign;
          const std::int64_t ia = dims.interleaved ? row + 2 * i : row + i;
          const std::int64_t ib = dims.interleaved ? row + 2 * i + 1 : row + i + pairs;
          y[ia] = x[ia] * c - x[ib] * sn;
          y[ib] = x[ib] * c + x[ia] * sn;
        }
      }
  return y;
}

}  // namespace ignis::ref
