// Flash attention dispatcher: validates shapes, dtypes, devices, alignment and params, resolves
// the default scale, then calls the CUDA kernel (there is no CPU implementation of this op).
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "cuda/ops/flash_split_plan.h"
#include "ignis/ops.h"
#include "ops/attention_check.h"

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
// Sequence positions and their sums stay in int inside the kernel.
constexpr std::int64_t kMaxSeqlen = std::int64_t{1} << 28;
// Heads and batch are grid dimensions y and z.
constexpr std::int64_t kMaxGridYZ = 65535;

// t: any shape; only its data pointer is checked.
void check_aligned(const Tensor& t, const char* name) {
  const auto address = reinterpret_cast<std::uintptr_t>(t.data());
  check_arg(address % 16 == 0, kWhere, detail::lazy_concat(name, ".data"), "16-byte aligned", address % 16);
}

// Checks what both entry points share; k stands for k_cache in the cached one.
// q, o: [batch, seqlen_q, heads_q, head_dim]; k, v: [batch, seqlen_k, heads_kv, head_dim];
// lse: [batch, heads_q, seqlen_q] or undefined.
void check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                  const AttentionParams& p, std::int64_t num_splits) {
  check_dim(q, 4, kWhere, "q");
  check_contiguous(q, kWhere, "q");
  check_dim(k, 4, kWhere, "k");
  const std::int64_t batch = q.size(0), seqlen_q = q.size(1), heads_q = q.size(2), head_dim = q.size(3);
  const std::int64_t seqlen_k = k.size(1), heads_kv = k.size(2);
  for (auto [size, name] : {std::pair{batch, "q.size(0) (batch)"}, std::pair{seqlen_q, "q.size(1) (seqlen_q)"},
                            std::pair{heads_q, "q.size(2) (heads_q)"}, std::pair{seqlen_k, "k.size(1) (seqlen_k)"},
                            std::pair{heads_kv, "k.size(2) (heads_kv)"}})
    check_arg(size > 0, kWhere, name, "> 0", size);
  check_arg(batch <= kMaxGridYZ, kWhere, "q.size(0) (batch)", "<= 65535", batch);
  check_arg(heads_q <= kMaxGridYZ, kWhere, "q.size(2) (heads_q)", "<= 65535", heads_q);
  check_arg(seqlen_q <= kMaxSeqlen, kWhere, "q.size(1) (seqlen_q)", "<= 2^28", seqlen_q);
  check_arg(seqlen_k <= kMaxSeqlen, kWhere, "k.size(1) (seqlen_k)", "<= 2^28", seqlen_k);
  check_arg(heads_q % heads_kv == 0, kWhere, "q.size(2) (heads_q)",
            detail::lazy_concat("a multiple of heads_kv (", heads_kv, ")"), heads_q);
  check_arg(flash_attention_head_dim_supported(head_dim), kWhere, "q.size(3) (head_dim)", "64 or 128", head_dim);
  check_attention_tensor(k, q, {batch, seqlen_k, heads_kv, head_dim}, q.dtype(), kWhere, "k");
  check_attention_tensor(v, q, {batch, seqlen_k, heads_kv, head_dim}, q.dtype(), kWhere, "v");
  check_attention_tensor(o, q, q.shape(), q.dtype(), kWhere, "o");
  if (lse.defined()) check_attention_tensor(lse, q, {batch, heads_q, seqlen_q}, DType::f32, kWhere, "lse");
  check_arg(q.device().is_cuda(), kWhere, "q.device", "cuda (there is no CPU implementation)", q.device());
  check_arg(flash_attention_supported(q.device(), q.dtype()), kWhere, "q.dtype", "bf16 or f16", q.dtype());
  for (auto [t, name] : {std::pair{&q, "q"}, std::pair{&k, "k"}, std::pair{&v, "v"}, std::pair{&o, "o"}})
    check_aligned(*t, name);
  check_attention_params(p, kWhere);
  check_arg(num_splits >= 0 && num_splits <= cuda::kMaxFlashSplits, kWhere, "num_splits",
            "0 (automatic) to 64", num_splits);
}

}  // namespace

void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                             const AttentionParams& params, std::int64_t num_splits, Stream stream) {
  check_inputs(q, k, v, o, lse, params, num_splits);
#if IGNIS_WITH_CUDA
  cuda::flash_attention_forward(q, k, v, o, lse, nullptr, resolved_attention_params(params, q.size(3)),
                                static_cast<int>(num_splits), stream);
#else
  (void)stream;
#endif
}

std::int64_t flash_attention_auto_splits(const Tensor& q, std::int64_t seqlen_k, const AttentionParams& params) {
  check_dim(q, 4, kWhere, "q");
  check_arg(seqlen_k > 0 && seqlen_k <= kMaxSeqlen, kWhere, "seqlen_k", "1 to 2^28", seqlen_k);
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
                                     const AttentionParams& params, std::int64_t num_splits, Stream stream) {
  check_inputs(q, k_cache, v_cache, o, lse, params, num_splits);
  check_attention_tensor(seqlens_k, q, {q.size(0)}, DType::i32, kWhere, "seqlens_k");
#if IGNIS_WITH_CUDA
  cuda::flash_attention_forward(q, k_cache, v_cache, o, lse, seqlens_k.data_as<const int>(),
                                resolved_attention_params(params, q.size(3)), static_cast<int>(num_splits), stream);
#else
  (void)stream;
#endif
}

}  // namespace ignis
