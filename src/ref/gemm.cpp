#include "ref/gemm.h"

namespace ignis::ref {
namespace {

// Shared by NN and NT: only the address of B(p, j) differs.
// a: [batch, m, k], c: [batch, m, n] (unread when beta == 0) -> [batch, m, n].
template <class BAt>
std::vector<double> gemm(std::span<const double> a, std::span<const double> c, const GemmDims& d, double alpha,
                         double beta, BAt b_at) {
  std::vector<double> out(static_cast<std::size_t>(d.batch * d.m * d.n));
  for (std::int64_t z = 0; z < d.batch; ++z)
    for (std::int64_t i = 0; i < d.m; ++i)
      for (std::int64_t j = 0; j < d.n; ++j) {
        double dot = 0.0;
        for (std::int64_t p = 0; p < d.k; ++p) dot += a[(z * d.m + i) * d.k + p] * b_at(z, p, j);
        const std::int64_t o = (z * d.m + i) * d.n + j;
        out[o] = alpha * dot + (beta == 0.0 ? 0.0 : beta * c[o]);
      }
  return out;
}

}  // namespace

std::vector<double> gemm_nn(std::span<const double> a, std::span<const double> b, std::span<const double> c,
                            const GemmDims& dims, double alpha, double beta) {
  return gemm(a, c, dims, alpha, beta,
              [&](std::int64_t z, std::int64_t p, std::int64_t j) { return b[(z * dims.k + p) * dims.n + j]; });
}

std::vector<double> gemm_nt(std::span<const double> a, std::span<const double> b, std::span<const double> c,
                            const GemmDims& dims, double alpha, double beta) {
  return gemm(a, c, dims, alpha, beta,
              [&](std::int64_t z, std::int64_t p, std::int64_t j) { return b[(z * dims.n + j) * dims.k + p]; });
}

}  // namespace ignis::ref
