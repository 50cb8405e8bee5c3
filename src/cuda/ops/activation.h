#pragma once
// CUDA activation launchers. Arguments are validated by the dispatcher in src/ops/activation.cpp.
#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis::cuda {

// All tensors: same shape (flattened to n), contiguous, one of f32, f16, bf16.
void gelu_tanh_forward(const Tensor& x, const Tensor& y, Stream stream);
void gelu_tanh_backward(const Tensor& x, const Tensor& dy, const Tensor& dx, Stream stream);
void silu_forward(const Tensor& x, const Tensor& y, Stream stream);
void silu_backward(const Tensor& x, const Tensor& dy, const Tensor& dx, Stream stream);
void swiglu_forward(const Tensor& gate, const Tensor& up, const Tensor& out, Stream stream);
void swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dout, const Tensor& dgate,
                     const Tensor& dup, Stream stream);

}  // namespace ignis::cuda
