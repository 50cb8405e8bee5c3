// Cross-entropy dispatcher: validates arguments, then runs the CPU or CUDA implementation.
// Targets are checked on the host for CPU tensors; CUDA kernels check them on the device.
#include "cpu/cross_entropy.h"
#include "ignis/ops.h"
#include "ops/index_check.h"

#if IGNIS_WITH_CUDA
#include "cuda/ops/cross_entropy.h"
#endif

namespace ignis {
namespace {

void check_output(const Tensor& t, const Shape& shape, DType dtype, Device device, const char* where,
                  const char* name) {
  check_shape(t, shape, where, name);
  check_dtype(t, dtype, where, name);
  check_device(t, device, where, name);
  check_contiguous(t, where, name);
}

}  // namespace

bool cross_entropy_supported(Device device, DType dtype) {
  if (device.is_cpu()) return dtype == DType::f32;
  return IGNIS_WITH_CUDA && (dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16);
}

void cross_entropy(const Tensor& logits, const Tensor& targets, std::int64_t pad_id, const Tensor& loss,
                   const Tensor& dlogits, const Tensor& row_loss, Stream stream) {
  constexpr const char* where = "cross_entropy";
  check_dim(logits, 2, where, "logits");
  check_contiguous(logits, where, "logits");
  check_arg(cross_entropy_supported(logits.device(), logits.dtype()), where,
            "logits.dtype on " + logits.device().str(), logits.device().is_cpu() ? "f32" : "f32, f16 or bf16",
            logits.dtype());
  check_arg(logits.size(0) <= 2147483647, where, "logits.shape[0]", "at most 2^31 - 1 rows", logits.size(0));
  const std::int64_t n = logits.size(0), vocab = logits.size(1);
  const Device device = logits.device();
  ops::check_index_tensor(targets, where, "targets");
  check_shape(targets, {n}, where, "targets");
  check_device(targets, device, where, "targets");
  check_output(loss, {1}, DType::f32, device, where, "loss");
  if (dlogits.defined()) check_output(dlogits, logits.shape(), logits.dtype(), device, where, "dlogits");
  if (row_loss.defined()) check_output(row_loss, {n}, DType::f32, device, where, "row_loss");

  float* grad = dlogits.defined() ? dlogits.data_as<float>() : nullptr;
  float* rows = row_loss.defined() ? row_loss.data_as<float>() : nullptr;
  if (device.is_cpu()) {
    ops::check_indices(targets, vocab, pad_id, where, "targets");
    if (targets.dtype() == DType::i32)
      cpu::cross_entropy_f32(logits.data_as<const float>(), targets.data_as<const std::int32_t>(), n, vocab, pad_id,
                             loss.data_as<float>(), grad, rows);
    else
      cpu::cross_entropy_f32(logits.data_as<const float>(), targets.data_as<const std::int64_t>(), n, vocab, pad_id,
                             loss.data_as<float>(), grad, rows);
    return;
  }
#if IGNIS_WITH_CUDA
  if (cuda::cross_entropy(logits, targets, pad_id, loss, dlogits, row_loss, stream))
    ops::check_indices(targets, vocab, pad_id, where, "targets");  // names the first bad target
#endif
  (void)stream;
}

}  // namespace ignis
