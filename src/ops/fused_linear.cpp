// Fused linear dispatcher: validates the arguments, then launches the CUDA kernel (the only
// implementation; the CPU engine composes the separate ops).
#include <cstdint>
#include <limits>

#include "ignis/ops.h"

#if IGNIS_WITH_CUDA
#include "cuda/ops/fused_linear.h"
#endif

namespace ignis {

bool fused_linear_supported(Device device, DType weight_dtype) {
  return device.is_cuda() && IGNIS_WITH_CUDA && (weight_dtype == DType::bf16 || weight_dtype == DType::f32);
}

namespace {

// A rank-2 contiguous tensor on `device`.
// t: [rows, cols].
void check_matrix(const Tensor& t, Device device, const char* where, const char* name) {
  check_dim(t, 2, where, name);
  check_contiguous(t, where, name);
  check_device(t, device, where, name);
}

// x: [n, in] with n, in in range; returns nothing, throws on a bad x.
void check_input(const Tensor& x, const char* where) {
  check_dim(x, 2, where, "x");
  check_contiguous(x, where, "x");
  check_arg(x.device().is_cuda() && IGNIS_WITH_CUDA, where, "x.device", "a CUDA device", x.device().str());
  check_arg(x.size(1) >= 1 && x.size(1) <= std::numeric_limits<std::int32_t>::max(), where, "x.size(1) (in)",
            "in [1, 2^31)", x.size(1));
#if IGNIS_WITH_CUDA
  check_arg(x.size(0) <= cuda::kMaxMatvecRows, where, "x.size(0) (n)", detail::lazy_concat("<= ", cuda::kMaxMatvecRows),
            x.size(0));
#endif
}

// w: [out, in] of a supported weight dtype on x's device.
void check_weight(const Tensor& w, const Tensor& x, const char* where, const char* name) {
  check_matrix(w, x.device(), where, name);
  check_arg(fused_linear_supported(w.device(), w.dtype()), where, detail::lazy_concat(name, ".dtype"), "bf16 or f32",
            w.dtype());
  check_shape(w, {w.size(0), x.size(1)}, where, name);
  check_arg(w.size(0) <= std::numeric_limits<std::int32_t>::max(), where, detail::lazy_concat(name, ".size(0)"),
            "< 2^31", w.size(0));
}

// norm_weight: [in] f32, x: [n, in].
void check_norm_weight(const Tensor& norm_weight, const Tensor& x, float eps, const char* where) {
  check_shape(norm_weight, {x.size(1)}, where, "norm_weight");
  check_dtype(norm_weight, DType::f32, where, "norm_weight");
  check_device(norm_weight, x.device(), where, "norm_weight");
  check_contiguous(norm_weight, where, "norm_weight");
  check_arg(eps >= 0.0f, where, "eps", ">= 0", eps);
}

// Every block reads all of x while others write the output: they must not share bytes.
// out, x: any shapes.
void check_disjoint(const Tensor& out, const Tensor& x, const char* where, const char* out_name) {
  const auto* o = static_cast<const char*>(out.data());
  const auto* i = static_cast<const char*>(x.data());
  const bool overlap = o < i + x.nbytes() && i < o + out.nbytes();
  check_arg(!overlap || out.numel() == 0 || x.numel() == 0, where, out_name, "memory disjoint from x",
            "an overlapping tensor");
}

// y: [n, out] contiguous on x's device, sharing no bytes with x.
void check_output(const Tensor& y, const Tensor& x, std::int64_t out, const char* where, const char* name) {
  check_matrix(y, x.device(), where, name);
  check_shape(y, {x.size(0), out}, where, name);
  check_disjoint(y, x, where, name);
}

#if IGNIS_WITH_CUDA
// x: [n, in], w: [out, in], y: [n, out].
cuda::MatvecCall make_call(const Tensor& x, const Tensor& w, const Tensor& y) {
  cuda::MatvecCall call;
  call.x = x.data();
  call.x_dtype = x.dtype();
  call.w = w.data();
  call.w_dtype = w.dtype();
  call.y = y.data();
  call.y_dtype = y.dtype();
  call.n = x.size(0);
  call.in = x.size(1);
  call.out = w.size(0);
  return call;
}
#endif

}  // namespace

void rmsnorm_matvec(const Tensor& x, const Tensor& norm_weight, const Tensor& w, const Tensor& y, float eps,
                    [[maybe_unused]] Stream stream) {
  constexpr const char* where = "rmsnorm_matvec";
  check_input(x, where);
  check_dtype(x, DType::f32, where, "x");
  check_norm_weight(norm_weight, x, eps, where);
  check_weight(w, x, where, "w");
  check_output(y, x, w.size(0), where, "y");
  check_dtype(y, DType::f32, where, "y");
#if IGNIS_WITH_CUDA
  cuda::MatvecCall call = make_call(x, w, y);
  call.norm_weight = norm_weight.data_as<const float>();
  call.eps = eps;
  cuda::matvec(call, stream);
#endif
}

void matvec_add(const Tensor& x, const Tensor& w, const Tensor& y, [[maybe_unused]] Stream stream) {
  constexpr const char* where = "matvec_add";
  check_input(x, where);
  check_arg(x.dtype() == DType::f32 || x.dtype() == DType::bf16, where, "x.dtype", "f32 or bf16", x.dtype());
  check_weight(w, x, where, "w");
  check_output(y, x, w.size(0), where, "y");
  check_dtype(y, DType::f32, where, "y");
#if IGNIS_WITH_CUDA
  cuda::MatvecCall call = make_call(x, w, y);
  call.accumulate = true;
  cuda::matvec(call, stream);
#endif
}

void rmsnorm_swiglu_matvec(const Tensor& x, const Tensor& norm_weight, const Tensor& w_gate, const Tensor& w_up,
                           const Tensor& h, float eps, [[maybe_unused]] Stream stream) {
  constexpr const char* where = "rmsnorm_swiglu_matvec";
  check_input(x, where);
  check_dtype(x, DType::f32, where, "x");
  check_norm_weight(norm_weight, x, eps, where);
  check_weight(w_gate, x, where, "w_gate");
  check_weight(w_up, x, where, "w_up");
  check_shape(w_up, w_gate.shape(), where, "w_up");
  check_dtype(w_up, w_gate.dtype(), where, "w_up");
  check_output(h, x, w_gate.size(0), where, "h");
  check_arg(h.dtype() == DType::f32 || h.dtype() == DType::bf16, where, "h.dtype", "f32 or bf16", h.dtype());
#if IGNIS_WITH_CUDA
  cuda::MatvecCall call = make_call(x, w_gate, h);
  call.norm_weight = norm_weight.data_as<const float>();
  call.eps = eps;
  call.w_up = w_up.data();
  cuda::matvec(call, stream);
#endif
}

}  // namespace ignis
