#pragma once
// Linear layers on CUDA through cuBLASLt: y = x @ W^T (+ bias), optionally accumulated into y
// (beta = 1 turns the output projections into their residual adds). A bias rides in the matmul's
// epilogue (CUBLASLT_EPILOGUE_BIAS): no separate kernel and no extra pass over y; for a shape no
// algorithm takes it with, a kernel adds the bias after the product (position_embedding_add with
// the bias as a one-row table). f32 weights take f32 activations and
// compute in plain fp32 (CUBLAS_COMPUTE_32F: no TF32), the correctness mode; bf16 weights take
// bf16 activations and accumulate in fp32 into f32 outputs, the fast mode.
//
// One matmul plan (descriptors and the heuristic's algorithm) is kept per shape, so a decode step
// asks the heuristic once and later calls, graph capture included, only enqueue kernels.
#include <cstdint>
#include <memory>

#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis::engine {

class CublasLt {
 public:
  // Creates the handle and a workspace on `device`. Throws ignis::Error without CUDA.
  explicit CublasLt(Device device);
  ~CublasLt();
  CublasLt(const CublasLt&) = delete;
  CublasLt& operator=(const CublasLt&) = delete;

  // w: [out, in] f32 or bf16 on the device; x: [m, in] of w's dtype; y: [m, out] f32;
  // bias: [out] f32 on w's device, or null;
  // y = x @ w^T + bias + beta * y. x, y and bias start 256-byte aligned (cuBLASLt's default
  // assumption; every buffer from cudaMalloc is) and x and y do not overlap.
  void linear(const Tensor& w, const void* x, float* y, std::int64_t m, float beta, Stream stream,
              const Tensor* bias = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ignis::engine
