// Activation dispatcher: validates arguments, then picks the CPU or CUDA implementation.
#include <initializer_list>

#include "cpu/activation.h"
#include "ignis/ops.h"

#if IGNIS_WITH_CUDA
#include "cuda/ops/activation.h"
#endif

namespace ignis {
namespace {

struct Named {
  const Tensor& t;
  const char* name;
};

// The first tensor sets the shape, dtype and device; all must be contiguous.
// tensors: [n...], all of the first's shape.
void check_elementwise(std::initializer_list<Named> tensors, const char* where) {
  const Named& first = *tensors.begin();
  check_contiguous(first.t, where, first.name);
  check_arg(activation_supported(first.t.device(), first.t.dtype()), where,
            detail::lazy_concat(first.name, ".dtype on ", first.t.device()),
            first.t.device().is_cpu() ? "f32" : "f32, f16 or bf16", first.t.dtype());
  for (const Named& n : tensors) {
    check_shape(n.t, first.t.shape(), where, n.name);
    check_dtype(n.t, first.t.dtype(), where, n.name);
    check_device(n.t, first.t.device(), where, n.name);
    check_contiguous(n.t, where, n.name);
  }
}

}  // namespace

bool activation_supported(Device device, DType dtype) {
  if (device.is_cpu()) return dtype == DType::f32;
  return IGNIS_WITH_CUDA && (dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16);
}

void gelu_tanh_forward(const Tensor& x, const Tensor& y, Stream stream) {
  check_elementwise({{x, "x"}, {y, "y"}}, "gelu_tanh_forward");
  if (x.device().is_cpu()) return cpu::gelu_tanh_forward_f32(x.data_as<const float>(), y.data_as<float>(), x.numel());
#if IGNIS_WITH_CUDA
  cuda::gelu_tanh_forward(x, y, stream);
#endif
}

void gelu_tanh_backward(const Tensor& x, const Tensor& dy, const Tensor& dx, Stream stream) {
  check_elementwise({{x, "x"}, {dy, "dy"}, {dx, "dx"}}, "gelu_tanh_backward");
  if (x.device().is_cpu())
    return cpu::gelu_tanh_backward_f32(x.data_as<const float>(), dy.data_as<const float>(), dx.data_as<float>(),
                                       x.numel());
#if IGNIS_WITH_CUDA
  cuda::gelu_tanh_backward(x, dy, dx, stream);
#endif
}

void silu_forward(const Tensor& x, const Tensor& y, Stream stream) {
  check_elementwise({{x, "x"}, {y, "y"}}, "silu_forward");
  if (x.device().is_cpu()) return cpu::silu_forward_f32(x.data_as<const float>(), y.data_as<float>(), x.numel());
#if IGNIS_WITH_CUDA
  cuda::silu_forward(x, y, stream);
#endif
}

void silu_backward(const Tensor& x, const Tensor& dy, const Tensor& dx, Stream stream) {
  check_elementwise({{x, "x"}, {dy, "dy"}, {dx, "dx"}}, "silu_backward");
  if (x.device().is_cpu())
    return cpu::silu_backward_f32(x.data_as<const float>(), dy.data_as<const float>(), dx.data_as<float>(),
                                  x.numel());
#if IGNIS_WITH_CUDA
  cuda::silu_backward(x, dy, dx, stream);
#endif
}

void swiglu_forward(const Tensor& gate, const Tensor& up, const Tensor& out, Stream stream) {
  check_elementwise({{gate, "gate"}, {up, "up"}, {out, "out"}}, "swiglu_forward");
  if (gate.device().is_cpu())
    return cpu::swiglu_forward_f32(gate.data_as<const float>(), up.data_as<const float>(), out.data_as<float>(),
                                   gate.numel());
#if IGNIS_WITH_CUDA
  cuda::swiglu_forward(gate, up, out, stream);
#endif
}

void swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dout, const Tensor& dgate,
                     const Tensor& dup, Stream stream) {
  check_elementwise({{gate, "gate"}, {up, "up"}, {dout, "dout"}, {dgate, "dgate"}, {dup, "dup"}}, "swiglu_backward");
  if (gate.device().is_cpu())
    return cpu::swiglu_backward_f32(gate.data_as<const float>(), up.data_as<const float>(),
                                    dout.data_as<const float>(), dgate.data_as<float>(), dup.data_as<float>(),
                                    gate.numel());
#if IGNIS_WITH_CUDA
  cuda::swiglu_backward(gate, up, dout, dgate, dup, stream);
#endif
}

}  // namespace ignis
