#pragma once
// The argument checks the flash attention dispatchers share (forward, KV cache forward, backward).
#include <cstdint>
#include <utility>

#include "ignis/ops.h"
#include "ops/attention_check.h"

namespace ignis {

// Sequence positions and their sums stay in int inside the kernels.
inline constexpr std::int64_t kMaxFlashSeqlen = std::int64_t{1} << 28;
// Heads and batch are grid dimensions y and z.
inline constexpr std::int64_t kMaxFlashGridYZ = 65535;

// t: any shape; only its data pointer is checked.
inline void check_flash_aligned(const Tensor& t, const char* where, const char* name) {
  const auto address = reinterpret_cast<std::uintptr_t>(t.data());
  check_arg(address % 16 == 0, where, detail::lazy_concat(name, ".data"), "16-byte aligned", address % 16);
}

// q, o: [batch, seqlen_q, heads_q, head_dim]; k, v: [batch, seqlen_k, heads_kv, head_dim]; lse: [batch, heads_q,
// seqlen_q] f32 or undefined. Sizes, dtypes (bf16 or f16, q's for all but lse), one CUDA device, contiguity,
// 16-byte alignment and params, each error naming `where` and the argument.
inline void check_flash_tensors(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                                const AttentionParams& p, const char* where) {
  check_attention_shapes(q, k, where);
  const std::int64_t batch = q.size(0), seqlen_q = q.size(1), heads_q = q.size(2), head_dim = q.size(3);
  const std::int64_t seqlen_k = k.size(1), heads_kv = k.size(2);
  check_arg(batch <= kMaxFlashGridYZ, where, "q.size(0) (batch)", "<= 65535", batch);
  check_arg(heads_q <= kMaxFlashGridYZ, where, "q.size(2) (heads_q)", "<= 65535", heads_q);
  check_arg(seqlen_q <= kMaxFlashSeqlen, where, "q.size(1) (seqlen_q)", "<= 2^28", seqlen_q);
  check_arg(seqlen_k <= kMaxFlashSeqlen, where, "k.size(1) (seqlen_k)", "<= 2^28", seqlen_k);
  check_arg(flash_attention_head_dim_supported(head_dim), where, "q.size(3) (head_dim)", "64 or 128", head_dim);
  check_attention_tensor(k, q, {batch, seqlen_k, heads_kv, head_dim}, q.dtype(), where, "k");
  check_attention_tensor(v, q, {batch, seqlen_k, heads_kv, head_dim}, q.dtype(), where, "v");
  check_attention_tensor(o, q, q.shape(), q.dtype(), where, "o");
  if (lse.defined()) check_attention_tensor(lse, q, {batch, heads_q, seqlen_q}, DType::f32, where, "lse");
  check_arg(q.device().is_cuda(), where, "q.device", "cuda (there is no CPU implementation)", q.device());
  check_arg(flash_attention_supported(q.device(), q.dtype()), where, "q.dtype", "bf16 or f16", q.dtype());
  for (auto [t, name] : {std::pair{&q, "q"}, std::pair{&k, "k"}, std::pair{&v, "v"}, std::pair{&o, "o"}})
    check_flash_aligned(*t, where, name);
  check_attention_params(p, where);
}

}  // namespace ignis
