// Decode attention dispatcher: validates shapes, dtypes, devices, alignment and params, resolves
// the default scale, then calls the CUDA kernels (there is no CPU implementation of this op).
#include <cstdint>
#include <string>
#include <utility>

#include "ignis/ops.h"
#include "ops/attention_check.h"

#if IGNIS_WITH_CUDA
#include "cuda/ops/attention_decode.h"
#endif

namespace ignis {

bool attention_decode_supported(Device device, DType dtype) {
  return IGNIS_WITH_CUDA && device.is_cuda() && (dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16);
}

bool attention_decode_head_dim_supported(std::int64_t head_dim) {
  return head_dim > 0 && head_dim % 8 == 0 && head_dim <= kAttentionDecodeMaxHeadDim;
}

namespace {

constexpr const char* kWhere = "attention_decode_forward";

// The kernels read and write 16-byte packs.
// t: any shape; only its data pointer is checked.
void check_aligned(const Tensor& t, const char* name) {
  const auto address = reinterpret_cast<std::uintptr_t>(t.data());
  check_arg(address % 16 == 0, kWhere, detail::lazy_concat(name, ".data()"), "16-byte aligned",
            detail::lazy_concat("an address = ", address % 16, " mod 16"));
}

}  // namespace

void attention_decode_forward(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& seqlens_k,
                              const Tensor& o, const AttentionParams& params, Stream stream) {
  attention_decode_forward(q, k_cache, v_cache, seqlens_k, o, params, Tensor(), stream);
}

std::int64_t attention_decode_workspace_bytes(std::int64_t batch, std::int64_t max_seqlen, std::int64_t heads_q,
                                              std::int64_t heads_kv, std::int64_t head_dim) {
#if IGNIS_WITH_CUDA
  const std::size_t bytes = cuda::attention_decode_workspace_bytes(batch, max_seqlen, heads_q, heads_kv, head_dim);
  return static_cast<std::int64_t>(bytes);
#else
  (void)batch, (void)max_seqlen, (void)heads_q, (void)heads_kv, (void)head_dim;
  return 0;
#endif
}

void attention_decode_forward(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& seqlens_k,
                              const Tensor& o, const AttentionParams& params, const Tensor& workspace,
                              Stream stream) {
  check_dim(q, 4, kWhere, "q");
  check_contiguous(q, kWhere, "q");
  check_dim(k_cache, 4, kWhere, "k_cache");
  const std::int64_t batch = q.size(0), heads_q = q.size(2), head_dim = q.size(3);
  const std::int64_t max_seqlen = k_cache.size(1), heads_kv = k_cache.size(2);
  check_arg(q.size(1) == 1, kWhere, "q.size(1) (seqlen_q)", "1", q.size(1));
  for (auto [size, name] : {std::pair{batch, "q.size(0) (batch)"}, std::pair{heads_q, "q.size(2) (heads_q)"},
                            std::pair{head_dim, "q.size(3) (head_dim)"},
                            std::pair{max_seqlen, "k_cache.size(1) (max_seqlen)"},
                            std::pair{heads_kv, "k_cache.size(2) (heads_kv)"}})
    check_arg(size > 0, kWhere, name, "> 0", size);
  check_arg(heads_q % heads_kv == 0, kWhere, "q.size(2) (heads_q)",
            detail::lazy_concat("a multiple of heads_kv (", heads_kv, ")"), heads_q);
  check_arg(attention_decode_head_dim_supported(head_dim), kWhere, "q.size(3) (head_dim)",
            detail::lazy_concat("a multiple of 8 up to ", kAttentionDecodeMaxHeadDim), head_dim);
  check_arg(batch <= 65535, kWhere, "q.size(0) (batch)", "<= 65535", batch);
  check_attention_tensor(k_cache, q, {batch, max_seqlen, heads_kv, head_dim}, q.dtype(), kWhere, "k_cache");
  check_attention_tensor(v_cache, q, {batch, max_seqlen, heads_kv, head_dim}, q.dtype(), kWhere, "v_cache");
  check_attention_tensor(o, q, q.shape(), q.dtype(), kWhere, "o");
  check_attention_tensor(seqlens_k, q, {batch}, DType::i32, kWhere, "seqlens_k");
  check_arg(q.device().is_cuda(), kWhere, "q.device", "cuda (there is no CPU implementation)", q.device());
  check_arg(attention_decode_supported(q.device(), q.dtype()), kWhere, "q.dtype", "f32, f16 or bf16", q.dtype());
  for (auto [t, name] : {std::pair{&q, "q"}, std::pair{&k_cache, "k_cache"}, std::pair{&v_cache, "v_cache"},
                         std::pair{&o, "o"}})
    check_aligned(*t, name);
  check_attention_params(params, kWhere);
  if (workspace.defined()) {
    const std::int64_t needed = attention_decode_workspace_bytes(batch, max_seqlen, heads_q, heads_kv, head_dim);
    check_dtype(workspace, DType::u8, kWhere, "workspace");
    check_device(workspace, q.device(), kWhere, "workspace");
    check_contiguous(workspace, kWhere, "workspace");
    check_arg(workspace.numel() >= needed, kWhere, "workspace.numel()", detail::lazy_concat(">= ", needed),
              workspace.numel());
    const auto offset = reinterpret_cast<std::uintptr_t>(workspace.data()) % 256;
    check_arg(offset == 0, kWhere, "workspace", "256-byte aligned",
              detail::lazy_concat("an address = ", offset, " mod 256"));
  }
#if IGNIS_WITH_CUDA
  cuda::attention_decode_forward(q, k_cache, v_cache, seqlens_k.data_as<const int>(), o,
                                 resolved_attention_params(params, head_dim),
                                 workspace.defined() ? workspace.data() : nullptr, stream);
#else
  (void)stream;
#endif
}

}  // namespace ignis
