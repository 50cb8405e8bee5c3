// Softmax dispatcher: validates arguments, then picks the CPU or CUDA implementation.
#include "cpu/softmax.h"
#include "ignis/ops.h"

#if IGNIS_WITH_CUDA
#include "cuda/ops/softmax.h"
#endif

namespace ignis {

bool softmax_supported(Device device, DType dtype) {
  if (device.is_cpu()) return dtype == DType::f32;
  return IGNIS_WITH_CUDA && (dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16);
}

// t, like: [rows, cols].
static void check_rows(const Tensor& t, const Tensor& like, const char* where, const char* name) {
  check_dim(t, 2, where, name);
  check_contiguous(t, where, name);
  if (&t == &like) return;
  check_shape(t, like.shape(), where, name);
  check_dtype(t, like.dtype(), where, name);
  check_device(t, like.device(), where, name);
}

// t: [rows, cols].
static void check_supported(const Tensor& t, const char* where, const char* name) {
  check_arg(softmax_supported(t.device(), t.dtype()), where, detail::lazy_concat(name, ".dtype on ", t.device()),
            t.device().is_cpu() ? "f32" : "f32, f16 or bf16", t.dtype());
}

void softmax_forward(const Tensor& x, const Tensor& y, Stream stream) {
  constexpr const char* where = "softmax_forward";
  check_rows(x, x, where, "x");
  check_rows(y, x, where, "y");
  check_supported(x, where, "x");
  if (x.device().is_cpu()) {
    cpu::softmax_forward_f32(x.data_as<const float>(), y.data_as<float>(), x.size(0), x.size(1));
    return;
  }
#if IGNIS_WITH_CUDA
  cuda::softmax_forward(x, y, stream);
#endif
}

void softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, Stream stream) {
  constexpr const char* where = "softmax_backward";
  check_rows(y, y, where, "y");
  check_rows(dy, y, where, "dy");
  check_rows(dx, y, where, "dx");
  check_supported(y, where, "y");
  if (y.device().is_cpu()) {
    cpu::softmax_backward_f32(y.data_as<const float>(), dy.data_as<const float>(), dx.data_as<float>(), y.size(0),
                              y.size(1));
    return;
  }
#if IGNIS_WITH_CUDA
  cuda::softmax_backward(y, dy, dx, stream);
#endif
}

}  // namespace ignis
