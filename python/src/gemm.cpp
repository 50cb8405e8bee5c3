// ignis.gemm_nn and ignis.gemm_nt: (batched) matrix products c = alpha * a @ op(b) + beta * c.
#include <nanobind/stl/optional.h>

#include "common.h"
#include "ignis/ops/gemm.h"

namespace ignis::python {
namespace {

nb::object product(bool trans_b, nb::handle a_arg, nb::handle b_arg, nb::handle c_arg, double alpha, double beta,
                   std::optional<std::uintptr_t> stream) {
  const char* op = trans_b ? "gemm_nt" : "gemm_nn";
  const Array a = array_arg(a_arg, op, "a"), b = array_arg(b_arg, op, "b");
  const std::optional<Array> given = optional_array_arg(c_arg, op, "c", /*writable=*/true);
  check_arg(given || beta == 0.0, op, "c", "an array to accumulate into when beta != 0", "None");
  Shape shape = a.tensor.shape();  // a's rank, so that the op reports a bad rank on a or b
  if (!shape.empty()) shape.back() = extent(b.tensor, trans_b ? -2 : -1);
  const Array c = given ? *given : empty_like(a, shape, a.tensor.dtype(), op, "a.dtype");
  run_op(a, stream, [&](Stream s) {
    CpuF32Staging f32(gemm_supported(a.tensor.device(), a.tensor.dtype()), {a.tensor, b.tensor, c.tensor});
    const Tensor out = beta == 0.0 ? f32.out(c.tensor) : f32.inout(c.tensor);
    (trans_b ? gemm_nt : gemm_nn)(f32.in(a.tensor), f32.in(b.tensor), out, alpha, beta, s);
    f32.finish();
  });
  return c.object;
}

}  // namespace

void bind_gemm(nb::module_& m) {
  m.def(
      "gemm_nn",
      [](nb::handle a, nb::handle b, nb::handle c, double alpha, double beta, std::optional<std::uintptr_t> s) {
        return product(false, a, b, c, alpha, beta, s);
      },
      nb::arg("a"), nb::arg("b"), nb::arg("c") = nb::none(), nb::kw_only(), nb::arg("alpha") = 1.0,
      nb::arg("beta") = 0.0, nb::arg("stream") = nb::none(),
      "c = alpha * a @ b + beta * c. a: [batch, m, k], b: [batch, k, n] -> c: [batch, m, n] (or one matrix\n"
      "without batch). A given c is updated in place and returned; without one, a new array (beta must be 0).\n"
      "Accumulated in fp32 (fp64 for float64).");
  m.def(
      "gemm_nt",
      [](nb::handle a, nb::handle b, nb::handle c, double alpha, double beta, std::optional<std::uintptr_t> s) {
        return product(true, a, b, c, alpha, beta, s);
      },
      nb::arg("a"), nb::arg("b"), nb::arg("c") = nb::none(), nb::kw_only(), nb::arg("alpha") = 1.0,
      nb::arg("beta") = 0.0, nb::arg("stream") = nb::none(),
      "c = alpha * a @ b^T + beta * c. a: [batch, m, k], b: [batch, n, k] -> c: [batch, m, n] (or one matrix).");
}

}  // namespace ignis::python
