#pragma once
// CUDA softmax launchers. Arguments are validated by the dispatcher in src/ops/softmax.cpp.
#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis::cuda {

// x, y: [rows, cols] contiguous on the current device; f32, f16 or bf16.
void softmax_forward(const Tensor& x, const Tensor& y, Stream stream);
// y, dy, dx: [rows, cols] contiguous; f32, f16 or bf16.
void softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, Stream stream);

}  // namespace ignis::cuda
