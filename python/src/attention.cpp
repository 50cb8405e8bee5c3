// ignis.attention, ignis.attention_backward, ignis.attention_naive, ignis.attention_unfused and
// ignis.attention_scores, in flash_attn_func's layout: q [batch, seqlen_q, heads_q, head_dim], k and v
// [batch, seqlen_k, heads_kv, head_dim].
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>

#include <cmath>
#include <utility>

#include "common.h"
#include "ignis/ops/attention.h"
#include "ignis/ops/attention_scores.h"
#include "ignis/ops/flash_attention.h"

namespace ignis::python {
namespace {

using OptStream = std::optional<std::uintptr_t>;

// softmax_scale, defaulting to 1 / sqrt(head_dim) as flash_attn does.
double scale_or_default(std::optional<double> softmax_scale, const Array& q) {
  const std::int64_t head_dim = extent(q.tensor, 3);
  return softmax_scale.value_or(head_dim > 0 ? 1.0 / std::sqrt(static_cast<double>(head_dim)) : 1.0);
}

AttentionParams params_of(const Array& q, bool causal, std::optional<double> softmax_scale,
                          std::pair<std::int64_t, std::int64_t> window, double softcap) {
  AttentionParams params;
  params.scale = scale_or_default(softmax_scale, q);
  params.causal = causal;
  params.window_left = window.first;
  params.window_right = window.second;
  params.softcap = softcap;
  return params;
}

// o and lse of one attention call named `op` in errors: the fused kernel where `fused` and it runs on
// q's device and dtype (its errors name unsupported head dims), else the naive one.
std::pair<Array, Array> attention_with_lse(const char* op, bool fused, nb::handle q_arg, nb::handle k_arg,
                                           nb::handle v_arg, bool causal, std::optional<double> softmax_scale,
                                           std::pair<std::int64_t, std::int64_t> window, double softcap,
                                           std::int64_t num_splits, OptStream stream) {
  const Array q = array_arg(q_arg, op, "q"), k = array_arg(k_arg, op, "k"), v = array_arg(v_arg, op, "v");
  const Tensor& qt = q.tensor;
  Array o = empty_like(q, qt.shape(), qt.dtype(), op, "q.dtype");
  Array lse = empty_like(q, {extent(qt, 0), extent(qt, 2), extent(qt, 1)}, attention_lse_dtype(qt.dtype()), op,
                         "lse");
  const AttentionParams params = params_of(q, causal, softmax_scale, window, softcap);
  const bool flash = fused && flash_attention_supported(qt.device(), qt.dtype());
  run_op(q, stream, [&](Stream s) {
    if (flash)
      flash_attention_forward(qt, k.tensor, v.tensor, o.tensor, lse.tensor, params, num_splits, s);
    else
      attention_naive_forward(qt, k.tensor, v.tensor, o.tensor, lse.tensor, params, s);
  });
  return {std::move(o), std::move(lse)};
}

nb::tuple attention_naive(nb::handle q_arg, nb::handle k_arg, nb::handle v_arg, bool causal,
                          std::optional<double> softmax_scale, std::pair<std::int64_t, std::int64_t> window,
                          double softcap, OptStream stream) {
  const auto [o, lse] = attention_with_lse("attention_naive", false, q_arg, k_arg, v_arg, causal, softmax_scale, window,
                                           softcap, /*num_splits=*/0, stream);
  return nb::make_tuple(o.object, lse.object);
}

// The fused kernel for bf16/f16 on CUDA, the naive one otherwise (f32/f64).
nb::object attention(nb::handle q_arg, nb::handle k_arg, nb::handle v_arg, bool causal,
                     std::optional<double> softmax_scale, std::pair<std::int64_t, std::int64_t> window, double softcap,
                     bool return_lse, std::int64_t num_splits, OptStream stream) {
  // Checked here as well, so that the naive kernels' inputs (which do not split) get the same answer.
  check_arg(num_splits >= 0 && num_splits <= kFlashAttentionMaxSplits, "attention", "num_splits", "0 (automatic) to 64",
            num_splits);
  const auto [o, lse] = attention_with_lse("attention", true, q_arg, k_arg, v_arg, causal, softmax_scale, window,
                                           softcap, num_splits, stream);
  if (return_lse) return nb::make_tuple(o.object, lse.object);
  return o.object;
}

nb::object attention_unfused(nb::handle q_arg, nb::handle k_arg, nb::handle v_arg, bool causal,
                             std::optional<double> softmax_scale, OptStream stream) {
  constexpr const char* op = "attention_unfused";
  const Array q = array_arg(q_arg, op, "q"), k = array_arg(k_arg, op, "k"), v = array_arg(v_arg, op, "v");
  const Array o = empty_like(q, q.tensor.shape(), q.tensor.dtype(), op, "q.dtype");
  const AttentionScoresParams params{scale_or_default(softmax_scale, q), causal};
  run_op(q, stream, [&](Stream s) { attention_unfused_forward(q.tensor, k.tensor, v.tensor, o.tensor, params, s); });
  return o.object;
}

nb::object scores(nb::handle q_arg, nb::handle k_arg, bool causal, std::optional<double> softmax_scale,
                  OptStream stream) {
  constexpr const char* op = "attention_scores";
  const Array q = array_arg(q_arg, op, "q"), k = array_arg(k_arg, op, "k");
  const Tensor& qt = q.tensor;
  const Shape shape{extent(qt, 0), extent(qt, 2), extent(qt, 1), extent(k.tensor, 1)};
  const Array s_out = empty_like(q, shape, qt.dtype(), op, "q.dtype");
  const AttentionScoresParams params{scale_or_default(softmax_scale, q), causal};
  run_op(q, stream, [&](Stream s) { attention_scores(qt, k.tensor, s_out.tensor, params, s); });
  return s_out.object;
}

// (dq, dk, dv), each of its input's kind: the fused kernel's backward for bf16/f16 on CUDA, the naive one
// otherwise (f32 on the CPU; its errors name what other devices and dtypes take).
nb::tuple attention_backward(nb::handle dout_arg, nb::handle q_arg, nb::handle k_arg, nb::handle v_arg,
                             nb::handle o_arg, nb::handle lse_arg, bool causal, std::optional<double> softmax_scale,
                             std::pair<std::int64_t, std::int64_t> window, double softcap, OptStream stream) {
  constexpr const char* op = "attention_backward";
  const Array dout = array_arg(dout_arg, op, "dout"), q = array_arg(q_arg, op, "q"), k = array_arg(k_arg, op, "k"),
              v = array_arg(v_arg, op, "v"), o = array_arg(o_arg, op, "o"), lse = array_arg(lse_arg, op, "lse");
  const Tensor& qt = q.tensor;
  const Array dq = empty_like(q, qt.shape(), qt.dtype(), op, "q.dtype");
  const Array dk = empty_like(k, k.tensor.shape(), qt.dtype(), op, "q.dtype");
  const Array dv = empty_like(v, v.tensor.shape(), qt.dtype(), op, "q.dtype");
  const AttentionParams params = params_of(q, causal, softmax_scale, window, softcap);
  const bool flash = flash_attention_supported(qt.device(), qt.dtype());
  run_op(q, stream, [&](Stream s) {
    if (flash)
      flash_attention_backward(dout.tensor, qt, k.tensor, v.tensor, o.tensor, lse.tensor, dq.tensor, dk.tensor,
                               dv.tensor, params, s);
    else
      attention_naive_backward(dout.tensor, qt, k.tensor, v.tensor, o.tensor, lse.tensor, dq.tensor, dk.tensor,
                               dv.tensor, params, s);
  });
  return nb::make_tuple(dq.object, dk.object, dv.object);
}

}  // namespace

void bind_attention(nb::module_& m) {
  m.def("attention", &attention, nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("causal") = false,
        nb::arg("softmax_scale") = nb::none(), nb::arg("window") = std::pair<std::int64_t, std::int64_t>{-1, -1},
        nb::arg("softcap") = 0.0, nb::kw_only(), nb::arg("return_lse") = false, nb::arg("num_splits") = 0,
        nb::arg("stream") = nb::none(),
        "o (or (o, lse) with return_lse): softmax(scale * q k^T, masked) v, as flash_attn_func. CUDA bfloat16 and\n"
        "float16 with head_dim 64 or 128 run the fused tensor-core kernel; float32 and float64 the naive one (on the\n"
        "CPU, float32).\n"
        "num_splits (fused kernel only): 0 lets a grid too small to fill the GPU split each query tile's keys over\n"
        "several blocks, 1 never splits, 2-64 split that many ways.\n"
        "Shapes, masks, window, softcap and lse as attention_naive's (lse is float32 for bfloat16/float16).");
  m.def("attention_backward", &attention_backward, nb::arg("dout"), nb::arg("q"), nb::arg("k"), nb::arg("v"),
        nb::arg("o"), nb::arg("lse"), nb::arg("causal") = false, nb::arg("softmax_scale") = nb::none(),
        nb::arg("window") = std::pair<std::int64_t, std::int64_t>{-1, -1}, nb::arg("softcap") = 0.0, nb::kw_only(),
        nb::arg("stream") = nb::none(),
        "(dq, dk, dv): the gradients of sum(dout * o) for o, lse = attention(q, k, v, ..., return_lse=True) with the\n"
        "same options. CUDA bfloat16 and float16 (head_dim 64 or 128) run the fused tensor-core backward, whose dq\n"
        "is summed with float32 atomics (its rounding may differ from call to call); float32 on the CPU runs the\n"
        "naive one. dq is like q; dk and dv like k, summed over each group's query heads. P is recomputed from lse.");
  m.def("attention_naive", &attention_naive, nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("causal") = false,
        nb::arg("softmax_scale") = nb::none(), nb::arg("window") = std::pair<std::int64_t, std::int64_t>{-1, -1},
        nb::arg("softcap") = 0.0, nb::kw_only(), nb::arg("stream") = nb::none(),
        "(o, lse): softmax(scale * q k^T, masked) v, the naive reference kernel (CUDA float32 and float64, CPU\n"
        "float32).\n"
        "q: [batch, seqlen_q, heads_q, head_dim], k, v: [batch, seqlen_k, heads_kv, head_dim] with heads_q a\n"
        "multiple of heads_kv (GQA); o like q; lse: [batch, heads_q, seqlen_q] (natural log, float32; float64\n"
        "for float64). Masks are bottom-right aligned; window = (left, right) in keys, -1 unlimited;\n"
        "softcap > 0 maps scores to softcap * tanh(score / softcap). softmax_scale defaults to 1/sqrt(head_dim).\n"
        "A query with no visible key gives o = 0 and lse = -inf.");
  m.def("attention_unfused", &attention_unfused, nb::arg("q"), nb::arg("k"), nb::arg("v"),
        nb::arg("causal") = false, nb::arg("softmax_scale") = nb::none(), nb::kw_only(),
        nb::arg("stream") = nb::none(),
        "o = softmax(scale * q k^T, masked) v through memory (GEMM, mask, softmax, GEMM): the baseline of the\n"
        "fused kernels. CUDA float32, float16, bfloat16; shapes as attention_naive's.");
  m.def("attention_scores", &scores, nb::arg("q"), nb::arg("k"), nb::arg("causal") = false,
        nb::arg("softmax_scale") = nb::none(), nb::kw_only(), nb::arg("stream") = nb::none(),
        "s = scale * q k^T: [batch, heads_q, seqlen_q, seqlen_k], -inf where masked (CUDA, any float dtype).");
}

}  // namespace ignis::python
