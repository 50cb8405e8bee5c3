// ignis.gelu_tanh, ignis.silu, ignis.swiglu and their backward passes: element-wise, any shape.
#include <nanobind/stl/optional.h>

#include "common.h"
#include "ignis/ops/activation.h"

namespace ignis::python {
namespace {

using OptStream = std::optional<std::uintptr_t>;
using Unary = void (*)(const Tensor&, const Tensor&, Stream);
using Binary = void (*)(const Tensor&, const Tensor&, const Tensor&, Stream);

// out = fn(a): y = activation(x).
nb::object unary(Unary fn, const char* op, nb::handle a_arg, OptStream stream) {
  const Array a = array_arg(a_arg, op, "x");
  const Array out = empty_like(a, a.tensor.shape(), a.tensor.dtype(), op, "x.dtype");
  run_op(a, stream, [&](Stream s) {
    CpuF32Staging f32(activation_supported(a.tensor.device(), a.tensor.dtype()), {a.tensor, out.tensor});
    fn(f32.in(a.tensor), f32.out(out.tensor), s);
    f32.finish();
  });
  return out.object;
}

// out = fn(a, b): dx = backward(x, dy), or swiglu's out = silu(gate) * up.
nb::object binary(Binary fn, const char* op, const char* a_name, const char* b_name, nb::handle a_arg,
                  nb::handle b_arg, OptStream stream) {
  const Array a = array_arg(a_arg, op, a_name), b = array_arg(b_arg, op, b_name);
  const Array out = empty_like(a, a.tensor.shape(), a.tensor.dtype(), op, "dtype");
  run_op(a, stream, [&](Stream s) {
    CpuF32Staging f32(activation_supported(a.tensor.device(), a.tensor.dtype()), {a.tensor, b.tensor, out.tensor});
    fn(f32.in(a.tensor), f32.in(b.tensor), f32.out(out.tensor), s);
    f32.finish();
  });
  return out.object;
}

nb::tuple swiglu_backward(nb::handle gate_arg, nb::handle up_arg, nb::handle dout_arg, OptStream stream) {
  constexpr const char* op = "swiglu_backward";
  const Array gate = array_arg(gate_arg, op, "gate"), up = array_arg(up_arg, op, "up");
  const Array dout = array_arg(dout_arg, op, "dout");
  const Array dgate = empty_like(gate, gate.tensor.shape(), gate.tensor.dtype(), op, "gate.dtype");
  const Array dup = empty_like(gate, gate.tensor.shape(), gate.tensor.dtype(), op, "gate.dtype");
  run_op(gate, stream, [&](Stream s) {
    CpuF32Staging f32(activation_supported(gate.tensor.device(), gate.tensor.dtype()),
                      {gate.tensor, up.tensor, dout.tensor, dgate.tensor, dup.tensor});
    ignis::swiglu_backward(f32.in(gate.tensor), f32.in(up.tensor), f32.in(dout.tensor), f32.out(dgate.tensor),
                           f32.out(dup.tensor), s);
    f32.finish();
  });
  return nb::make_tuple(dgate.object, dup.object);
}

}  // namespace

void bind_activation(nb::module_& m) {
  const auto stream = nb::arg("stream") = nb::none();
  m.def(
      "gelu_tanh", [](nb::handle x, OptStream s) { return unary(gelu_tanh_forward, "gelu_tanh", x, s); }, nb::arg("x"),
      nb::kw_only(), stream,
      "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as torch's gelu(approximate='tanh'); any shape.");
  m.def(
      "gelu_tanh_backward",
      [](nb::handle x, nb::handle dy, OptStream s) {
        return binary(gelu_tanh_backward, "gelu_tanh_backward", "x", "dy", x, dy, s);
      },
      nb::arg("x"), nb::arg("dy"), nb::kw_only(), stream, "dx = dy * gelu_tanh'(x).");
  m.def(
      "silu", [](nb::handle x, OptStream s) { return unary(silu_forward, "silu", x, s); }, nb::arg("x"), nb::kw_only(),
      stream, "x * sigmoid(x); any shape.");
  m.def(
      "silu_backward",
      [](nb::handle x, nb::handle dy, OptStream s) {
        return binary(silu_backward, "silu_backward", "x", "dy", x, dy, s);
      },
      nb::arg("x"), nb::arg("dy"), nb::kw_only(), stream, "dx = dy * silu'(x).");
  m.def(
      "swiglu",
      [](nb::handle gate, nb::handle up, OptStream s) {
        return binary(swiglu_forward, "swiglu", "gate", "up", gate, up, s);
      },
      nb::arg("gate"), nb::arg("up"), nb::kw_only(), stream, "silu(gate) * up; gate and up of one shape.");
  m.def("swiglu_backward", &swiglu_backward, nb::arg("gate"), nb::arg("up"), nb::arg("dout"), nb::kw_only(), stream,
        "(dgate, dup) of swiglu: dgate = dout * up * silu'(gate), dup = dout * silu(gate).");
}

}  // namespace ignis::python
