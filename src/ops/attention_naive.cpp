// Naive attention dispatcher, forward and backward: validates shapes, dtypes, devices and params, resolves the
// default scale, then calls the CPU implementation (f32) or the CUDA kernel (f32, f64; forward only).
#include <cmath>
#include <string>
#include <utility>

#include "cpu/attention.h"
#include "ignis/ops.h"
#include "ops/attention_check.h"

#if IGNIS_WITH_CUDA
#include "cuda/ops/attention_naive.h"
#endif

namespace ignis {

DType attention_lse_dtype(DType dtype) { return dtype == DType::f64 ? DType::f64 : DType::f32; }

bool attention_naive_supported(Device device, DType dtype) {
  if (device.is_cpu()) return dtype == DType::f32;
  return IGNIS_WITH_CUDA && (dtype == DType::f32 || dtype == DType::f64);
}

bool attention_naive_backward_supported(Device device, DType dtype) {
  return device.is_cpu() && dtype == DType::f32;
}

namespace {

constexpr const char* kWhere = "attention_naive_forward";

// Checks what both entry points share; k stands for k_cache in the cached one.
// q, o: [batch, seqlen_q, heads_q, head_dim]; k, v: [batch, seqlen_k, heads_kv, head_dim].
void check_common(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const AttentionParams& params,
                  const char* where = kWhere) {
  check_attention_shapes(q, k, where);
  const std::int64_t batch = q.size(0), head_dim = q.size(3), seqlen_k = k.size(1), heads_kv = k.size(2);
  check_arg(head_dim <= kAttentionNaiveMaxHeadDim, where, "q.size(3) (head_dim)",
            detail::lazy_concat("<= ", kAttentionNaiveMaxHeadDim), head_dim);
  check_attention_tensor(k, q, {batch, seqlen_k, heads_kv, head_dim}, q.dtype(), where, "k");
  check_attention_tensor(v, q, {batch, seqlen_k, heads_kv, head_dim}, q.dtype(), where, "v");
  check_attention_tensor(o, q, q.shape(), q.dtype(), where, "o");
  check_arg(attention_naive_supported(q.device(), q.dtype()), where, "q.dtype",
            q.device().is_cpu() ? "f32 (on the CPU)" : "f32 or f64", q.dtype());
  check_attention_params(params, where);
}

// q: [batch, seqlen_q, heads_q, head_dim]; k: [batch, seqlen_k, heads_kv, head_dim].
cpu::AttentionShape cpu_shape(const Tensor& q, const Tensor& k) {
  return {q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), q.size(3)};
}

}  // namespace

void attention_naive_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                             const AttentionParams& params, Stream stream) {
  check_common(q, k, v, o, params);
  check_attention_tensor(lse, q, {q.size(0), q.size(2), q.size(1)}, attention_lse_dtype(q.dtype()), kWhere,
                         "lse");
  if (q.device().is_cpu()) {
    cpu::attention_forward_f32(q.data_as<const float>(), k.data_as<const float>(), v.data_as<const float>(),
                               o.data_as<float>(), lse.data_as<float>(), nullptr, cpu_shape(q, k),
                               resolved_attention_params(params, q.size(3)));
    return;
  }
#if IGNIS_WITH_CUDA
  cuda::attention_naive_forward(q, k, v, o, lse, nullptr, resolved_attention_params(params, q.size(3)), stream);
#else
  (void)stream;
#endif
}

void attention_naive_kvcache_forward(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                     const Tensor& seqlens_k, const Tensor& o, const Tensor& lse,
                                     const AttentionParams& params, Stream stream) {
  check_common(q, k_cache, v_cache, o, params);
  check_attention_tensor(seqlens_k, q, {q.size(0)}, DType::i32, kWhere, "seqlens_k");
  if (lse.defined())
    check_attention_tensor(lse, q, {q.size(0), q.size(2), q.size(1)}, attention_lse_dtype(q.dtype()), kWhere,
                         "lse");
  if (q.device().is_cpu()) {
    cpu::attention_forward_f32(q.data_as<const float>(), k_cache.data_as<const float>(),
                               v_cache.data_as<const float>(), o.data_as<float>(),
                               lse.defined() ? lse.data_as<float>() : nullptr, seqlens_k.data_as<const std::int32_t>(),
                               cpu_shape(q, k_cache), resolved_attention_params(params, q.size(3)));
    return;
  }
#if IGNIS_WITH_CUDA
  cuda::attention_naive_forward(q, k_cache, v_cache, o, lse.defined() ? lse : Tensor(), seqlens_k.data_as<const int>(),
                                resolved_attention_params(params, q.size(3)), stream);
#else
  (void)stream;
#endif
}

void attention_naive_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                              const Tensor& lse, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                              const AttentionParams& params, Stream stream) {
  constexpr const char* where = "attention_naive_backward";
  check_common(q, k, v, o, params, where);
  check_arg(attention_naive_backward_supported(q.device(), q.dtype()), where, "q",
            "f32 on the CPU (on CUDA, flash_attention_backward takes bf16 and f16)",
            detail::lazy_concat(q.dtype(), " on ", q.device()));
  check_attention_tensor(lse, q, {q.size(0), q.size(2), q.size(1)}, DType::f32, where, "lse");
  check_attention_tensor(dout, q, q.shape(), q.dtype(), where, "dout");
  check_attention_tensor(dq, q, q.shape(), q.dtype(), where, "dq");
  check_attention_tensor(dk, q, k.shape(), q.dtype(), where, "dk");
  check_attention_tensor(dv, q, k.shape(), q.dtype(), where, "dv");
  (void)stream;  // CPU only: runs at once
  cpu::attention_backward_f32(dout.data_as<const float>(), q.data_as<const float>(), k.data_as<const float>(),
                              v.data_as<const float>(), o.data_as<const float>(), lse.data_as<const float>(),
                              dq.data_as<float>(), dk.data_as<float>(), dv.data_as<float>(), cpu_shape(q, k),
                              resolved_attention_params(params, q.size(3)));
}

}  // namespace ignis
