#include "ops/kv_room.h"

#include <limits>

namespace ignis::ops {

void check_kv_room(const char* where, const Tensor& lengths, std::span<const std::int64_t> host_lengths,
                   std::int64_t batch, std::int64_t new_tokens, std::int64_t max_seqlen, Device device) {
  check_shape(lengths, {batch}, where, "lengths");
  check_dtype(lengths, DType::i32, where, "lengths");
  check_device(lengths, device, where, "lengths");
  check_contiguous(lengths, where, "lengths");
  check_arg(static_cast<std::int64_t>(host_lengths.size()) == batch, where, "host_lengths.size()", batch,
            host_lengths.size());
  check_arg(max_seqlen <= std::numeric_limits<std::int32_t>::max(), where, "max_seqlen", "<= 2^31 - 1 (i32 lengths)",
            max_seqlen);
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t len = host_lengths[b];
    check_arg(len >= 0 && len + new_tokens <= max_seqlen, where,
              detail::lazy_concat("context length exceeded: sequence ", b, " length + new_tokens"),
              detail::lazy_concat("<= max_seqlen ", max_seqlen), detail::lazy_concat(len, " + ", new_tokens));
  }
}

}  // namespace ignis::ops
