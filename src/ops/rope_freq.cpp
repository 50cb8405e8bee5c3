// Inverse frequencies of every RoPE scaling scheme (formulas in ignis/ops/rope.h). Each scheme
// is a map from the unscaled frequency of pair i to its scaled one, evaluated in double and
// rounded to fp32 once, so the kernels and the fp64 reference see the same values.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "ignis/ops/rope.h"

namespace ignis {

namespace {

constexpr const char* kWhere = "rope_inv_freq";

void validate(std::int64_t rotary_dim, double theta, const RopeScaling& s) {
  check_arg(rotary_dim > 0 && rotary_dim % 2 == 0, kWhere, "rotary_dim", "positive and even", rotary_dim);
  check_arg(theta > 0.0, kWhere, "theta", "> 0", theta);
  if (s.kind == RopeScalingKind::none) return;
  check_arg(s.factor > 0.0, kWhere, "scaling.factor", "> 0", s.factor);
  if (s.kind == RopeScalingKind::ntk)
    check_arg(rotary_dim > 2, kWhere, "rotary_dim (ntk)", "> 2", rotary_dim);
  if (s.kind == RopeScalingKind::llama3 || s.kind == RopeScalingKind::yarn)
    check_arg(s.original_max_position_embeddings > 0, kWhere, "scaling.original_max_position_embeddings", "> 0",
              s.original_max_position_embeddings);
  if (s.kind == RopeScalingKind::llama3) {
    check_arg(s.low_freq_factor > 0.0, kWhere, "scaling.low_freq_factor", "> 0", s.low_freq_factor);
    check_arg(s.high_freq_factor > s.low_freq_factor, kWhere, "scaling.high_freq_factor",
              detail::lazy_concat("> low_freq_factor (", s.low_freq_factor, ")"), s.high_freq_factor);
  }
  if (s.kind == RopeScalingKind::yarn) {
    check_arg(theta > 1.0, kWhere, "theta (yarn)", "> 1", theta);
    check_arg(s.beta_fast > s.beta_slow && s.beta_slow > 0.0, kWhere, "scaling.beta_fast, beta_slow",
              "beta_fast > beta_slow > 0", detail::lazy_concat(s.beta_fast, ", ", s.beta_slow));
  }
}

// Llama 3.1: keep short wavelengths, divide long ones by factor, blend in between.
double llama3_freq(double freq, const RopeScaling& s) {
  const double context = static_cast<double>(s.original_max_position_embeddings);
  const double turns = context * freq / (2.0 * std::numbers::pi);  // = context / wavelength
  if (turns > s.high_freq_factor) return freq;
  if (turns < s.low_freq_factor) return freq / s.factor;
  const double blend = (turns - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  return freq * (blend + (1.0 - blend) / s.factor);
}

// YaRN's pair index that makes `turns` full rotations over the original context.
double yarn_pair_for_turns(double turns, std::int64_t rotary_dim, double theta, const RopeScaling& s) {
  const double context = static_cast<double>(s.original_max_position_embeddings);
  return static_cast<double>(rotary_dim) * std::log(context / (2.0 * std::numbers::pi * turns)) /
         (2.0 * std::log(theta));
}

}  // namespace

std::vector<float> rope_inv_freq(std::int64_t rotary_dim, double theta, const RopeScaling& scaling) {
  validate(rotary_dim, theta, scaling);
  const std::int64_t pairs = rotary_dim / 2;
  const double d = static_cast<double>(rotary_dim);
  double base = theta;
  if (scaling.kind == RopeScalingKind::ntk) base = theta * std::pow(scaling.factor, d / (d - 2.0));

  double ramp_lo = 0.0, ramp_hi = 1.0;
  if (scaling.kind == RopeScalingKind::yarn) {
    ramp_lo = std::max(std::floor(yarn_pair_for_turns(scaling.beta_fast, rotary_dim, theta, scaling)), 0.0);
    ramp_hi = std::min(std::ceil(yarn_pair_for_turns(scaling.beta_slow, rotary_dim, theta, scaling)), d - 1.0);
    if (ramp_hi == ramp_lo) ramp_hi += 0.001;
  }

  std::vector<float> out(static_cast<std::size_t>(pairs));
  for (std::int64_t i = 0; i < pairs; ++i) {
    const double freq = std::pow(base, -2.0 * static_cast<double>(i) / d);
    double scaled = freq;
    switch (scaling.kind) {
      case RopeScalingKind::none:
      case RopeScalingKind::ntk: break;
      case RopeScalingKind::linear: scaled = freq / scaling.factor; break;
      case RopeScalingKind::llama3: scaled = llama3_freq(freq, scaling); break;
      case RopeScalingKind::yarn: {
        // 0 keeps the frequency (many turns over the context), 1 interpolates it fully.
        const double w = std::clamp((static_cast<double>(i) - ramp_lo) / (ramp_hi - ramp_lo), 0.0, 1.0);
        scaled = freq * (1.0 - w + w / scaling.factor);
        break;
      }
    }
    out[static_cast<std::size_t>(i)] = static_cast<float>(scaled);
  }
  return out;
}

float rope_attention_factor(const RopeScaling& scaling) {
  if (scaling.kind != RopeScalingKind::yarn || scaling.factor <= 1.0) return 1.0f;
  return static_cast<float>(0.1 * std::log(scaling.factor) + 1.0);
}

}  // namespace ignis
