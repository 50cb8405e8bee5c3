#pragma once
// CUDA RMSNorm / LayerNorm launchers. Arguments are validated by the dispatcher in src/ops/norm.cpp.
#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis::cuda {

// x, y: [rows, dim], weight: [dim]; contiguous, f32, f16 or bf16, all one dtype.
void rmsnorm_forward(const Tensor& x, const Tensor& weight, const Tensor& y, float eps, Stream stream);
// x, dy, dx: [rows, dim], weight, dweight: [dim].
void rmsnorm_backward(const Tensor& x, const Tensor& weight, const Tensor& dy, const Tensor& dx,
                      const Tensor& dweight, float eps, Stream stream);
// x, y: [rows, dim], weight, bias: [dim].
void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y, float eps,
                       Stream stream);
// x, dy, dx: [rows, dim], weight, dweight, dbias: [dim].
void layernorm_backward(const Tensor& x, const Tensor& weight, const Tensor& dy, const Tensor& dx,
                        const Tensor& dweight, const Tensor& dbias, float eps, Stream stream);

}  // namespace ignis::cuda
