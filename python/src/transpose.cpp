// ignis.transpose: the last two dimensions swapped into a new contiguous array.
#include <nanobind/stl/optional.h>

#include <utility>

#include "common.h"
#include "ignis/ops/transpose.h"

namespace ignis::python {
namespace {

nb::object transpose_copy(nb::handle x_arg, std::optional<std::uintptr_t> stream) {
  const Array x = array_arg(x_arg, "transpose", "x");
  Shape shape = x.tensor.shape();
  if (shape.size() >= 2) std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
  const Array y = empty_like(x, shape, x.tensor.dtype(), "transpose", "x.dtype");
  run_op(x, stream, [&](Stream s) { transpose(x.tensor, y.tensor, s); });
  return y.object;
}

}  // namespace

void bind_transpose(nb::module_& m) {
  m.def("transpose", &transpose_copy, nb::arg("x"), nb::kw_only(), nb::arg("stream") = nb::none(),
        "A contiguous copy of x with its last two dimensions swapped. x: [rows, cols] or [batch, rows, cols],\n"
        "any dtype.");
}

}  // namespace ignis::python
