// Flash attention dispatcher: validates shapes, dtypes, devices, alignment and params, resolves
// the default scale, then calls the CUDA kernel (there is no CPU implementation of this op).
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "cuda/ops/flash_split_plan.h"
#include "ignis/ops.h"
#include "ops/attention_check.h"
#include "ops/flash_check.h"

#if IGNIS_WITH_CUDA
#include "cuda/ops/flash_attention.h"
#endif

namespace ignis {

bool flash_attention_supported(Device device, DType dtype) {
  return IGNIS_WITH_CUDA && device.is_cuda() && (dtype == DType::bf16 || dtype == DType::f16);
}

bool flash_attention_head_dim_supported(std::int64_t head_dim) { return head_dim == 64 || head_dim == 128; }

namespace {

constexpr const char* kWhere = "flash_attention_forward";

// Checks what both entry points share; k stands for k_cache in the cached one.
// q, o: [batch, seqlen_q, heads_q, head_dim]; k, v: [batch, seqlen_k, heads_kv, head_dim];
// lse: [batch, heads_q, seqlen_q] or undefined.
void check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                  const AttentionParams& p, std::int64_t num_splits) {
  check_flash_tensors(q, k, v, o, lse, p, kWhere);
  check_arg(num_splits >= 0 && num_splits <= cuda::kMaxFlashSplits, kWhere, "num_splits",
            "0 (automatic) to 64", num_splits);
}

}  // namespace

void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                             const AttentionParams& params, std::int64_t num_splits, Stream stream) {
  check_inputs(q, k, v, o, lse, params, num_splits);
#if IGNIS_WITH_CUDA
  cuda::flash_attention_forward(q, k, v, o, lse, nullptr, resolved_attention_params(params, q.size(3)),
                                static_cast<int>(num_splits), 0, stream);
#else
  (void)stream;
#endif
}

std::int64_t flash_attention_auto_splits(const Tensor& q, std::int64_t seqlen_k, const AttentionParams& params) {
  check_dim(q, 4, kWhere, "q");
  check_arg(seqlen_k > 0 && seqlen_k <= kMaxFlashSeqlen, kWhere, "seqlen_k", "1 to 2^28", seqlen_k);
  check_arg(q.device().is_cuda(), kWhere, "q.device", "cuda (there is no CPU implementation)", q.device());
  check_arg(flash_attention_supported(q.device(), q.dtype()), kWhere, "q.dtype", "bf16 or f16", q.dtype());
  check_arg(flash_attention_head_dim_supported(q.size(3)), kWhere, "q.size(3) (head_dim)", "64 or 128", q.size(3));
#if IGNIS_WITH_CUDA
  return cuda::flash_attention_auto_splits(q, seqlen_k, params.causal);
#else
  (void)params;
  return 1;
#endif
}

void flash_attention_kvcache_forward(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                     const Tensor& seqlens_k, const Tensor& o, const Tensor& lse,
                                     const AttentionParams& params, std::int64_t num_splits, Stream stream,
                                     std::int64_t longest_seqlen_k) {
  check_inputs(q, k_cache, v_cache, o, lse, params, num_splits);
  check_attention_tensor(seqlens_k, q, {q.size(0)}, DType::i32, kWhere, "seqlens_k");
  check_arg(longest_seqlen_k >= 0 && longest_seqlen_k <= k_cache.size(1), kWhere, "longest_seqlen_k",
            "0 to k_cache.size(1) (max_seqlen)", longest_seqlen_k);
#if IGNIS_WITH_CUDA
  cuda::flash_attention_forward(q, k_cache, v_cache, o, lse, seqlens_k.data_as<const int>(),
                                resolved_attention_params(params, q.size(3)), static_cast<int>(num_splits),
                                longest_seqlen_k, stream);
#else
  (void)stream;
#endif
}

}  // namespace ignis
