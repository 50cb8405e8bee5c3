// ignis.rms_norm, ignis.layer_norm and their backward passes, over the last dimension of [rows, dim].
#include <nanobind/stl/optional.h>

#include "common.h"
#include "ignis/ops/norm.h"

namespace ignis::python {
namespace {

using OptStream = std::optional<std::uintptr_t>;

nb::object rms_norm(nb::handle x_arg, nb::handle weight_arg, float eps, OptStream stream) {
  constexpr const char* op = "rms_norm";
  const Array x = array_arg(x_arg, op, "x"), w = array_arg(weight_arg, op, "weight");
  const Array y = empty_like(x, x.tensor.shape(), x.tensor.dtype(), op, "x.dtype");
  run_op(x, stream, [&](Stream s) {
    CpuF32Staging f32(rmsnorm_supported(x.tensor.device(), x.tensor.dtype()), {x.tensor, w.tensor, y.tensor});
    rmsnorm_forward(f32.in(x.tensor), f32.in(w.tensor), f32.out(y.tensor), eps, s);
    f32.finish();
  });
  return y.object;
}

nb::tuple rms_norm_backward(nb::handle x_arg, nb::handle weight_arg, nb::handle dy_arg, float eps,
                            OptStream stream) {
  constexpr const char* op = "rms_norm_backward";
  const Array x = array_arg(x_arg, op, "x"), w = array_arg(weight_arg, op, "weight"), dy = array_arg(dy_arg, op, "dy");
  const Array dx = empty_like(x, x.tensor.shape(), x.tensor.dtype(), op, "x.dtype");
  const Array dw = empty_like(x, w.tensor.shape(), x.tensor.dtype(), op, "x.dtype");
  run_op(x, stream, [&](Stream s) {
    CpuF32Staging f32(rmsnorm_supported(x.tensor.device(), x.tensor.dtype()),
                      {x.tensor, w.tensor, dy.tensor, dx.tensor, dw.tensor});
    rmsnorm_backward(f32.in(x.tensor), f32.in(w.tensor), f32.in(dy.tensor), f32.out(dx.tensor), f32.out(dw.tensor),
                     eps, s);
    f32.finish();
  });
  return nb::make_tuple(dx.object, dw.object);
}

nb::object layer_norm(nb::handle x_arg, nb::handle weight_arg, nb::handle bias_arg, float eps, OptStream stream) {
  constexpr const char* op = "layer_norm";
  const Array x = array_arg(x_arg, op, "x"), w = array_arg(weight_arg, op, "weight");
  const Array b = array_arg(bias_arg, op, "bias");
  const Array y = empty_like(x, x.tensor.shape(), x.tensor.dtype(), op, "x.dtype");
  run_op(x, stream, [&](Stream s) {
    CpuF32Staging f32(layernorm_supported(x.tensor.device(), x.tensor.dtype()),
                      {x.tensor, w.tensor, b.tensor, y.tensor});
    layernorm_forward(f32.in(x.tensor), f32.in(w.tensor), f32.in(b.tensor), f32.out(y.tensor), eps, s);
    f32.finish();
  });
  return y.object;
}

nb::tuple layer_norm_backward(nb::handle x_arg, nb::handle weight_arg, nb::handle dy_arg, float eps,
                              OptStream stream) {
  constexpr const char* op = "layer_norm_backward";
  const Array x = array_arg(x_arg, op, "x"), w = array_arg(weight_arg, op, "weight"), dy = array_arg(dy_arg, op, "dy");
  const Array dx = empty_like(x, x.tensor.shape(), x.tensor.dtype(), op, "x.dtype");
  const Array dw = empty_like(x, w.tensor.shape(), x.tensor.dtype(), op, "x.dtype");
  const Array db = empty_like(x, w.tensor.shape(), x.tensor.dtype(), op, "x.dtype");
  run_op(x, stream, [&](Stream s) {
    CpuF32Staging f32(layernorm_supported(x.tensor.device(), x.tensor.dtype()),
                      {x.tensor, w.tensor, dy.tensor, dx.tensor, dw.tensor, db.tensor});
    layernorm_backward(f32.in(x.tensor), f32.in(w.tensor), f32.in(dy.tensor), f32.out(dx.tensor), f32.out(dw.tensor),
                       f32.out(db.tensor), eps, s);
    f32.finish();
  });
  return nb::make_tuple(dx.object, dw.object, db.object);
}

}  // namespace

void bind_norm(nb::module_& m) {
  m.def("rms_norm", &rms_norm, nb::arg("x"), nb::arg("weight"), nb::arg("eps") = 1e-6f, nb::kw_only(),
        nb::arg("stream") = nb::none(),
        "y = x / sqrt(mean(x^2) + eps) * weight over the last dimension. x: [rows, dim], weight: [dim], same\n"
        "dtype; statistics in fp32.");
  m.def("rms_norm_backward", &rms_norm_backward, nb::arg("x"), nb::arg("weight"), nb::arg("dy"),
        nb::arg("eps") = 1e-6f, nb::kw_only(), nb::arg("stream") = nb::none(),
        "(dx, dweight) of rms_norm. x, dy: [rows, dim], weight: [dim]; the statistics are recomputed from x.");
  m.def("layer_norm", &layer_norm, nb::arg("x"), nb::arg("weight"), nb::arg("bias"), nb::arg("eps") = 1e-5f,
        nb::kw_only(), nb::arg("stream") = nb::none(),
        "y = (x - mean) / sqrt(var + eps) * weight + bias over the last dimension (biased var, as torch).\n"
        "x: [rows, dim], weight, bias: [dim], same dtype; statistics in fp32.");
  m.def("layer_norm_backward", &layer_norm_backward, nb::arg("x"), nb::arg("weight"), nb::arg("dy"),
        nb::arg("eps") = 1e-5f, nb::kw_only(), nb::arg("stream") = nb::none(),
        "(dx, dweight, dbias) of layer_norm. x, dy: [rows, dim], weight: [dim].");
}

}  // namespace ignis::python
