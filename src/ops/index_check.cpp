#include "ops/index_check.h"

#include <algorithm>

#if IGNIS_WITH_CUDA
#include "cuda/ops/embedding.h"  // the device flag's clear and read
#endif

namespace ignis::ops {

void check_index_tensor(const Tensor& indices, const char* where, const char* name) {
  check_arg(indices.dtype() == DType::i32 || indices.dtype() == DType::i64, where, detail::lazy_concat(name, ".dtype"),
            "i32 or i64", indices.dtype());
  check_dim(indices, 1, where, name);
  check_contiguous(indices, where, name);
}

std::int64_t index_at(const Tensor& indices, std::int64_t i) {
  return indices.dtype() == DType::i32 ? indices.data_as<const std::int32_t>()[i]
                                       : indices.data_as<const std::int64_t>()[i];
}

void fail_bad_index(const char* where, const char* name, std::int64_t position, std::int64_t index,
                    std::int64_t bound) {
  fail_expected(where, detail::concat(name, "[", position, "]"), detail::concat("an index in [0, ", bound, ")"),
                index);
}

void check_indices(const Tensor& indices, std::int64_t bound, std::optional<std::int64_t> skip, const char* where,
                   const char* name) {
  const Tensor host = indices.device().is_cpu() ? indices : indices.to(Device::cpu());
  for (std::int64_t i = 0; i < host.numel(); ++i) {
    const std::int64_t v = index_at(host, i);
    if (skip && v == *skip) continue;
    if (v < 0 || v >= bound) fail_bad_index(where, name, i, v, bound);
  }
}

void check_index_flag(const Tensor& flag, Device device, const char* where) {
  check_shape(flag, {3}, where, "flag");
  check_dtype(flag, DType::i64, where, "flag");
  check_device(flag, device, where, "flag");
  check_contiguous(flag, where, "flag");
}

void clear_index_flag(const Tensor& flag, Stream stream) {
  if (flag.device().is_cpu()) {
    flag.data_as<std::int64_t>()[0] = -1;
    return;
  }
#if IGNIS_WITH_CUDA
  cuda::clear_index_flag(flag, stream);
#endif
  (void)stream;
}

void throw_if_flagged(const Tensor& flag, const char* where, const char* name, Stream stream) {
  std::int64_t record[3] = {-1, 0, 0};
  if (flag.device().is_cpu()) {
    std::copy(flag.data_as<const std::int64_t>(), flag.data_as<const std::int64_t>() + 3, record);
  } else {
#if IGNIS_WITH_CUDA
    cuda::read_index_flag(flag, record, stream);
#endif
  }
  (void)stream;
  if (record[0] >= 0) fail_bad_index(where, name, record[0], record[1], record[2]);
}

}  // namespace ignis::ops
