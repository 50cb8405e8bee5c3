#pragma once
// gemm: batched matrix products C = alpha * A @ B + beta * C (NN) and C = alpha * A @ B^T + beta * C (NT).
#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis {

// Accumulates in fp32 (fp64 for f64); f16/bf16 are storage only. The CPU runs f32, CUDA f64/f32/f16/bf16.
// Tensors are all rank 3 ([batch, ...]) or all rank 2 (one matrix), contiguous, same dtype and device.
// With beta == 0, c is only written (it may hold garbage or NaN), as in BLAS.
bool gemm_supported(Device device, DType dtype);
// a: [batch, m, k], b: [batch, k, n], c: [batch, m, n].
void gemm_nn(const Tensor& a, const Tensor& b, const Tensor& c, double alpha = 1.0, double beta = 0.0,
             Stream stream = {});
// a: [batch, m, k], b: [batch, n, k] (B stored row per output column), c: [batch, m, n].
void gemm_nt(const Tensor& a, const Tensor& b, const Tensor& c, double alpha = 1.0, double beta = 0.0,
             Stream stream = {});

}  // namespace ignis
