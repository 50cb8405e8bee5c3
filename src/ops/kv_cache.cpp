// KV-cache append dispatcher: validates the tensors, checks the new lengths against max_seqlen
// on the host's copy of the lengths, then copies on the CPU or launches the CUDA kernels.
#include "cpu/kv_cache.h"
#include "ignis/ops.h"
#include "ops/kv_room.h"

#if IGNIS_WITH_CUDA
#include "cuda/ops/kv_cache.h"
#endif

namespace ignis {

bool kv_cache_supported(Device device, DType dtype) {
  return is_floating(dtype) && (device.is_cpu() || IGNIS_WITH_CUDA);
}

void kv_cache_append(const Tensor& k_cache, const Tensor& v_cache, const Tensor& k_new, const Tensor& v_new,
                     const Tensor& lengths, std::span<std::int64_t> host_lengths, [[maybe_unused]] Stream stream) {
  constexpr const char* where = "kv_cache_append";
  check_dim(k_cache, 4, where, "k_cache");
  check_dim(k_new, 4, where, "k_new");
  for (const auto& [t, name] : {std::pair{&k_cache, "k_cache"}, std::pair{&v_cache, "v_cache"},
                                std::pair{&k_new, "k_new"}, std::pair{&v_new, "v_new"}}) {
    check_contiguous(*t, where, name);
    check_dtype(*t, k_cache.dtype(), where, name);
    check_device(*t, k_cache.device(), where, name);
  }
  check_arg(kv_cache_supported(k_cache.device(), k_cache.dtype()), where,
            detail::lazy_concat("dtype on ", k_cache.device()), "f64, f32, f16 or bf16", k_cache.dtype());
  const std::int64_t batch = k_cache.size(0), max_seqlen = k_cache.size(1), new_tokens = k_new.size(1);
  check_shape(v_cache, k_cache.shape(), where, "v_cache");
  check_shape(k_new, {batch, new_tokens, k_cache.size(2), k_cache.size(3)}, where, "k_new");
  check_shape(v_new, k_new.shape(), where, "v_new");
  ops::check_kv_room(where, lengths, host_lengths, batch, new_tokens, max_seqlen, k_cache.device());

  if (k_cache.device().is_cpu()) {
    std::int32_t* dev_lengths = lengths.data_as<std::int32_t>();
    for (std::int64_t b = 0; b < batch; ++b)
      check_arg(dev_lengths[b] == host_lengths[b], where, detail::lazy_concat("lengths[", b, "]"),
                detail::lazy_concat(host_lengths[b], " (host_lengths)"), dev_lengths[b]);
    const std::int64_t row_bytes =
        k_cache.size(2) * k_cache.size(3) * static_cast<std::int64_t>(dtype_size(k_cache.dtype()));
    cpu::kv_cache_append(k_cache.data(), k_new.data(), dev_lengths, batch, max_seqlen, new_tokens, row_bytes);
    cpu::kv_cache_append(v_cache.data(), v_new.data(), dev_lengths, batch, max_seqlen, new_tokens, row_bytes);
    for (std::int64_t b = 0; b < batch; ++b) dev_lengths[b] += static_cast<std::int32_t>(new_tokens);
  } else {
#if IGNIS_WITH_CUDA
    cuda::kv_cache_append(k_cache, v_cache, k_new, v_new, lengths, stream);
#endif
  }
  for (std::int64_t& len : host_lengths) len += new_tokens;
}

}  // namespace ignis
