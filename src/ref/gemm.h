#pragma once
// Reference batched matrix products: plain loops in double precision.
#include <cstdint>
#include <span>
#include <vector>

namespace ignis::ref {

struct GemmDims {
  std::int64_t batch = 1;
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
};

// C[b] = alpha * A[b] @ B[b] + beta * C[b].
// a: [batch, m, k], b: [batch, k, n], c: [batch, m, n] -> [batch, m, n].
// With beta == 0, c is not read (it may be empty), as in BLAS.
std::vector<double> gemm_nn(std::span<const double> a, std::span<const double> b, std::span<const double> c,
                            const GemmDims& dims, double alpha = 1.0, double beta = 0.0);

// C[b] = alpha * A[b] @ B[b]^T + beta * C[b].
// a: [batch, m, k], b: [batch, n, k], c: [batch, m, n] -> [batch, m, n]. beta == 0: c is not read.
std::vector<double> gemm_nt(std::span<const double> a, std::span<const double> b, std::span<const double> c,
                            const GemmDims& dims, double alpha = 1.0, double beta = 0.0);

}  // namespace ignis::ref
