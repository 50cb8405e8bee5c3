// ignis.cast: element-wise conversion between floating dtypes.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string_view.h>

#include "common.h"
#include "ignis/ops/cast.h"

namespace ignis::python {
namespace {

nb::object cast_to(nb::handle src_arg, std::string_view dtype_text, std::optional<std::uintptr_t> stream) {
  const Array src = array_arg(src_arg, "cast", "src");
  const DType dtype = dtype_arg(dtype_text, "cast", "dtype");
  const Array dst = empty_like(src, src.tensor.shape(), dtype, "cast", "dtype");
  run_op(src, stream, [&](Stream s) { cast(src.tensor, dst.tensor, s); });
  return dst.object;
}

}  // namespace

void bind_cast(nb::module_& m) {
  m.def("cast", &cast_to, nb::arg("src"), nb::arg("dtype"), nb::kw_only(), nb::arg("stream") = nb::none(),
        "src converted to dtype (\"f64\", \"f32\", \"f16\", \"bf16\"), rounding to nearest even.\n"
        "numpy has no bf16: cast a torch tensor for that.");
}

}  // namespace ignis::python
