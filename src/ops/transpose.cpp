// Transpose dispatcher: validates the operands, then runs the CPU blocked loops or the CUDA kernel.
#include "cpu/transpose.h"
#include "ignis/ops.h"

#if IGNIS_WITH_CUDA
#include "cuda/ops/transpose.h"
#endif

namespace ignis {

bool transpose_supported(Device device, DType) { return device.is_cpu() || IGNIS_WITH_CUDA; }

void transpose(const Tensor& x, const Tensor& y, [[maybe_unused]] Stream stream) {
  constexpr const char* where = "transpose";
  check_arg(x.dim() == 2 || x.dim() == 3, where, "x.dim", "2 or 3", x.dim());
  check_contiguous(x, where, "x");
  check_contiguous(y, where, "y");
  check_dtype(y, x.dtype(), where, "y");
  check_device(y, x.device(), where, "y");
  check_arg(transpose_supported(x.device(), x.dtype()), where, "device", "cpu (built without CUDA)", x.device());
  const bool batched = x.dim() == 3;
  const std::int64_t batch = batched ? x.size(0) : 1, rows = x.size(-2), cols = x.size(-1);
  check_shape(y, batched ? Shape{batch, cols, rows} : Shape{cols, rows}, where, "y");
  if (x.device().is_cpu()) {
    cpu::transpose(x.data(), y.data(), batch, rows, cols, dtype_size(x.dtype()));
    return;
  }
#if IGNIS_WITH_CUDA
  cuda::transpose(x, y, batch, rows, cols, stream);
#endif
}

}  // namespace ignis
