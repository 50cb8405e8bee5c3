// Cross-entropy dispatcher: validates arguments, then runs the CPU or CUDA implementation.
// Targets are checked on the host for CPU tensors; CUDA kernels check them on the device.
#include <vector>

#include "cpu/cross_entropy.h"
#include "ignis/ops.h"
#include "ops/index_check.h"

#if IGNIS_WITH_CUDA
#include "cuda/ops/cross_entropy.h"
#endif

namespace ignis {
namespace {

// t: `shape`, `dtype`, on `device`, contiguous.
void check_output(const Tensor& t, const Shape& shape, DType dtype, Device device, const char* where,
                  const char* name) {
  check_shape(t, shape, where, name);
  check_dtype(t, dtype, where, name);
  check_device(t, device, where, name);
  check_contiguous(t, where, name);
}

// logits: [n, vocab]; targets: [n]; loss: [1]; dlogits: [n, vocab] or undefined; row_loss: [n] or undefined.
void check_args(const Tensor& logits, const Tensor& targets, const Tensor& loss, const Tensor& dlogits,
                const Tensor& row_loss, const char* where) {
  check_dim(logits, 2, where, "logits");
  check_contiguous(logits, where, "logits");
  check_arg(cross_entropy_supported(logits.device(), logits.dtype()), where,
            detail::lazy_concat("logits.dtype on ", logits.device()),
            logits.device().is_cpu() ? "f32" : "f32, f16 or bf16", logits.dtype());
  check_arg(logits.size(0) <= 2147483647, where, "logits.shape[0]", "at most 2^31 - 1 rows", logits.size(0));
  const std::int64_t n = logits.size(0);
  const Device device = logits.device();
  ops::check_index_tensor(targets, where, "targets");
  check_shape(targets, {n}, where, "targets");
  check_device(targets, device, where, "targets");
  check_output(loss, {1}, DType::f32, device, where, "loss");
  if (dlogits.defined()) check_output(dlogits, logits.shape(), logits.dtype(), device, where, "dlogits");
  if (row_loss.defined()) check_output(row_loss, {n}, DType::f32, device, where, "row_loss");
}

// The host implementation; `targets` holds only pad_id or in-range values.
// logits, dlogits: [n, vocab] (dlogits may be undefined); targets: [n]; loss: [1]; row_loss: [n] or undefined.
template <class Id>
void run_cpu(const Tensor& logits, const Id* targets, std::int64_t pad_id, const Tensor& loss, const Tensor& dlogits,
             const Tensor& row_loss) {
  cpu::cross_entropy_f32(logits.data_as<const float>(), targets, logits.size(0), logits.size(1), pad_id,
                         loss.data_as<float>(), dlogits.defined() ? dlogits.data_as<float>() : nullptr,
                         row_loss.defined() ? row_loss.data_as<float>() : nullptr);
}

}  // namespace

bool cross_entropy_supported(Device device, DType dtype) {
  if (device.is_cpu()) return dtype == DType::f32;
  return IGNIS_WITH_CUDA && (dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16);
}

void cross_entropy(const Tensor& logits, const Tensor& targets, std::int64_t pad_id, const Tensor& loss,
                   const Tensor& dlogits, const Tensor& row_loss, Stream stream) {
  constexpr const char* where = "cross_entropy";
  check_args(logits, targets, loss, dlogits, row_loss, where);
  const std::int64_t vocab = logits.size(1);
  if (logits.device().is_cpu()) {
    ops::check_indices(targets, vocab, pad_id, where, "targets");
    if (targets.dtype() == DType::i32)
      run_cpu(logits, targets.data_as<const std::int32_t>(), pad_id, loss, dlogits, row_loss);
    else
      run_cpu(logits, targets.data_as<const std::int64_t>(), pad_id, loss, dlogits, row_loss);
    return;
  }
#if IGNIS_WITH_CUDA
  if (cuda::cross_entropy_checked(logits, targets, pad_id, loss, dlogits, row_loss, stream))
    ops::check_indices(targets, vocab, pad_id, where, "targets");  // names the first bad target
#endif
  (void)stream;
}

void cross_entropy_deferred(const Tensor& logits, const Tensor& targets, std::int64_t pad_id, const Tensor& loss,
                            const Tensor& dlogits, const Tensor& flag, const Tensor& row_loss, Stream stream) {
  constexpr const char* where = "cross_entropy_deferred";
  check_args(logits, targets, loss, dlogits, row_loss, where);
  ops::check_index_flag(flag, logits.device(), where);
  if (logits.device().is_cpu()) {
    // The host path has no reason to defer, but keeps the device path's contract: a bad target's
    // row counts as pad and the first one is recorded.
    auto* record = flag.data_as<std::int64_t>();
    const std::int64_t vocab = logits.size(1);
    std::vector<std::int64_t> checked(static_cast<std::size_t>(targets.size(0)));
    for (std::int64_t i = 0; i < targets.size(0); ++i) {
      const std::int64_t t = ops::index_at(targets, i);
      const bool bad = t != pad_id && (t < 0 || t >= vocab);
      checked[static_cast<std::size_t>(i)] = bad ? pad_id : t;
      if (bad && record[0] < 0) {
        record[0] = i;
        record[1] = t;
        record[2] = vocab;
      }
    }
    run_cpu(logits, checked.data(), pad_id, loss, dlogits, row_loss);
    return;
  }
#if IGNIS_WITH_CUDA
  cuda::cross_entropy(logits, targets, pad_id, loss, dlogits, row_loss, flag.data_as<long long>(), stream);
#endif
  (void)stream;
}

void cross_entropy_clear_flag(const Tensor& flag, Stream stream) {
  ops::check_index_flag(flag, flag.device(), "cross_entropy_clear_flag");
  ops::clear_index_flag(flag, stream);
}

void cross_entropy_check_flag(const Tensor& flag, Stream stream) {
  ops::check_index_flag(flag, flag.device(), "cross_entropy_check_flag");
  ops::throw_if_flagged(flag, "cross_entropy", "targets", stream);
}

}  // namespace ignis
