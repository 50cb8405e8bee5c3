#pragma once
// CUDA batched GEMM launcher over strided operands. Arguments are validated by the callers
// (src/ops/gemm.cpp, src/ops/attention_scores.cpp), which also describe how batch index z maps
// to each operand, so attention's [batch, seqlen, heads, head_dim] tensors need no copy.
#include <cstdint>
#include <limits>

#include "ignis/dtype.h"
#include "ignis/stream.h"

namespace ignis::cuda {

// One operand of a batch of matrices. Matrix z = outer * inner_count + inner starts at
// outer * outer_stride + (inner / group) * inner_stride; its rows are `ld` elements apart.
// group > 1 lets several query heads share one kv head (GQA).
struct GemmOperand {
  const void* data = nullptr;
  std::int64_t ld = 0;
  std::int64_t outer_stride = 0;
  std::int64_t inner_stride = 0;
  std::int64_t group = 1;
};

struct GemmProblem {
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t batch = 1;        // number of products
  std::int64_t inner_count = 1;  // batch index z splits into (z / inner_count, z % inner_count)
  bool trans_b = false;          // false: B is [k, n]; true: B is [n, k]
  GemmOperand a;                 // [m, k] per product
  GemmOperand b;                 // [k, n] or [n, k]
  GemmOperand c;                 // [m, n], written (and read when beta != 0)
  double alpha = 1.0;
  double beta = 0.0;
  // Output (i, j) becomes -inf when j > i + mask_diagonal (the bottom-right aligned causal mask
  // has mask_diagonal = seqlen_k - seqlen_q). The default masks nothing.
  std::int64_t mask_diagonal = std::numeric_limits<std::int64_t>::max() / 4;
};

// All operands of `dtype` (f64, f32, f16 or bf16) on the current device.
void gemm(const GemmProblem& problem, DType dtype, Stream stream);

}  // namespace ignis::cuda
