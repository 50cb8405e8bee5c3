#include "ref/fused_linear.h"

#include "ref/activation.h"
#include "ref/gemm.h"
#include "ref/norm.h"

namespace ignis::ref {
namespace {

// x @ w^T (+ c when beta = 1) as one [n, in] x [out, in]^T product.
// x: [n, in], w: [out, in], c: [n, out] (unread when beta == 0) -> [n, out].
std::vector<double> linear(std::span<const double> x, std::span<const double> w, std::span<const double> c,
                           const MatvecDims& d, double beta) {
  return gemm_nt(x, w, c, GemmDims{1, d.n, d.out, d.in}, 1.0, beta);
}

}  // namespace

std::vector<double> rmsnorm_matvec(std::span<const double> x, std::span<const double> norm_weight,
                                   std::span<const double> w, const MatvecDims& dims, double eps) {
  const std::vector<double> xn = rmsnorm_forward(x, norm_weight, dims.n, dims.in, eps);
  return linear(xn, w, {}, dims, 0.0);
}

std::vector<double> matvec_add(std::span<const double> x, std::span<const double> w, std::span<const double> y,
                               const MatvecDims& dims) {
  return linear(x, w, y, dims, 1.0);
}

std::vector<double> rmsnorm_swiglu_matvec(std::span<const double> x, std::span<const double> norm_weight,
                                          std::span<const double> w_gate, std::span<const double> w_up,
                                          const MatvecDims& dims, double eps) {
  const std::vector<double> xn = rmsnorm_forward(x, norm_weight, dims.n, dims.in, eps);
  return swiglu_forward(linear(xn, w_gate, {}, dims, 0.0), linear(xn, w_up, {}, dims, 0.0));
}

}  // namespace ignis::ref
