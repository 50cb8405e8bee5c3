// ignis.rmsnorm_matvec, ignis.matvec_add and ignis.rmsnorm_swiglu_matvec: the fused decode
// matrix-vector products (CUDA only, f32 activations, bf16 or f32 weights).
#include <nanobind/stl/optional.h>

#include "common.h"
#include "ignis/ops/fused_linear.h"

namespace ignis::python {
namespace {

using OptStream = std::optional<std::uintptr_t>;

nb::object rmsnorm_matvec(nb::handle x_arg, nb::handle norm_weight_arg, nb::handle w_arg, float eps,
                          OptStream stream) {
  constexpr const char* op = "rmsnorm_matvec";
  const Array x = array_arg(x_arg, op, "x"), nw = array_arg(norm_weight_arg, op, "norm_weight");
  const Array w = array_arg(w_arg, op, "w");
  const Array y = empty_like(x, {extent(x.tensor, 0), extent(w.tensor, 0)}, DType::f32, op, "y.dtype");
  run_op(x, stream, [&](Stream s) { ignis::rmsnorm_matvec(x.tensor, nw.tensor, w.tensor, y.tensor, eps, s); });
  return y.object;
}

void matvec_add(nb::handle x_arg, nb::handle w_arg, nb::handle y_arg, OptStream stream) {
  constexpr const char* op = "matvec_add";
  const Array x = array_arg(x_arg, op, "x"), w = array_arg(w_arg, op, "w"), y = writable_arg(y_arg, op, "y");
  run_op(x, stream, [&](Stream s) { ignis::matvec_add(x.tensor, w.tensor, y.tensor, s); });
}

nb::object rmsnorm_swiglu_matvec(nb::handle x_arg, nb::handle norm_weight_arg, nb::handle w_gate_arg,
                                 nb::handle w_up_arg, float eps, std::string_view out_dtype, OptStream stream) {
  constexpr const char* op = "rmsnorm_swiglu_matvec";
  const Array x = array_arg(x_arg, op, "x"), nw = array_arg(norm_weight_arg, op, "norm_weight");
  const Array wg = array_arg(w_gate_arg, op, "w_gate"), wu = array_arg(w_up_arg, op, "w_up");
  const Array h = empty_like(x, {extent(x.tensor, 0), extent(wg.tensor, 0)}, dtype_arg(out_dtype, op, "out_dtype"),
                             op, "out_dtype");
  run_op(x, stream, [&](Stream s) {
    ignis::rmsnorm_swiglu_matvec(x.tensor, nw.tensor, wg.tensor, wu.tensor, h.tensor, eps, s);
  });
  return h.object;
}

}  // namespace

void bind_fused_linear(nb::module_& m) {
  m.def("rmsnorm_matvec", &rmsnorm_matvec, nb::arg("x"), nb::arg("norm_weight"), nb::arg("w"), nb::arg("eps"),
        nb::kw_only(), nb::arg("stream") = nb::none(),
        "y = (rms_norm(x) * norm_weight) @ w.T, returned as f32. x: [n, in] f32, norm_weight: [in] f32,\n"
        "w: [out, in] bf16 or f32; CUDA only. Meant for a few rows (decode).");
  m.def("matvec_add", &matvec_add, nb::arg("x"), nb::arg("w"), nb::arg("y"), nb::kw_only(),
        nb::arg("stream") = nb::none(),
        "y += x @ w.T in place. x: [n, in] f32 or bf16, w: [out, in] bf16 or f32, y: [n, out] f32; CUDA only.");
  m.def("rmsnorm_swiglu_matvec", &rmsnorm_swiglu_matvec, nb::arg("x"), nb::arg("norm_weight"), nb::arg("w_gate"),
        nb::arg("w_up"), nb::arg("eps"), nb::kw_only(), nb::arg("out_dtype") = "f32", nb::arg("stream") = nb::none(),
        "silu(xn @ w_gate.T) * (xn @ w_up.T), xn = rms_norm(x) * norm_weight, as out_dtype (f32 or bf16).\n"
        "x: [n, in] f32, w_gate, w_up: [ffn, in] bf16 or f32; CUDA only.");
}

}  // namespace ignis::python
