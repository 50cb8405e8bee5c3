// rope_qkv_append dispatcher: validates the tensors and the host's length, launches the CUDA
// kernel, then advances the host's length.
#include "ignis/ops.h"
#include "ops/kv_room.h"

#if IGNIS_WITH_CUDA
#include "cuda/ops/rope_append.h"
#endif

namespace ignis {

bool rope_qkv_append_supported(Device device, DType cache_dtype) {
  return device.is_cuda() && IGNIS_WITH_CUDA &&
         (cache_dtype == DType::f32 || cache_dtype == DType::f16 || cache_dtype == DType::bf16);
}

void rope_qkv_append(const Tensor& qkv, const Tensor& inv_freq, const RopeAppendArgs& args, const Tensor& q_out,
                     const Tensor& k_cache, const Tensor& v_cache, const Tensor& lengths,
                     std::span<std::int64_t> host_lengths, [[maybe_unused]] Stream stream) {
  constexpr const char* where = "rope_qkv_append";
  check_dim(k_cache, 4, where, "k_cache");
  check_dim(q_out, 3, where, "q_out");
  check_dim(qkv, 2, where, "qkv");
  const Device device = k_cache.device();
  check_arg(rope_qkv_append_supported(device, k_cache.dtype()), where, detail::lazy_concat("k_cache.dtype on ", device),
            "f32, f16 or bf16 on CUDA", k_cache.dtype());
  for (const auto& [t, name] : {std::pair{&k_cache, "k_cache"}, std::pair{&v_cache, "v_cache"},
                                std::pair{&q_out, "q_out"}, std::pair{&qkv, "qkv"}, std::pair{&inv_freq, "inv_freq"}}) {
    check_contiguous(*t, where, name);
    check_device(*t, device, where, name);
  }
  check_dtype(v_cache, k_cache.dtype(), where, "v_cache");
  check_dtype(q_out, k_cache.dtype(), where, "q_out");
  check_dtype(qkv, DType::f32, where, "qkv");
  check_dtype(inv_freq, DType::f32, where, "inv_freq");
  const std::int64_t max_seqlen = k_cache.size(1), heads_kv = k_cache.size(2), head_dim = k_cache.size(3);
  const std::int64_t n = qkv.size(0), heads_q = q_out.size(1);
  check_arg(k_cache.size(0) == 1, where, "k_cache.size(0) (batch)", 1, k_cache.size(0));
  check_shape(v_cache, k_cache.shape(), where, "v_cache");
  check_shape(q_out, {n, heads_q, head_dim}, where, "q_out");
  check_shape(qkv, {n, (heads_q + 2 * heads_kv) * head_dim}, where, "qkv");
  check_arg(args.rotary_dim > 0 && args.rotary_dim % 2 == 0 && args.rotary_dim <= head_dim, where,
            "args.rotary_dim", detail::lazy_concat("even, in (0, head_dim = ", head_dim, "]"), args.rotary_dim);
  check_shape(inv_freq, {args.rotary_dim / 2}, where, "inv_freq");
  // The kernel indexes a token's units and a cache's elements with 32-bit ints where it can.
  check_arg(n * (heads_q + 2 * heads_kv) * head_dim < (std::int64_t{1} << 31), where, "qkv.numel()", "< 2^31",
            qkv.numel());
  ops::check_kv_room(where, lengths, host_lengths, 1, n, max_seqlen, device);
#if IGNIS_WITH_CUDA
  cuda::rope_qkv_append(qkv, inv_freq, args, q_out, k_cache, v_cache, lengths, stream);
#endif
  host_lengths[0] += n;
}

}  // namespace ignis
