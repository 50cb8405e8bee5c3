#pragma once
// CUDA launcher of the fused matrix-vector products. Arguments are validated by the dispatcher
// in src/ops/fused_linear.cpp.
#include "ignis/dtype.h"
#include "ignis/stream.h"

namespace ignis::cuda {

// y (=, or += when accumulate) x' @ w^T, where x' = rmsnorm(x) * norm_weight when norm_weight is
// set, else x. With w_up set: y = silu(x' @ w^T) * (x' @ w_up^T) (w is the gate).
struct MatvecCall {
  const void* x = nullptr;            // [n, in], f32 or bf16
  DType x_dtype = DType::f32;
  const float* norm_weight = nullptr;  // [in] or null
  float eps = 0.0f;
  const void* w = nullptr;            // [out, in], bf16 or f32
  const void* w_up = nullptr;         // [out, in] like w, or null
  DType w_dtype = DType::bf16;
  void* y = nullptr;                  // [n, out], f32 or bf16 (bf16 only without accumulate)
  DType y_dtype = DType::f32;
  bool accumulate = false;
  long long n = 0, in = 0, out = 0;   // in, out < 2^31; n <= kMaxMatvecRows
};

// Rows of x beyond this would need more than 65535 row groups of the grid.
constexpr long long kMaxMatvecRows = 65535LL * 8;

void matvec(const MatvecCall& call, Stream stream);

}  // namespace ignis::cuda
