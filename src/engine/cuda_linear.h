#pragma once
// Linear layers on CUDA through cuBLASLt: y = x @ W^T, optionally accumulated into y (beta = 1
// turns the output projections into their residual adds). f32 weights take f32 activations and
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
  // y = x @ w^T + beta * y. x and y start 256-byte aligned (cuBLASLt's default assumption; every
  // buffer from cudaMalloc is) and do not overlap.
  void linear(const Tensor& w, const void* x, float* y, std::int64_t m, float beta, Stream stream);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ignis::engine
