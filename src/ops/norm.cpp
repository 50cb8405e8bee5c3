// RMSNorm / LayerNorm dispatcher: validates arguments, then picks the CPU or CUDA implementation.
#include <cmath>

#include "cpu/norm.h"
#include "ignis/ops.h"

#if IGNIS_WITH_CUDA
#include "cuda/ops/norm.h"
#endif

namespace ignis {
namespace {

bool norm_supported(Device device, DType dtype) {
  if (device.is_cpu()) return dtype == DType::f32;
  return IGNIS_WITH_CUDA && (dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16);
}

// t must be a contiguous tensor of `shape` with the dtype and device of x.
void check_like(const Tensor& t, const Tensor& x, const Shape& shape, const char* where, const char* name) {
  check_dim(t, static_cast<int>(shape.size()), where, name);
  check_shape(t, shape, where, name);
  check_dtype(t, x.dtype(), where, name);
  check_device(t, x.device(), where, name);
  check_contiguous(t, where, name);
}

// Checks x ([rows, dim], supported, contiguous) and eps; returns dim.
std::int64_t check_input(const Tensor& x, float eps, const char* where) {
  check_dim(x, 2, where, "x");
  check_contiguous(x, where, "x");
  check_arg(norm_supported(x.device(), x.dtype()), where, detail::lazy_concat("x.dtype on ", x.device()),
            x.device().is_cpu() ? "f32" : "f32, f16 or bf16", x.dtype());
  check_arg(x.size(1) >= 1, where, "x.shape[1]", ">= 1", x.size(1));
  check_arg(eps >= 0.0f && std::isfinite(eps), where, "eps", "finite and >= 0", eps);
  return x.size(1);
}

}  // namespace

bool rmsnorm_supported(Device device, DType dtype) { return norm_supported(device, dtype); }
bool layernorm_supported(Device device, DType dtype) { return norm_supported(device, dtype); }

void rmsnorm_forward(const Tensor& x, const Tensor& weight, const Tensor& y, float eps, Stream stream) {
  constexpr const char* where = "rmsnorm_forward";
  const std::int64_t dim = check_input(x, eps, where);
  check_like(weight, x, {dim}, where, "weight");
  check_like(y, x, x.shape(), where, "y");
  if (x.device().is_cpu()) {
    cpu::rmsnorm_forward_f32(x.data_as<const float>(), weight.data_as<const float>(), y.data_as<float>(), x.size(0),
                             dim, eps);
    return;
  }
#if IGNIS_WITH_CUDA
  cuda::rmsnorm_forward(x, weight, y, eps, stream);
#endif
}

void rmsnorm_backward(const Tensor& x, const Tensor& weight, const Tensor& dy, const Tensor& dx,
                      const Tensor& dweight, float eps, Stream stream) {
  constexpr const char* where = "rmsnorm_backward";
  const std::int64_t dim = check_input(x, eps, where);
  check_like(weight, x, {dim}, where, "weight");
  check_like(dy, x, x.shape(), where, "dy");
  check_like(dx, x, x.shape(), where, "dx");
  check_like(dweight, x, {dim}, where, "dweight");
  if (x.device().is_cpu()) {
    cpu::rmsnorm_backward_f32(x.data_as<const float>(), weight.data_as<const float>(), dy.data_as<const float>(),
                              dx.data_as<float>(), dweight.data_as<float>(), x.size(0), dim, eps);
    return;
  }
#if IGNIS_WITH_CUDA
  cuda::rmsnorm_backward(x, weight, dy, dx, dweight, eps, stream);
#endif
}

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y, float eps,
                       Stream stream) {
  constexpr const char* where = "layernorm_forward";
  const std::int64_t dim = check_input(x, eps, where);
  check_like(weight, x, {dim}, where, "weight");
  check_like(bias, x, {dim}, where, "bias");
  check_like(y, x, x.shape(), where, "y");
  if (x.device().is_cpu()) {
    cpu::layernorm_forward_f32(x.data_as<const float>(), weight.data_as<const float>(), bias.data_as<const float>(),
                               y.data_as<float>(), x.size(0), dim, eps);
    return;
  }
#if IGNIS_WITH_CUDA
  cuda::layernorm_forward(x, weight, bias, y, eps, stream);
#endif
}

void layernorm_backward(const Tensor& x, const Tensor& weight, const Tensor& dy, const Tensor& dx,
                        const Tensor& dweight, const Tensor& dbias, float eps, Stream stream) {
  constexpr const char* where = "layernorm_backward";
  const std::int64_t dim = check_input(x, eps, where);
  check_like(weight, x, {dim}, where, "weight");
  check_like(dy, x, x.shape(), where, "dy");
  check_like(dx, x, x.shape(), where, "dx");
  check_like(dweight, x, {dim}, where, "dweight");
  check_like(dbias, x, {dim}, where, "dbias");
  if (x.device().is_cpu()) {
    cpu::layernorm_backward_f32(x.data_as<const float>(), weight.data_as<const float>(), dy.data_as<const float>(),
                                dx.data_as<float>(), dweight.data_as<float>(), dbias.data_as<float>(), x.size(0),
                                dim, eps);
    return;
  }
#if IGNIS_WITH_CUDA
  cuda::layernorm_backward(x, weight, dy, dx, dweight, dbias, eps, stream);
#endif
}

}  // namespace ignis
