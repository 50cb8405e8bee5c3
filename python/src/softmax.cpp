// ignis.softmax and ignis.softmax_backward: over the last dimension of [rows, cols] arrays.
#include <nanobind/stl/optional.h>

#include "common.h"
#include "ignis/ops/softmax.h"

namespace ignis::python {
namespace {

nb::object softmax(nb::handle x_arg, std::optional<std::uintptr_t> stream) {
  const Array x = array_arg(x_arg, "softmax", "x");
  const Array y = empty_like(x, x.tensor.shape(), x.tensor.dtype(), "softmax", "x.dtype");
  run_op(x, stream, [&](Stream s) {
    CpuF32Staging f32(softmax_supported(x.tensor.device(), x.tensor.dtype()), {x.tensor, y.tensor});
    softmax_forward(f32.in(x.tensor), f32.out(y.tensor), s);
    f32.finish();
  });
  return y.object;
}

nb::object softmax_backward(nb::handle y_arg, nb::handle dy_arg, std::optional<std::uintptr_t> stream) {
  const Array y = array_arg(y_arg, "softmax_backward", "y");
  const Array dy = array_arg(dy_arg, "softmax_backward", "dy");
  const Array dx = empty_like(y, y.tensor.shape(), y.tensor.dtype(), "softmax_backward", "y.dtype");
  run_op(y, stream, [&](Stream s) {
    CpuF32Staging f32(softmax_supported(y.tensor.device(), y.tensor.dtype()), {y.tensor, dy.tensor, dx.tensor});
    ignis::softmax_backward(f32.in(y.tensor), f32.in(dy.tensor), f32.out(dx.tensor), s);
    f32.finish();
  });
  return dx.object;
}

}  // namespace

void bind_softmax(nb::module_& m) {
  m.def("softmax", &softmax, nb::arg("x"), nb::kw_only(), nb::arg("stream") = nb::none(),
        "Softmax over the last dimension of x: [rows, cols], accumulated in fp32 (CPU f64/f16/bf16 go\n"
        "through f32). A row of all -inf gives zeros.");
  m.def("softmax_backward", &softmax_backward, nb::arg("y"), nb::arg("dy"), nb::kw_only(),
        nb::arg("stream") = nb::none(),
        "Gradient of softmax: dx = y * (dy - sum(dy * y)) per row. y, dy: [rows, cols], same dtype.");
}

}  // namespace ignis::python
