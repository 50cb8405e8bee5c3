#include "ops/index_check.h"

namespace ignis::ops {

void check_index_tensor(const Tensor& indices, const char* where, const char* name) {
  check_arg(indices.dtype() == DType::i32 || indices.dtype() == DType::i64, where, detail::concat(name, ".dtype"),
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

}  // namespace ignis::ops
