// ignis.rope, ignis.rope_backward, and the inverse frequencies of each scaling scheme.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string_view.h>

#include <algorithm>
#include <string_view>

#include "common.h"
#include "ignis/error.h"
#include "ignis/ops/rope.h"

namespace ignis::python {
namespace {

using OptStream = std::optional<std::uintptr_t>;

RopeScaling scaling_arg(std::string_view kind, double factor, double low_freq_factor, double high_freq_factor,
                        std::int64_t original_max_position_embeddings, double beta_fast, double beta_slow,
                        const char* op) {
  RopeScaling scaling;
  if (kind == "none") scaling.kind = RopeScalingKind::none;
  else if (kind == "linear") scaling.kind = RopeScalingKind::linear;
  else if (kind == "ntk") scaling.kind = RopeScalingKind::ntk;
  else if (kind == "llama3") scaling.kind = RopeScalingKind::llama3;
  else if (kind == "yarn") scaling.kind = RopeScalingKind::yarn;
  else fail_expected(op, "scaling", R"("none", "linear", "ntk", "llama3" or "yarn")", detail::concat('"', kind, '"'));
  scaling.factor = factor;
  scaling.low_freq_factor = low_freq_factor;
  scaling.high_freq_factor = high_freq_factor;
  scaling.original_max_position_embeddings = original_max_position_embeddings;
  scaling.beta_fast = beta_fast;
  scaling.beta_slow = beta_slow;
  return scaling;
}

nb::object rope_inv_freq(std::int64_t rotary_dim, double theta, std::string_view kind, double factor,
                         double low_freq_factor, double high_freq_factor, std::int64_t original_max_position_embeddings,
                         double beta_fast, double beta_slow) {
  const RopeScaling scaling = scaling_arg(kind, factor, low_freq_factor, high_freq_factor,
                                          original_max_position_embeddings, beta_fast, beta_slow, "rope_inv_freq");
  const std::vector<float> values = ignis::rope_inv_freq(rotary_dim, theta, scaling);
  const Array out = empty_numpy({static_cast<std::int64_t>(values.size())}, DType::f32);
  std::copy(values.begin(), values.end(), out.tensor.data_as<float>());
  return out.object;
}

float rope_attention_factor(std::string_view kind, double factor) {
  return ignis::rope_attention_factor(scaling_arg(kind, factor, 1.0, 4.0, 8192, 32.0, 1.0, "rope_attention_factor"));
}

// y = R(sign * t) x, for rope (sign 1) and rope_backward (the same rotation by -t).
nb::object rotate(bool backward, nb::handle x_arg, nb::handle inv_freq_arg, std::optional<std::int64_t> rotary_dim,
                  bool interleaved, std::int64_t position_offset, nb::handle batch_offsets_arg,
                  float attention_factor, OptStream stream) {
  const char* op = backward ? "rope_backward" : "rope";
  const char* x_name = backward ? "dy" : "x";
  const Array x = array_arg(x_arg, op, x_name), inv_freq = array_arg(inv_freq_arg, op, "inv_freq");
  const std::optional<Array> offsets = optional_array_arg(batch_offsets_arg, op, "batch_offsets");
  RopeArgs args;
  args.rotary_dim = rotary_dim.value_or(2 * extent(inv_freq.tensor, 0));
  args.style = interleaved ? RopeStyle::interleaved : RopeStyle::rotate_half;
  args.position_offset = position_offset;
  if (offsets) args.batch_offsets = offsets->tensor;
  args.attention_factor = attention_factor;
  const Array y = empty_like(x, x.tensor.shape(), x.tensor.dtype(), op, "dtype");
  run_op(x, stream, [&](Stream s) {
    CpuF32Staging f32(rope_supported(x.tensor.device(), x.tensor.dtype()), {x.tensor, y.tensor});
    (backward ? rope_backward : rope_forward)(f32.in(x.tensor), inv_freq.tensor, f32.out(y.tensor), args, s);
    f32.finish();
  });
  return y.object;
}

}  // namespace

void bind_rope(nb::module_& m) {
  m.def("rope_inv_freq", &rope_inv_freq, nb::arg("rotary_dim"), nb::arg("theta") = 10000.0, nb::kw_only(),
        nb::arg("scaling") = "none", nb::arg("factor") = 1.0, nb::arg("low_freq_factor") = 1.0,
        nb::arg("high_freq_factor") = 4.0, nb::arg("original_max_position_embeddings") = 8192,
        nb::arg("beta_fast") = 32.0, nb::arg("beta_slow") = 1.0,
        "Inverse frequencies [rotary_dim / 2] as a float32 numpy array: theta^(-2i/rotary_dim), rescaled by\n"
        "`scaling` (\"none\", \"linear\", \"ntk\", \"llama3\", \"yarn\"; see ignis/ops/rope.h).");
  m.def("rope_attention_factor", &rope_attention_factor, nb::arg("scaling") = "none", nb::arg("factor") = 1.0,
        "The factor cos and sin are multiplied by: 0.1 ln(factor) + 1 for yarn with factor > 1, else 1.");
  m.def(
      "rope",
      [](nb::handle x, nb::handle inv_freq, std::optional<std::int64_t> rotary_dim, bool interleaved,
         std::int64_t position_offset, nb::handle batch_offsets, float attention_factor, OptStream s) {
        return rotate(false, x, inv_freq, rotary_dim, interleaved, position_offset, batch_offsets, attention_factor, s);
      },
      nb::arg("x"), nb::arg("inv_freq"), nb::arg("rotary_dim") = nb::none(), nb::arg("interleaved") = false,
      nb::arg("position_offset") = 0, nb::arg("batch_offsets") = nb::none(), nb::arg("attention_factor") = 1.0f,
      nb::kw_only(), nb::arg("stream") = nb::none(),
      "Rotary position embedding: pair (a, b) at angle t = position * inv_freq[i] becomes\n"
      "f * (a cos t - b sin t, b cos t + a sin t), f = attention_factor.\n"
      "x: [batch, seqlen, heads, head_dim]; inv_freq: [rotary_dim / 2] float32 on x's device (rope_inv_freq);\n"
      "rotary_dim defaults to 2 * len(inv_freq), dims past it pass through. interleaved: pairs (2i, 2i+1)\n"
      "(GPT-J) instead of (i, i + rotary_dim/2) (rotate-half, HF Llama). Token s of sequence b is at\n"
      "position position_offset + batch_offsets[b] + s; batch_offsets: [batch] int32 or None.");
  m.def(
      "rope_backward",
      [](nb::handle dy, nb::handle inv_freq, std::optional<std::int64_t> rotary_dim, bool interleaved,
         std::int64_t position_offset, nb::handle batch_offsets, float attention_factor, OptStream s) {
        return rotate(true, dy, inv_freq, rotary_dim, interleaved, position_offset, batch_offsets, attention_factor, s);
      },
      nb::arg("dy"), nb::arg("inv_freq"), nb::arg("rotary_dim") = nb::none(), nb::arg("interleaved") = false,
      nb::arg("position_offset") = 0, nb::arg("batch_offsets") = nb::none(), nb::arg("attention_factor") = 1.0f,
      nb::kw_only(), nb::arg("stream") = nb::none(),
      "The gradient of rope: the same rotation by -t (its transpose); arguments as rope's, dy in x's layout.");
}

}  // namespace ignis::python
