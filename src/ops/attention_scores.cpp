// Dispatchers of attention_scores and the unfused attention pipeline: validate the
// flash_attn_func layout and the GQA head counts, then launch the CUDA implementation.
#include "ignis/ops.h"

#if IGNIS_WITH_CUDA
#include "cuda/ops/attention_scores.h"
#endif

namespace ignis {

bool attention_scores_supported(Device device, DType dtype) {
  return IGNIS_WITH_CUDA && device.is_cuda() && is_floating(dtype);
}

bool attention_unfused_supported(Device device, DType dtype) {
  // The softmax stage has no f64 kernel.
  return attention_scores_supported(device, dtype) && dtype != DType::f64;
}

namespace {

// t: `shape`, with like's dtype and device, contiguous.
void check_like(const Tensor& t, const Tensor& like, const Shape& shape, const char* where, const char* name) {
  check_dim(t, static_cast<int>(shape.size()), where, name);
  check_contiguous(t, where, name);
  check_dtype(t, like.dtype(), where, name);
  check_device(t, like.device(), where, name);
  check_shape(t, shape, where, name);
}

// Checks q [batch, seqlen_q, heads_q, head_dim] and k [batch, seqlen_k, heads_kv, head_dim].
void check_qk(const Tensor& q, const Tensor& k, const char* where) {
  check_dim(q, 4, where, "q");
  check_contiguous(q, where, "q");
  check_dim(k, 4, where, "k");
  check_like(k, q, {q.size(0), k.size(1), k.size(2), q.size(3)}, where, "k");
  check_arg(k.size(2) > 0 && q.size(2) % k.size(2) == 0, where, "k.shape[2] (heads_kv)",
            detail::lazy_concat("a divisor of heads_q = ", q.size(2)), k.size(2));
}

}  // namespace

void attention_scores(const Tensor& q, const Tensor& k, const Tensor& s, const AttentionScoresParams& params,
                      [[maybe_unused]] Stream stream) {
  constexpr const char* where = "attention_scores";
  check_qk(q, k, where);
  check_like(s, q, {q.size(0), q.size(2), q.size(1), k.size(1)}, where, "s");
  check_arg(attention_scores_supported(q.device(), q.dtype()), where, detail::lazy_concat("dtype on ", q.device()),
            "cuda with f64, f32, f16 or bf16", q.dtype());
#if IGNIS_WITH_CUDA
  cuda::attention_scores(q, k, s, params, stream);
#endif
}

void attention_unfused_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                               const AttentionScoresParams& params, [[maybe_unused]] Stream stream) {
  constexpr const char* where = "attention_unfused_forward";
  check_qk(q, k, where);
  check_like(v, q, k.shape(), where, "v");
  check_like(o, q, q.shape(), where, "o");
  check_arg(attention_unfused_supported(q.device(), q.dtype()), where, detail::lazy_concat("dtype on ", q.device()),
            "cuda with f32, f16 or bf16", q.dtype());
#if IGNIS_WITH_CUDA
  cuda::attention_unfused_forward(q, k, v, o, params, stream);
#endif
}

}  // namespace ignis
