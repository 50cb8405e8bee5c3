// Naive attention dispatcher: validates shapes, dtypes, devices and params, resolves the default
// scale, then calls the CUDA kernel (there is no CPU implementation of this op).
#include <cmath>
#include <string>
#include <utility>

#include "ignis/ops.h"
#include "ops/attention_check.h"

#if IGNIS_WITH_CUDA
#include "cuda/ops/attention_naive.h"
#endif

namespace ignis {

DType attention_lse_dtype(DType dtype) { return dtype == DType::f64 ? DType::f64 : DType::f32; }

bool attention_naive_supported(Device device, DType dtype) {
  return IGNIS_WITH_CUDA && device.is_cuda() && (dtype == DType::f32 || dtype == DType::f64);
}

namespace {

constexpr const char* kWhere = "attention_naive_forward";

}  // namespace

namespace {

// Checks what both entry points share; k stands for k_cache in the cached one.
// q, o: [batch, seqlen_q, heads_q, head_dim]; k, v: [batch, seqlen_k, heads_kv, head_dim].
void check_common(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const AttentionParams& params) {
  check_dim(q, 4, kWhere, "q");
  check_contiguous(q, kWhere, "q");
  check_dim(k, 4, kWhere, "k");
  const std::int64_t batch = q.size(0), seqlen_q = q.size(1), heads_q = q.size(2), head_dim = q.size(3);
  const std::int64_t seqlen_k = k.size(1), heads_kv = k.size(2);
  for (auto [size, name] : {std::pair{batch, "q.size(0) (batch)"}, std::pair{seqlen_q, "q.size(1) (seqlen_q)"},
                            std::pair{heads_q, "q.size(2) (heads_q)"}, std::pair{head_dim, "q.size(3) (head_dim)"},
                            std::pair{seqlen_k, "k.size(1) (seqlen_k)"}, std::pair{heads_kv, "k.size(2) (heads_kv)"}})
    check_arg(size > 0, kWhere, name, "> 0", size);
  check_arg(heads_q % heads_kv == 0, kWhere, "q.size(2) (heads_q)",
            detail::lazy_concat("a multiple of heads_kv (", heads_kv, ")"), heads_q);
  check_arg(head_dim <= kAttentionNaiveMaxHeadDim, kWhere, "q.size(3) (head_dim)",
            detail::lazy_concat("<= ", kAttentionNaiveMaxHeadDim), head_dim);
  check_attention_tensor(k, q, {batch, seqlen_k, heads_kv, head_dim}, q.dtype(), kWhere, "k");
  check_attention_tensor(v, q, {batch, seqlen_k, heads_kv, head_dim}, q.dtype(), kWhere, "v");
  check_attention_tensor(o, q, q.shape(), q.dtype(), kWhere, "o");
  check_arg(q.device().is_cuda(), kWhere, "q.device", "cuda (there is no CPU implementation)", q.device());
  check_arg(attention_naive_supported(q.device(), q.dtype()), kWhere, "q.dtype", "f32 or f64", q.dtype());
  check_attention_params(params, kWhere);
}

}  // namespace

void attention_naive_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                             const AttentionParams& params, Stream stream) {
  check_common(q, k, v, o, params);
  check_attention_tensor(lse, q, {q.size(0), q.size(2), q.size(1)}, attention_lse_dtype(q.dtype()), kWhere,
                         "lse");
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
#if IGNIS_WITH_CUDA
  cuda::attention_naive_forward(q, k_cache, v_cache, o, lse.defined() ? lse : Tensor(), seqlens_k.data_as<const int>(),
                                resolved_attention_params(params, q.size(3)), stream);
#else
  (void)stream;
#endif
}

}  // namespace ignis
