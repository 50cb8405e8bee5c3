#pragma once
// Reference fused linear layers, composed from the reference RMSNorm, GEMM and SwiGLU, in double.
#include <cstdint>
#include <span>
#include <vector>

namespace ignis::ref {

struct MatvecDims {
  std::int64_t n = 1;    // rows of x
  std::int64_t in = 1;   // features in
  std::int64_t out = 1;  // features out (ffn for the SwiGLU)
};

// y = (rmsnorm(x) * norm_weight) @ w^T. x: [n, in], norm_weight: [in], w: [out, in] -> y: [n, out].
std::vector<double> rmsnorm_matvec(std::span<const double> x, std::span<const double> norm_weight,
                                   std::span<const double> w, const MatvecDims& dims, double eps);

// y + x @ w^T. x: [n, in], w: [out, in], y: [n, out] -> [n, out].
std::vector<double> matvec_add(std::span<const double> x, std::span<const double> w, std::span<const double> y,
                               const MatvecDims& dims);

// silu(xn @ w_gate^T) * (xn @ w_up^T), xn = rmsnorm(x) * norm_weight.
// x: [n, in], norm_weight: [in], w_gate, w_up: [out, in] -> h: [n, out].
std::vector<double> rmsnorm_swiglu_matvec(std::span<const double> x, std::span<const double> norm_weight,
                                          std::span<const double> w_gate, std::span<const double> w_up,
                                          const MatvecDims& dims, double eps);

}  // namespace ignis::ref
