// Position embedding dispatcher: validates arguments and the positions the host can see, then
// runs the CPU loop or the CUDA kernel.
#include <string>
#include <vector>

#include "cpu/position_embedding.h"
#include "ignis/ops.h"

#if IGNIS_WITH_CUDA
#include "cuda/ops/position_embedding.h"
#endif

namespace ignis {

bool position_embedding_supported(Device device, DType dtype) {
  if (device.is_cpu()) return dtype == DType::f32;
  return IGNIS_WITH_CUDA && (dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16);
}

void position_embedding_add(const Tensor& x, const Tensor& table, std::int64_t position_offset,
                            const std::optional<Tensor>& batch_offsets, Stream stream) {
  constexpr const char* where = "position_embedding_add";
  check_dim(x, 3, where, "x");
  check_contiguous(x, where, "x");
  check_arg(position_embedding_supported(x.device(), x.dtype()), where, detail::lazy_concat("x.dtype on ", x.device()),
            x.device().is_cpu() ? "f32" : "f32, f16 or bf16", x.dtype());
  check_dim(table, 2, where, "table");
  check_arg(table.size(1) == x.size(2), where, "table.shape[1]", x.size(2), table.size(1));
  check_dtype(table, x.dtype(), where, "table");
  check_device(table, x.device(), where, "table");
  check_contiguous(table, where, "table");
  check_arg(position_offset >= 0, where, "position_offset", ">= 0", position_offset);
  const std::int64_t batch = x.size(0), seqlen = x.size(1), dim = x.size(2), positions = table.size(0);
  if (batch_offsets) {
    check_shape(*batch_offsets, {batch}, where, "batch_offsets");
    check_dtype(*batch_offsets, DType::i32, where, "batch_offsets");
    check_device(*batch_offsets, x.device(), where, "batch_offsets");
    check_contiguous(*batch_offsets, where, "batch_offsets");
  } else {
    check_arg(position_offset + seqlen <= positions, where, "position_offset + seqlen",
              detail::lazy_concat("<= table.shape[0] ", positions), position_offset + seqlen);
  }
  if (x.numel() == 0) return;

  if (x.device().is_cpu()) {
    std::vector<std::int64_t> starts(static_cast<std::size_t>(batch), position_offset);
    for (std::int64_t b = 0; b < batch && batch_offsets; ++b) {
      std::int64_t& start = starts[static_cast<std::size_t>(b)];
      start += batch_offsets->data_as<const std::int32_t>()[b];
      check_arg(start >= 0 && start + seqlen <= positions, where, detail::lazy_concat("positions of sequence ", b),
                detail::lazy_concat("inside [0, ", positions, ")"),
                detail::lazy_concat("[", start, ", ", start + seqlen, ")"));
    }
    cpu::position_embedding_add_f32(x.data_as<float>(), table.data_as<const float>(), starts.data(), batch, seqlen,
                                    dim);
    return;
  }
#if IGNIS_WITH_CUDA
  cuda::position_embedding_add(x, table, position_offset,
                               batch_offsets ? batch_offsets->data_as<const std::int32_t>() : nullptr, stream);
#endif
  (void)stream;
}

}  // namespace ignis
