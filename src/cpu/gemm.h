#pragma once
// The engine's CPU matrix products: fp32 storage, fp32 accumulation, plain cache-friendly loops
// (a BLAS may replace them later).
#include <cstdint>

namespace ignis::cpu {

// c = alpha * a @ b + beta * c per batch entry; beta == 0 never reads c.
// a: [batch, m, k], b: [batch, k, n], c: [batch, m, n], contiguous.
void gemm_nn_f32(const float* a, const float* b, float* c, std::int64_t batch, std::int64_t m, std::int64_t n,
                 std::int64_t k, float alpha, float beta);
// c = alpha * a @ b^T + beta * c. a: [batch, m, k], b: [batch, n, k], c: [batch, m, n], contiguous.
void gemm_nt_f32(const float* a, const float* b, float* c, std::int64_t batch, std::int64_t m, std::int64_t n,
                 std::int64_t k, float alpha, float beta);

}  // namespace ignis::cpu
